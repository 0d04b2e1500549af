//! Hostnames: Gateway API wildcards, their intersection, and which listener
//! owns a hostname (listener isolation).

use std::cmp::Ordering;

/// A hostname as the Gateway API writes it: `a.example.com`, `*.example.com`
/// (one or more labels), or none (every host).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Hostname {
    /// Every host.
    Any,
    /// `*.SUFFIX`: one or more labels before `SUFFIX`.
    Wildcard(String),
    /// One name.
    Exact(String),
}

impl Hostname {
    /// Lower-cased, one trailing dot removed; `None` or `""` is `Any`.
    pub(crate) fn parse(text: Option<&str>) -> Self {
        let text = text
            .unwrap_or("")
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if text.is_empty() || text == "*" {
            Self::Any
        } else if let Some(suffix) = text.strip_prefix("*.") {
            Self::Wildcard(suffix.to_owned())
        } else {
            Self::Exact(text)
        }
    }

    /// Whether every host `other` matches is matched by `self`.
    pub(crate) fn covers(&self, other: &Hostname) -> bool {
        match (self, other) {
            (Self::Any, _) => true,
            (_, Self::Any) => false,
            (Self::Exact(a), Self::Exact(b)) => a == b,
            (Self::Exact(_), Self::Wildcard(_)) => false,
            (Self::Wildcard(s), Self::Exact(h)) => below(h, s),
            (Self::Wildcard(s), Self::Wildcard(t)) => s == t || below(t, s),
        }
    }

    /// The hosts both match, as one hostname, if any.
    pub(crate) fn intersect(&self, other: &Hostname) -> Option<Hostname> {
        if self.covers(other) {
            Some(other.clone())
        } else if other.covers(self) {
            Some(self.clone())
        } else {
            None
        }
    }

    /// More specific first: exact names, then wildcards by suffix length, then `Any`.
    pub(crate) fn specificity(&self) -> (u8, usize) {
        match self {
            Self::Exact(h) => (2, h.len()),
            Self::Wildcard(s) => (1, s.len()),
            Self::Any => (0, 0),
        }
    }

    /// The ScalWS domain pattern: a Gateway `*.` is ScalWS's `**.` (one or
    /// more labels); Ingress callers use [`ingress_pattern`] instead.
    pub(crate) fn gateway_pattern(&self) -> String {
        match self {
            Self::Any => "*".to_owned(),
            Self::Wildcard(s) => format!("**.{s}"),
            Self::Exact(h) => h.clone(),
        }
    }
}

/// An Ingress host: `*.foo.com` is exactly one label (ScalWS's `*.`).
pub(crate) fn ingress_pattern(host: Option<&str>) -> String {
    match Hostname::parse(host) {
        Hostname::Any => "*".to_owned(),
        Hostname::Wildcard(s) => format!("*.{s}"),
        Hostname::Exact(h) => h,
    }
}

/// `host` has at least one label before `.suffix`.
fn below(host: &str, suffix: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

/// The hostnames a route serves under a listener: the intersection of the
/// listener's hostname with each of the route's (the listener's alone when
/// the route names none). Empty: they share no host.
pub(crate) fn effective(listener: &Hostname, route: &[Hostname]) -> Vec<Hostname> {
    if route.is_empty() {
        return vec![listener.clone()];
    }
    let mut out: Vec<Hostname> = route.iter().filter_map(|h| listener.intersect(h)).collect();
    out.sort();
    out.dedup();
    out
}

/// Compares two listener hostnames by how specifically they match.
pub(crate) fn more_specific(a: &Hostname, b: &Hostname) -> Ordering {
    a.specificity().cmp(&b.specificity())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Hostname {
        Hostname::parse(Some(s))
    }

    #[test]
    fn wildcards_match_one_or_more_labels() {
        assert!(h("*.example.com").covers(&h("a.example.com")));
        assert!(h("*.example.com").covers(&h("a.b.example.com")));
        assert!(!h("*.example.com").covers(&h("example.com")));
        assert!(!h("*.example.com").covers(&h("aexample.com")));
        assert!(h("*.example.com").covers(&h("*.foo.example.com")));
        assert!(!h("*.foo.example.com").covers(&h("*.example.com")));
        assert!(Hostname::Any.covers(&h("x")));
    }

    #[test]
    fn intersection_takes_the_narrower() {
        assert_eq!(
            effective(&h("*.example.com"), &[h("foo.example.com"), h("other.org")]),
            vec![h("foo.example.com")]
        );
        assert_eq!(
            effective(&h("foo.example.com"), &[h("*.example.com")]),
            vec![h("foo.example.com")]
        );
        assert_eq!(effective(&Hostname::Any, &[]), vec![Hostname::Any]);
        assert!(effective(&h("a.com"), &[h("b.com")]).is_empty());
        assert_eq!(h("*.Example.COM.").gateway_pattern(), "**.example.com");
        assert_eq!(ingress_pattern(Some("*.foo.com")), "*.foo.com");
    }
}
