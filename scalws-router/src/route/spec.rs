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

impl<T> RouteSpec<T> {
    /// A route for paths under `prefix` (whole segments), any method.
    pub fn prefix(prefix: impl Into<String>, target: T) -> Self {
        Self::new(PathMatch::Prefix(prefix.into()), target)
    }

    /// A route for exactly `path`, any method.
    pub fn exact(path: impl Into<String>, target: T) -> Self {
        Self::new(PathMatch::Exact(path.into()), target)
    }

    /// A route for a [`matchit`] pattern such as `/users/{id}`, any method.
    pub fn pattern(pattern: impl Into<String>, target: T) -> Self {
        Self::new(PathMatch::Pattern(pattern.into()), target)
    }

    /// A route on `path` with no other condition.
    pub fn new(path: PathMatch, target: T) -> Self {
        Self {
            path,
            methods: None,
            headers: Vec::new(),
            query: Vec::new(),
            target,
        }
    }

    /// Only these methods match (an empty list is refused when the route is added).
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = Some(methods.into_iter().collect());
        self
    }

    /// The request must carry header `name` with exactly `value`.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The query must carry parameter `name` equal to `value` (after decoding).
    pub fn query(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    /// The route's conditions as one canonical text, the same whatever the
    /// order its headers and query parameters were given in:
    /// `prefix "/api"; methods GET,HEAD; header x-canary="1"; query "v"="2"`
    /// (values quoted and escaped, so no value can pass for another
    /// condition). Two
    /// routes of one application with the same identity match the same
    /// requests. (A response cache keeps each route's entries apart by it.)
    pub fn identity(&self) -> String {
        let (kind, path) = match &self.path {
            PathMatch::Exact(p) => ("exact", p),
            PathMatch::Prefix(p) => ("prefix", p),
            PathMatch::Pattern(p) => ("pattern", p),
        };
        let mut text = format!("{kind} {path:?}");
        if let Some(methods) = &self.methods {
            let mut names: Vec<&str> = methods.iter().map(Method::as_str).collect();
            names.sort_unstable();
            names.dedup();
            text.push_str("; methods ");
            text.push_str(&names.join(","));
        }
        let mut headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| {
                format!(
                    "header {name}={:?}",
                    value.as_bytes().escape_ascii().to_string()
                )
            })
            .collect();
        headers.sort_unstable();
        let mut query: Vec<String> = self
            .query
            .iter()
            .map(|(k, v)| format!("query {k:?}={v:?}"))
            .collect();
        query.sort_unstable();
        for condition in headers.iter().chain(&query) {
            text.push_str("; ");
            text.push_str(condition);
        }
        text
    }

    /// The same conditions, leading to `target` instead.
    pub fn map<U>(self, target: impl FnOnce(T) -> U) -> RouteSpec<U> {
        RouteSpec {
            path: self.path,
            methods: self.methods,
            headers: self.headers,
            query: self.query,
            target: target(self.target),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_ignores_the_order_conditions_were_given_in() {
        let a = RouteSpec::prefix("/api", ())
            .methods([Method::HEAD, Method::GET])
            .header(
                HeaderName::from_static("x-b"),
                HeaderValue::from_static("2"),
            )
            .header(
                HeaderName::from_static("x-a"),
                HeaderValue::from_static("1"),
            )
            .query("v", "2");
        let b = RouteSpec::prefix("/api", ())
            .query("v", "2")
            .header(
                HeaderName::from_static("x-a"),
                HeaderValue::from_static("1"),
            )
            .header(
                HeaderName::from_static("x-b"),
                HeaderValue::from_static("2"),
            )
            .methods([Method::GET, Method::HEAD]);
        assert_eq!(a.identity(), b.identity());
        assert_eq!(
            a.identity(),
            r#"prefix "/api"; methods GET,HEAD; header x-a="1"; header x-b="2"; query "v"="2""#
        );
        // A value cannot pass for two conditions.
        let sly = RouteSpec::prefix("/api", ()).header(
            HeaderName::from_static("x-a"),
            HeaderValue::from_static(r#"1"; query "v"="2"#),
        );
        let honest = RouteSpec::prefix("/api", ())
            .header(
                HeaderName::from_static("x-a"),
                HeaderValue::from_static("1"),
            )
            .query("v", "2");
        assert_ne!(sly.identity(), honest.identity());
        assert_ne!(a.identity(), RouteSpec::prefix("/api", ()).identity());
        assert_ne!(
            RouteSpec::exact("/api", ()).identity(),
            RouteSpec::prefix("/api", ()).identity()
        );
    }
}
