//! Large tables that are not prefix-only: the routes whose path can match a
//! request, found from its path, so a lookup looks at those instead of
//! scanning every route (a scan of 10,000 routes took 29 µs).
//!
//! The candidates are a superset of the routes whose path matches, in
//! precedence order; the lookup then applies exactly the scan's rules to
//! them, so the answer is the scan's. An exact route can match only its own
//! path; a prefix route only the path itself, a part of it that ends before
//! a `/`, or `/`; a pattern whose first segment is literal only paths with
//! that first segment. Patterns with a parameter in their first segment are
//! candidates for every path.

/// foldhash, seeded per process: a fraction of SipHash's cost for a short
/// key, and the keys are the configuration's (a request only looks one up).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use super::matcher::{PathMatcher, Route};

/// Below this many routes, a scan is as quick as the index.
pub(super) const MIN_ROUTES: usize = 32;

#[derive(Debug)]
pub(super) struct CandidateIndex {
    exact: HashMap<Box<str>, Vec<usize>>,
    prefix: HashMap<Box<str>, Vec<usize>>,
    /// No prefix is longer: longer parts of the path are not hashed.
    longest_prefix: usize,
    /// Patterns by their first segment, where it is literal.
    by_first_segment: HashMap<Box<str>, Vec<usize>>,
    /// Patterns with a parameter in their first segment.
    anywhere: Vec<usize>,
}

impl CandidateIndex {
    /// The index of `routes` (in precedence order), if there are at least
    /// `min_routes` of them and it narrows the scan: not when most are
    /// patterns with a parameter in their first segment, candidates for
    /// every path (copying and sorting them would cost more than the scan).
    pub(super) fn build<T>(routes: &[Route<T>], min_routes: usize) -> Option<Self> {
        if routes.len() < min_routes {
            return None;
        }
        let mut index = Self {
            exact: HashMap::default(),
            prefix: HashMap::default(),
            longest_prefix: 0,
            by_first_segment: HashMap::default(),
            anywhere: Vec::new(),
        };
        for (i, route) in routes.iter().enumerate() {
            match &route.path {
                PathMatcher::Exact(path) => index.exact.entry(path.clone()).or_default().push(i),
                PathMatcher::Prefix(prefix) => {
                    index.longest_prefix = index.longest_prefix.max(prefix.len());
                    index.prefix.entry(prefix.clone()).or_default().push(i);
                }
                PathMatcher::Pattern { pattern, .. } => match first_segment(pattern) {
                    Some(segment) if !segment.contains(['{', '}']) => index
                        .by_first_segment
                        .entry(segment.into())
                        .or_default()
                        .push(i),
                    _ => index.anywhere.push(i),
                },
            }
        }
        (index.anywhere.len() * 2 <= routes.len() || min_routes == 0).then_some(index)
    }

    /// Fills `out` with the routes that may match `path`, in precedence order.
    pub(super) fn candidates(&self, path: &str, out: &mut Vec<usize>) {
        out.clear();
        if let Some(routes) = self.exact.get(path) {
            out.extend(routes);
        }
        // The path, then each part of it that ends before a `/`, then `/`.
        let mut end = path.len();
        loop {
            let part = if end == 0 { "/" } else { &path[..end] };
            if part.len() <= self.longest_prefix
                && let Some(routes) = self.prefix.get(part)
            {
                out.extend(routes);
            }
            match path.as_bytes()[..end].iter().rposition(|&b| b == b'/') {
                // `/` was just probed as the whole path.
                Some(0) if end == 1 => break,
                Some(slash) => end = slash,
                None => break,
            }
        }
        if let Some(routes) = first_segment(path).and_then(|s| self.by_first_segment.get(s)) {
            out.extend(routes);
        }
        out.extend(&self.anywhere);
        // Each route is in one list only: sorting restores precedence order.
        out.sort_unstable();
    }
}

/// The first segment of an absolute path (`users` of `/users/42`, empty for
/// `/`); `None` for a path without a leading `/`.
fn first_segment(path: &str) -> Option<&str> {
    let rest = path.strip_prefix('/')?;
    Some(rest.split('/').next().unwrap_or(rest))
}
