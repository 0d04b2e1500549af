//! A route as configuration describes it, before it is compiled into a table.

use http::{HeaderName, HeaderValue, Method};

/// How a route matches the request path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathMatch {
    /// The whole path, query excluded: `/login`.
    Exact(String),
    /// Whole leading segments: `/api` matches `/api`, `/api/` and `/api/x`, never `/apix`.
    /// A trailing slash is ignored (`/api/` is `/api`); `/` matches every path.
    Prefix(String),
    /// A [`matchit`] pattern: `/users/{id}`, `/assets/{*rest}`.
    Pattern(String),
}

impl PathMatch {
    /// The path or pattern as configured.
    pub(super) fn as_str(&self) -> &str {
        match self {
            PathMatch::Exact(p) | PathMatch::Prefix(p) | PathMatch::Pattern(p) => p,
        }
    }
}

/// One route: where it applies and what it leads to.
#[derive(Clone, Debug)]
pub struct RouteSpec<T> {
    /// The path condition.
    pub path: PathMatch,
    /// The methods allowed; `None` for every method. Must not be empty.
    pub methods: Option<Vec<Method>>,
    /// Headers that must each be present with exactly this value (names are
    /// case-insensitive; one of several values of a repeated header is enough).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Query parameters that must each be present with this value, compared after
    /// percent-decoding (`+` as space); one of several values of a repeated key is enough.
    pub query: Vec<(String, String)>,
    /// What the route leads to.
    pub target: T,
}
