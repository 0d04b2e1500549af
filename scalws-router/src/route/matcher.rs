//! A compiled route: its conditions, how it tests a request, and how it ranks.

use std::cmp::Reverse;

use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::query;

/// A route ready for matching; built by [`RouteTableBuilder`](super::RouteTableBuilder).
#[derive(Debug)]
pub(super) struct Route<T> {
    pub(super) path: PathMatcher,
    pub(super) methods: Option<Box<[Method]>>,
    pub(super) headers: Box<[(HeaderName, HeaderValue)]>,
    pub(super) query: Box<[(Box<str>, Box<str>)]>,
    pub(super) target: T,
}

#[derive(Debug)]
pub(super) enum PathMatcher {
    Exact(Box<str>),
    /// Without trailing slash, except `/` itself.
    Prefix(Box<str>),
    /// One router per pattern, so that patterns matchit finds conflicting stay legal.
    Pattern {
        router: matchit::Router<()>,
        literal_len: usize,
        /// As written, for explanations.
        pattern: Box<str>,
    },
}

/// Sort key: greater ranks first (SPEC section 4), file order breaks ties.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Rank {
    exact: bool,
    /// Prefix length or a pattern's literal characters, on one scale.
    specificity: usize,
    methods: bool,
    headers: usize,
    query: usize,
}

// === impl Route ===

impl<T> Route<T> {
    /// The path condition; `Some` holds the captured parameters (none unless a pattern).
    #[inline]
    pub(super) fn match_path<'r, 'p>(&'r self, path: &'p str) -> Option<matchit::Params<'r, 'p>> {
        match &self.path {
            PathMatcher::Exact(exact) => (path == &**exact).then(matchit::Params::new),
            PathMatcher::Prefix(prefix) => prefix_matches(prefix, path).then(matchit::Params::new),
            PathMatcher::Pattern { router, .. } => router.at(path).ok().map(|m| m.params),
        }
    }

    #[inline]
    pub(super) fn allows(&self, method: &Method) -> bool {
        self.methods.as_ref().is_none_or(|m| m.contains(method))
    }

    /// The header and query conditions.
    #[inline]
    pub(super) fn conditions_hold(&self, query: Option<&str>, headers: &HeaderMap) -> bool {
        self.headers
            .iter()
            .all(|(name, value)| headers.get_all(name).iter().any(|v| v == value))
            && (self.query.is_empty()
                || query.is_some_and(|q| {
                    self.query
                        .iter()
                        .all(|(key, value)| query::has_pair(q, key, value))
                }))
    }

    /// A plain prefix with no other condition, for the prefix-only fast path.
    pub(super) fn plain_prefix(&self) -> Option<&str> {
        match &self.path {
            PathMatcher::Prefix(prefix)
                if self.methods.is_none() && self.headers.is_empty() && self.query.is_empty() =>
            {
                Some(prefix)
            }
            _ => None,
        }
    }

    pub(super) fn rank(&self) -> Reverse<Rank> {
        let (exact, specificity) = match &self.path {
            PathMatcher::Exact(path) => (true, path.len()),
            PathMatcher::Prefix(prefix) => (false, prefix.len()),
            PathMatcher::Pattern { literal_len, .. } => (false, *literal_len),
        };
        Reverse(Rank {
            exact,
            specificity,
            methods: self.methods.is_some(),
            headers: self.headers.len(),
            query: self.query.len(),
        })
    }
}

/// Whether `prefix` covers `path` on a segment boundary.
#[inline]
pub(super) fn prefix_matches(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/') || prefix == "/",
        None => false,
    }
}

/// The number of literal bytes in a matchit pattern: `{{` and `}}` count one,
/// `{param}` and `{*rest}` none.
/// The parameters of a pattern: each `{name}` or `{*name}` (`{{` is a literal brace).
pub(super) fn parameters(pattern: &str) -> usize {
    let bytes = pattern.as_bytes();
    let (mut count, mut i) = (0, 0);
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'{', Some(b'{')) | (b'}', Some(b'}')) => i += 2,
            (b'{', _) => (count, i) = (count + 1, i + 1),
            _ => i += 1,
        }
    }
    count
}

pub(super) fn literal_len(pattern: &str) -> usize {
    let bytes = pattern.as_bytes();
    let (mut count, mut i) = (0, 0);
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'{', Some(b'{')) | (b'}', Some(b'}')) => (count, i) = (count + 1, i + 2),
            (b'{', _) => {
                let close = bytes[i..].iter().position(|&b| b == b'}');
                i += close.map_or(bytes.len() - i, |c| c + 1);
            }
            _ => (count, i) = (count + 1, i + 1),
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_matches_whole_segments() {
        assert!(prefix_matches("/api", "/api"));
        assert!(prefix_matches("/api", "/api/"));
        assert!(prefix_matches("/api", "/api/x/y"));
        assert!(!prefix_matches("/api", "/apix"));
        assert!(!prefix_matches("/api", "/ap"));
        assert!(!prefix_matches("/api", "/"));
        assert!(prefix_matches("/", "/"));
        assert!(prefix_matches("/", "/anything"));
        assert!(prefix_matches("/", "//x"));
    }

    #[test]
    fn counts_pattern_literals() {
        assert_eq!(literal_len("/users/{id}"), 7);
        assert_eq!(literal_len("/users/{id}/posts"), 13);
        assert_eq!(literal_len("/assets/{*rest}"), 8);
        assert_eq!(literal_len("/img-{id}.png"), 9);
        assert_eq!(literal_len("/{{x}}"), 4);
        assert_eq!(literal_len("/{*rest}"), 1);
    }
}
