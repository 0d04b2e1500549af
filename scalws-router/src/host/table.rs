//! The per-listener host table: domain pattern -> application.

use std::collections::HashMap;

use super::HostPattern;

/// The maps a request is looked up in: foldhash, seeded per process, costs
/// a fraction of std's SipHash for a short key. The keys are the
/// configuration's; a request only looks one up, so it cannot grow a chain.
type Lookup<T> = HashMap<Box<str>, T, foldhash::fast::RandomState>;

/// Collects `(pattern, application)` pairs and refuses a domain claimed twice.
#[derive(Debug)]
pub struct HostTableBuilder<T> {
    exact: HashMap<Box<str>, Claim<T>>,
    one_label: HashMap<Box<str>, Claim<T>>,
    any_labels: HashMap<Box<str>, Claim<T>>,
    catch_all: Option<Claim<T>>,
}

/// A value and the application that claimed its domain, for the duplicate error.
#[derive(Debug)]
struct Claim<T> {
    owner: Box<str>,
    value: T,
}

/// The same domain pattern was given by two applications (or twice by one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("domain \"{domain}\" is claimed by both \"{first}\" and \"{second}\"")]
pub struct DuplicateDomain {
    /// The pattern, as in config (`*.example.com`).
    pub domain: String,
    /// The application that claimed it first.
    pub first: String,
    /// The application that claimed it again.
    pub second: String,
}

/// Which entry of a [`HostTable`] a host found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEntry {
    /// `example.com`: the host itself.
    Exact(Box<str>),
    /// `*.suffix`: one label before the suffix.
    OneLabel(Box<str>),
    /// `**.suffix`: any labels before the suffix.
    AnyLabels(Box<str>),
    /// `*`: the catch-all.
    CatchAll,
}

impl std::fmt::Display for HostEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostEntry::Exact(host) => write!(f, "{host} (exact)"),
            HostEntry::OneLabel(suffix) => write!(f, "*.{suffix} (one label)"),
            HostEntry::AnyLabels(suffix) => write!(f, "**.{suffix} (any labels)"),
            HostEntry::CatchAll => f.write_str("* (catch-all)"),
        }
    }
}

/// Maps a normalised host to a value; immutable once built.
///
/// Lookup order (SPEC section 3): exact name, `*.suffix`, `**.suffix` (longest suffix
/// first), then the `*` catch-all.
#[derive(Debug)]
pub struct HostTable<T> {
    exact: Lookup<T>,
    one_label: Lookup<T>,
    any_labels: Lookup<T>,
    catch_all: Option<T>,
}

// === impl HostTableBuilder ===

impl<T> HostTableBuilder<T> {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            exact: HashMap::new(),
            one_label: HashMap::new(),
            any_labels: HashMap::new(),
            catch_all: None,
        }
    }

    /// Adds `pattern` for `value`; `owner` names the application, for the duplicate error.
    pub fn insert(
        &mut self,
        pattern: HostPattern,
        owner: &str,
        value: T,
    ) -> Result<(), DuplicateDomain> {
        let claim = Claim {
            owner: owner.into(),
            value,
        };
        let first = match &pattern {
            HostPattern::Exact(name) => self.exact.get(name),
            HostPattern::OneLabel(suffix) => self.one_label.get(suffix),
            HostPattern::AnyLabels(suffix) => self.any_labels.get(suffix),
            HostPattern::CatchAll => self.catch_all.as_ref(),
        };
        if let Some(first) = first {
            return Err(DuplicateDomain {
                domain: pattern.to_string(),
                first: first.owner.to_string(),
                second: owner.to_owned(),
            });
        }
        match pattern {
            HostPattern::Exact(name) => {
                self.exact.insert(name, claim);
            }
            HostPattern::OneLabel(suffix) => {
                self.one_label.insert(suffix, claim);
            }
            HostPattern::AnyLabels(suffix) => {
                self.any_labels.insert(suffix, claim);
            }
            HostPattern::CatchAll => self.catch_all = Some(claim),
        }
        Ok(())
    }

    /// The immutable table.
    pub fn build(self) -> HostTable<T> {
        fn values<T>(map: HashMap<Box<str>, Claim<T>>) -> Lookup<T> {
            map.into_iter().map(|(k, c)| (k, c.value)).collect()
        }
        HostTable {
            exact: values(self.exact),
            one_label: values(self.one_label),
            any_labels: values(self.any_labels),
            catch_all: self.catch_all.map(|c| c.value),
        }
    }
}

