//! The immutable route table of one application and its lookup.

use http::{HeaderMap, HeaderValue, Method};

use super::allow::allow;
use super::index::CandidateIndex;
use super::matcher::Route;
use super::params::Params;
use super::prefix::PrefixIndex;

/// An application's routes, sorted by precedence; immutable once built.
#[derive(Debug)]
pub struct RouteTable<T> {
    routes: Box<[Route<T>]>,
    /// Present when every route is a plain prefix.
    prefix: Option<PrefixIndex>,
    /// Present for other tables of `index::MIN_ROUTES` routes or more.
    index: Option<CandidateIndex>,
}

/// The route a request takes.
#[derive(Debug)]
pub struct RouteMatch<'a, T> {
    /// The route's target.
    pub target: &'a T,
    /// Parameters captured by a `pattern` route; empty otherwise.
    pub params: Params,
}

/// Why no route takes the request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoRoute {
    /// No route matches: 404.
    #[error("no route matches the request")]
    NotFound,
    /// Routes match all but the method: 405.
    #[error("method not allowed")]
    MethodNotAllowed {
        /// The `Allow` header: their methods, such as `GET, HEAD`.
        allow: HeaderValue,
    },
}

impl<T> RouteTable<T> {
    pub(super) fn new(
        routes: Box<[Route<T>]>,
        prefix: Option<PrefixIndex>,
        index: Option<CandidateIndex>,
    ) -> Self {
        Self {
            routes,
            prefix,
            index,
        }
    }

    /// The route for a request.
    ///
    /// `path` comes from [`normalize_path`](crate::normalize_path); `query` is the raw
    /// query string without `?`.
    #[inline]
    pub fn route<'a>(
        &'a self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<RouteMatch<'a, T>, NoRoute> {
        match &self.prefix {
            Some(index) => match index.lookup(path) {
                Some(i) => Ok(self.matched(i, Params::default())),
                None => Err(NoRoute::NotFound),
            },
            None => match &self.index {
                Some(index) => self.indexed(index, method, path, query, headers),
                None => self.scan(0..self.routes.len(), method, path, query, headers),
            },
        }
    }

    /// [`scan`](Self::scan) over the index's candidates for `path`.
    #[inline(never)]
    fn indexed<'a>(
        &'a self,
        index: &CandidateIndex,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<RouteMatch<'a, T>, NoRoute> {
        thread_local! {
            /// Reused from lookup to lookup: no allocation per request.
            static CANDIDATES: std::cell::RefCell<Vec<usize>> = const {
                std::cell::RefCell::new(Vec::new())
            };
        }
        CANDIDATES.with(|candidates| match candidates.try_borrow_mut() {
            Ok(mut candidates) => {
                index.candidates(path, &mut candidates);
                self.scan(candidates.iter().copied(), method, path, query, headers)
            }
            // Only if a lookup ran inside another on this thread: a buffer of its own.
            Err(_) => {
                let mut own = Vec::new();
                index.candidates(path, &mut own);
                self.scan(own.into_iter(), method, path, query, headers)
            }
        })
    }

    /// The first route of `indices` (in precedence order) that matches.
    pub(super) fn scan<'a>(
        &'a self,
        indices: impl Iterator<Item = usize>,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<RouteMatch<'a, T>, NoRoute> {
        let mut wrong_method = false;
        for i in indices {
            let route = &self.routes[i];
            let Some(params) = route.match_path(path) else {
                continue;
            };
            if route.allows(method) {
                if route.conditions_hold(query, headers) {
                    return Ok(self.matched(i, Params::from_matchit(&params)));
                }
            } else if !wrong_method {
                wrong_method = route.conditions_hold(query, headers);
            }
        }
        if wrong_method {
            let allow = allow(&self.routes, path, query, headers);
            return Err(NoRoute::MethodNotAllowed { allow });
        }
        Err(NoRoute::NotFound)
    }

    #[inline]
    fn matched(&self, i: usize, params: Params) -> RouteMatch<'_, T> {
        RouteMatch {
            target: &self.routes[i].target,
            params,
        }
    }

    /// Whether lookups use the candidate index (see `index`).
    #[cfg(test)]
    pub(super) fn is_indexed(&self) -> bool {
        self.index.is_some()
    }

    /// The index's candidates for `path`, if there is an index.
    #[cfg(test)]
    pub(super) fn candidates(&self, path: &str) -> Option<Vec<usize>> {
        let mut out = Vec::new();
        self.index.as_ref()?.candidates(path, &mut out);
        Some(out)
    }

    /// Whether lookups take the prefix-only fast path: every route is a plain prefix
    /// without methods, headers or query (true for an empty table).
    pub fn is_prefix_only(&self) -> bool {
        self.prefix.is_some()
    }

    /// The routes, in precedence order.
    pub(super) fn routes(&self) -> &[Route<T>] {
        &self.routes
    }

    /// The number of routes.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether there is no route.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}
