//! Choosing a certificate by server name, and whether it covers a host.
//!
//! The rule is the one clients check a certificate against: an exact SAN
//! name, or a wildcard SAN `*.suffix` standing for exactly one label.

use std::borrow::Cow;
use std::collections::HashMap;

/// The DNS names of one certificate's SAN, lower-cased.
#[derive(Clone, Debug, Default)]
pub(super) struct Names {
    exact: Vec<Box<str>>,
    /// `*.example.com` is kept as `example.com`.
    wildcard: Vec<Box<str>>,
}

/// Every certificate's names, indexed for the handshake. Index 0 is the default.
#[derive(Clone, Debug)]
pub(super) struct SniTable {
    exact: HashMap<Box<str>, usize>,
    wildcard: HashMap<Box<str>, usize>,
    names: Vec<Names>,
}

/// The certificate a server name selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Selected {
    pub(super) index: usize,
    /// False when no certificate names it and the default was taken.
    pub(super) by_name: bool,
}

// === impl Names ===

impl Names {
    /// From SAN DNS entries as written in the certificate. Entries with a
    /// `*` anywhere but a whole first label (`f*.example.com`) match nothing
    /// and are left out, as browsers do.
    pub(super) fn new<'a>(dns: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names = Self::default();
        for name in dns {
            let name = normalize(name);
            if let Some(suffix) = name.strip_prefix("*.") {
                if !suffix.is_empty() && !suffix.contains('*') {
                    names.wildcard.push(suffix.into());
                }
            } else if !name.is_empty() && !name.contains('*') {
                names.exact.push(name.into());
            }
        }
        names
    }

    pub(super) fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty()
    }

    /// As written in a certificate: `a.example.com`, `*.example.com`.
    pub(super) fn to_strings(&self) -> Vec<String> {
        let exact = self.exact.iter().map(|name| name.to_string());
        let wildcard = self.wildcard.iter().map(|suffix| format!("*.{suffix}"));
        exact.chain(wildcard).collect()
    }

    /// `host` must already be normalized.
    fn covers(&self, host: &str) -> bool {
        self.exact.iter().any(|name| **name == *host)
            || parent(host).is_some_and(|p| self.wildcard.iter().any(|suffix| **suffix == *p))
    }
}

// === impl SniTable ===

impl SniTable {
    /// Where two certificates claim one name, the earlier one serves it.
    pub(super) fn new(names: Vec<Names>) -> Self {
        let mut exact = HashMap::new();
        let mut wildcard = HashMap::new();
        for (index, names) in names.iter().enumerate() {
            for name in &names.exact {
                exact.entry(name.clone()).or_insert(index);
            }
            for suffix in &names.wildcard {
                wildcard.entry(suffix.clone()).or_insert(index);
            }
        }
        Self {
            exact,
            wildcard,
            names,
        }
    }

    /// Exact name first, then a one-label wildcard, else the default (index 0).
    pub(super) fn select(&self, sni: Option<&str>) -> Selected {
        let found = sni.map(normalize).and_then(|name| {
            self.exact
                .get(&*name)
                .or_else(|| parent(&name).and_then(|p| self.wildcard.get(p)))
                .copied()
        });
        match found {
            Some(index) => Selected {
                index,
                by_name: true,
            },
            None => Selected {
                index: 0,
                by_name: false,
            },
        }
    }

    /// Whether the certificate `sni` selects covers `host`.
    pub(super) fn covers(&self, sni: Option<&str>, host: &str) -> bool {
        let host = normalize(host);
        let selected = self.select(sni);
        // The usual case: the client asked for the host it now names.
        if selected.by_name && sni.is_some_and(|sni| normalize(sni) == host) {
            return true;
        }
        self.names
            .get(selected.index)
            .is_some_and(|names| names.covers(&host))
    }

    pub(super) fn names(&self) -> &[Names] {
        &self.names
    }
}

/// `a.example.com` -> `example.com`; `None` for one label or an empty one.
fn parent(name: &str) -> Option<&str> {
    let (first, rest) = name.split_once('.')?;
    (!first.is_empty() && !rest.is_empty()).then_some(rest)
}

/// Lower-case, without a trailing dot; borrowed in the usual (already clean) case.
fn normalize(name: &str) -> Cow<'_, str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> SniTable {
        SniTable::new(vec![
            Names::new(["a.test", "*.a.test"]),
            Names::new(["b.test", "A.test", "*.c.test", "f*.d.test"]),
        ])
    }

    fn pick(sni: &str) -> (usize, bool) {
        let s = table().select(Some(sni));
        (s.index, s.by_name)
    }

    #[test]
    fn exact_then_one_label_wildcard_then_default() {
        assert_eq!(pick("a.test"), (0, true));
        assert_eq!(pick("x.a.test"), (0, true));
        assert_eq!(pick("b.test"), (1, true));
        assert_eq!(pick("x.c.test"), (1, true));
        assert_eq!(pick("y.x.a.test"), (0, false));
        assert_eq!(pick("c.test"), (0, false));
        assert_eq!(pick("other.test"), (0, false));
        assert_eq!(pick("fx.d.test"), (0, false));
        assert_eq!(
            table().select(None),
            Selected {
                index: 0,
                by_name: false
            }
        );
    }

    #[test]
    fn case_and_trailing_dot_do_not_matter() {
        assert_eq!(pick("B.Test."), (1, true));
        assert_eq!(pick("X.A.TEST"), (0, true));
    }

    #[test]
    fn first_certificate_wins_a_shared_name() {
        assert_eq!(pick("a.test"), (0, true));
    }

    #[test]
    fn covers_checks_the_selected_certificate() {
        let t = table();
        assert!(t.covers(Some("b.test"), "b.test"));
        assert!(t.covers(Some("b.test"), "x.c.test"));
        assert!(!t.covers(Some("b.test"), "x.a.test"));
        assert!(t.covers(Some("a.test"), "x.a.test"));
        assert!(!t.covers(Some("a.test"), "y.x.a.test"));
        assert!(!t.covers(Some("a.test"), "b.test"));
        // No SNI, or an unknown one: the default certificate.
        assert!(t.covers(None, "a.test"));
        assert!(t.covers(Some("unknown.test"), "z.a.test"));
        assert!(!t.covers(None, "b.test"));
        assert!(t.covers(Some("B.TEST"), "B.test"));
    }

    #[test]
    fn names_read_back_as_written() {
        assert_eq!(
            Names::new(["A.test.", "*.a.test", "f*.a.test", "*"]).to_strings(),
            ["a.test", "*.a.test"]
        );
    }
}