impl<T> Default for HostTableBuilder<T> {
    fn default() -> Self {
        Self::new()
    }
}

// === impl HostTable ===

impl<T> HostTable<T> {
    /// The value for `host`, which must come from [`normalize_host`](crate::normalize_host).
    #[inline]
    pub fn get(&self, host: &str) -> Option<&T> {
        // The hot path: one hash lookup.
        match self.exact.get(host) {
            Some(value) => Some(value),
            None => self.get_wildcard(host),
        }
    }

    #[cold]
    #[inline(never)]
    fn get_wildcard(&self, host: &str) -> Option<&T> {
        // No wildcard domains (a table of exact names and `*`, or `*` alone):
        // no suffix to look up.
        if self.one_label.is_empty() && self.any_labels.is_empty() {
            return self.catch_all.as_ref();
        }
        // Suffixes of `host` after each dot, longest first.
        let mut suffixes = host.match_indices('.').map(|(i, _)| &host[i + 1..]);
        if let Some(first) = suffixes.next() {
            if let Some(value) = self.one_label.get(first) {
                return Some(value);
            }
            if !self.any_labels.is_empty() {
                let mut any = std::iter::once(first).chain(suffixes);
                if let Some(value) = any.find_map(|suffix| self.any_labels.get(suffix)) {
                    return Some(value);
                }
            }
        }
        self.catch_all.as_ref()
    }

    /// The value for `host` and the entry that gave it: what `get` does,
    /// told step by step (for `scalwsd explain`; not on the request path).
    pub fn explain(&self, host: &str) -> Option<(&T, HostEntry)> {
        if let Some(value) = self.exact.get(host) {
            return Some((value, HostEntry::Exact(host.into())));
        }
        let mut suffixes = host.match_indices('.').map(|(i, _)| &host[i + 1..]);
        if let Some(first) = suffixes.next() {
            if let Some(value) = self.one_label.get(first) {
                return Some((value, HostEntry::OneLabel(first.into())));
            }
            let any = std::iter::once(first).chain(suffixes);
            for suffix in any {
                if let Some(value) = self.any_labels.get(suffix) {
                    return Some((value, HostEntry::AnyLabels(suffix.into())));
                }
            }
        }
        self.catch_all
            .as_ref()
            .map(|value| (value, HostEntry::CatchAll))
    }

