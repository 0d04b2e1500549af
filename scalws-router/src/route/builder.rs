//! Compiling route specs into a ranked, immutable [`RouteTable`].

use crate::path::{BadPath, normalize_path};

use super::index::{self, CandidateIndex};
use super::matcher::{PathMatcher, Route, literal_len, parameters};
use super::prefix::PrefixIndex;
use super::spec::{PathMatch, RouteSpec};
use super::table::RouteTable;

/// The most parameters one `pattern` may have.
const MAX_PARAMETERS: usize = 16;

/// Collects an application's routes in file order.
#[derive(Debug)]
pub struct RouteTableBuilder<T> {
    routes: Vec<Route<T>>,
}

/// A route that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid route path \"{path}\": {reason}")]
pub struct InvalidRoute {
    /// The path or pattern as configured.
    pub path: String,
    /// What is wrong with the route.
    pub reason: String,
}

impl<T> RouteTableBuilder<T> {
    /// An empty builder.
    pub fn new() -> Self {
        Self { routes: Vec::new() }
    }

    /// Adds the next route in file order.
    ///
    /// Refused: a path not starting with `/`, an `exact` or `prefix` path with a
    /// malformed percent-escape or one that climbs above the root, a pattern matchit
    /// rejects (with matchit's reason), and an empty `methods` list.
    ///
    /// `exact` and `prefix` paths are normalised like request paths, so `/%7Eme/` is
    /// the prefix `/~me`.
    pub fn route(&mut self, spec: RouteSpec<T>) -> Result<&mut Self, InvalidRoute> {
        let invalid = |reason: String| InvalidRoute {
            path: spec.path.as_str().to_owned(),
            reason,
        };
        if !spec.path.as_str().starts_with('/') {
            return Err(invalid("must start with \"/\"".into()));
        }
        if spec.methods.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid("methods must not be empty".into()));
        }
        let path = match &spec.path {
            PathMatch::Exact(path) => PathMatcher::Exact(normal(path).map_err(invalid)?.into()),
            PathMatch::Prefix(path) => {
                let path = normal(path).map_err(invalid)?;
                let trimmed = path.trim_end_matches('/');
                PathMatcher::Prefix(if trimmed.is_empty() { "/" } else { trimmed }.into())
            }
            PathMatch::Pattern(pattern) => {
                // matchit panics past 25 (found by fuzzing); far fewer is plenty.
                if parameters(pattern) > MAX_PARAMETERS {
                    return Err(invalid(format!(
                        "more than {MAX_PARAMETERS} parameters in one pattern"
                    )));
                }
                let mut router = matchit::Router::new();
                router
                    .insert(pattern.as_str(), ())
                    .map_err(|e| invalid(e.to_string()))?;
                PathMatcher::Pattern {
                    router,
                    literal_len: literal_len(pattern),
                    pattern: pattern.as_str().into(),
                }
            }
        };
        self.routes.push(Route {
            path,
            methods: spec.methods.map(Vec::into_boxed_slice),
            headers: spec.headers.into_boxed_slice(),
            query: spec
                .query
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            target: spec.target,
        });
        Ok(self)
    }

    /// The immutable table, routes sorted by precedence.
    pub fn build(self) -> RouteTable<T> {
        self.build_indexed_from(index::MIN_ROUTES)
    }

    /// [`build`](Self::build), with a candidate index for tables of
    /// `min_routes` routes or more that are not prefix-only (tests compare
    /// the index with the scan on small tables).
    pub(super) fn build_indexed_from(mut self, min_routes: usize) -> RouteTable<T> {
        // Stable: equal ranks keep file order, the last tie-breaker.
        self.routes.sort_by_key(Route::rank);
        let prefix = PrefixIndex::build(&self.routes);
        let index = match prefix {
            Some(_) => None,
            None => CandidateIndex::build(&self.routes, min_routes),
        };
        RouteTable::new(self.routes.into_boxed_slice(), prefix, index)
    }
}

impl<T> Default for RouteTableBuilder<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn normal(path: &str) -> Result<String, String> {
    match normalize_path(path) {
        Ok(path) => Ok(path.into_owned()),
        Err(BadPath::EscapesRoot) => Err("path escapes the root".into()),
        Err(BadPath::Invalid) => Err("invalid percent-escape".into()),
    }
}
