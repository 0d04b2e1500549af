//! The prefix-only fast path: one longest-prefix lookup instead of a scan of routes.

/// foldhash, seeded per process: a fraction of SipHash's cost for a short
/// key, and the keys are the configuration's (a request only looks one up).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use super::matcher::Route;

/// Prefix -> index of the first route (in rank order) with that prefix.
#[derive(Debug)]
pub(super) struct PrefixIndex {
    routes: HashMap<Box<str>, usize>,
    /// No prefix is longer: longer candidates are skipped without hashing.
    longest: usize,
}

impl PrefixIndex {
    /// The index, if every route is a plain prefix with no other condition.
    pub(super) fn build<T>(routes: &[Route<T>]) -> Option<Self> {
        let mut index = PrefixIndex {
            routes: HashMap::with_capacity_and_hasher(routes.len(), Default::default()),
            longest: 0,
        };
        for (i, route) in routes.iter().enumerate() {
            let prefix = route.plain_prefix()?;
            // Routes are in rank order, which is file order among equal prefixes.
            index.routes.entry(prefix.into()).or_insert(i);
            index.longest = index.longest.max(prefix.len());
        }
        Some(index)
    }

    /// The route with the longest prefix covering `path`: probes `path`, then each
    /// parent at a `/` boundary, longest first.
    #[inline]
    pub(super) fn lookup(&self, path: &str) -> Option<usize> {
        let mut end = path.len();
        loop {
            let candidate = if end == 0 { "/" } else { &path[..end] };
            if candidate.len() <= self.longest
                && let Some(&i) = self.routes.get(candidate)
            {
                return Some(i);
            }
            match path.as_bytes()[..end].iter().rposition(|&b| b == b'/') {
                // `/` was just probed as the whole path.
                Some(0) if end == 1 => return None,
                Some(slash) => end = slash,
                None => return None,
            }
        }
    }
}