    /// Whether the table holds no pattern at all.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
            && self.one_label.is_empty()
            && self.any_labels.is_empty()
            && self.catch_all.is_none()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn table(patterns: &[&'static str]) -> HostTable<&'static str> {
        let mut builder = HostTableBuilder::new();
        for &p in patterns {
            builder
                .insert(HostPattern::parse(p).unwrap(), p, p)
                .unwrap();
        }
        builder.build()
    }

    #[test]
    fn exact_name() {
        let t = table(&["example.com"]);
        assert_eq!(t.get("example.com"), Some(&"example.com"));
        assert_eq!(t.get("www.example.com"), None);
        assert_eq!(t.get("example.co"), None);
    }

    #[test]
    fn one_label_wildcard_matches_exactly_one_label() {
        let t = table(&["*.example.com"]);
        assert_eq!(t.get("a.example.com"), Some(&"*.example.com"));
        assert_eq!(t.get("a.b.example.com"), None);
        assert_eq!(t.get("example.com"), None);
        assert_eq!(t.get("aexample.com"), None);
    }

    #[test]
    fn any_labels_wildcard_matches_one_or_more_labels() {
        let t = table(&["**.example.org"]);
        assert_eq!(t.get("a.example.org"), Some(&"**.example.org"));
        assert_eq!(t.get("a.b.example.org"), Some(&"**.example.org"));
        assert_eq!(t.get("example.org"), None);
        assert_eq!(t.get("aexample.org"), None);
    }

    #[test]
    fn longest_suffix_first() {
        let t = table(&["**.org", "**.example.org", "**.b.example.org"]);
        assert_eq!(t.get("a.b.example.org"), Some(&"**.b.example.org"));
        assert_eq!(t.get("x.a.b.example.org"), Some(&"**.b.example.org"));
        assert_eq!(t.get("a.c.example.org"), Some(&"**.example.org"));
        assert_eq!(t.get("b.example.org"), Some(&"**.example.org"));
        assert_eq!(t.get("example.org"), Some(&"**.org"));

        let t = table(&["*.example.com", "*.b.example.com"]);
        assert_eq!(t.get("a.b.example.com"), Some(&"*.b.example.com"));
        assert_eq!(t.get("b.example.com"), Some(&"*.example.com"));
    }

    #[test]
    fn exact_beats_wildcards_and_one_label_beats_any_labels() {
        let t = table(&["*", "**.example.com", "*.example.com", "a.example.com"]);
        assert_eq!(t.get("a.example.com"), Some(&"a.example.com"));
        assert_eq!(t.get("b.example.com"), Some(&"*.example.com"));
        assert_eq!(t.get("a.b.example.com"), Some(&"**.example.com"));
        assert_eq!(t.get("example.com"), Some(&"*"));

        // `*.` wins even over a longer `**.` suffix: it is a whole step earlier.
        let t = table(&["*.example.com", "**.b.example.com"]);
        assert_eq!(t.get("b.example.com"), Some(&"*.example.com"));
        assert_eq!(t.get("a.b.example.com"), Some(&"**.b.example.com"));
    }

    #[test]
    fn catch_all_and_no_match() {
        let t = table(&["*"]);
        assert_eq!(t.get("anything.test"), Some(&"*"));
        assert_eq!(t.get("localhost"), Some(&"*"));
        assert_eq!(t.get("[::1]"), Some(&"*"));

        let t = table(&["example.com", "*.example.com"]);
        assert_eq!(t.get("example.net"), None);
        assert_eq!(t.get("localhost"), None);

        // No wildcard domains: exact names, then `*` or nothing.
        let t = table(&["example.com", "*"]);
        assert_eq!(t.get("example.com"), Some(&"example.com"));
        assert_eq!(t.get("a.example.com"), Some(&"*"));
        let t = table(&["example.com"]);
        assert_eq!(t.get("a.example.com"), None);
    }

    #[test]
    fn emptiness() {
        assert!(table(&[]).is_empty());
        assert!(!table(&["*"]).is_empty());
        assert!(!table(&["**.a"]).is_empty());
        assert!(HostTableBuilder::<()>::default().build().get("a").is_none());
    }

    #[test]
    fn duplicate_domain_names_both_applications() {
        for (first, second) in [
            ("example.com", "Example.com."),
            ("*.example.com", "*.example.com"),
            ("**.example.com", "**.EXAMPLE.com"),
            ("*", "*"),
        ] {
            let mut b = HostTableBuilder::new();
            b.insert(HostPattern::parse(first).unwrap(), "site", 1)
                .unwrap();
            let err = b
                .insert(HostPattern::parse(second).unwrap(), "blog", 2)
                .unwrap_err();
            let domain = HostPattern::parse(first).unwrap().to_string();
            assert_eq!(
                err.to_string(),
                format!("domain \"{domain}\" is claimed by both \"site\" and \"blog\"")
            );
            // The first claim stays.
            let t = b.build();
            assert!(t.get("x.example.com").or(t.get("example.com")) == Some(&1));
        }
    }

    #[test]
    fn different_kinds_on_the_same_suffix_do_not_clash() {
        let mut b = HostTableBuilder::new();
        for p in ["example.com", "*.example.com", "**.example.com"] {
            b.insert(HostPattern::parse(p).unwrap(), p, p).unwrap();
        }
        assert_eq!(b.build().get("a.example.com"), Some(&"*.example.com"));
    }
}
