//! Why a request takes the route it takes: every route of a table in
//! precedence order, with the first condition that fails for it. For
//! `scalwsd explain`; the request path never calls it.

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::matcher::{PathMatcher, Route};
use super::table::RouteTable;

/// One route as the lookup considered it.
#[derive(Debug)]
pub struct Considered<'a, T> {
    /// Its place in precedence order, from 0.
    pub rank: usize,
    /// Its conditions, as written.
    pub conditions: Conditions<'a>,
    /// What it leads to.
    pub target: &'a T,
    /// Whether it matched, and if not, why.
    pub verdict: Verdict<'a>,
}

/// A route's conditions, for display: `prefix /api, methods GET|HEAD, header x-canary: 1`.
#[derive(Debug)]
pub struct Conditions<'a> {
    /// `exact`, `prefix` or `pattern`.
    pub kind: &'static str,
    /// The path, prefix (no trailing slash) or pattern.
    pub path: &'a str,
    /// The methods, when the route names them.
    pub methods: Option<&'a [Method]>,
    /// Header conditions.
    pub headers: &'a [(HeaderName, HeaderValue)],
    /// Query conditions.
    pub query: &'a [(Box<str>, Box<str>)],
}

/// The outcome for one route.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Every condition holds: the route the request takes (the first such).
    Matched,
    /// Every condition holds, but a route before it matched first.
    Shadowed,
    /// The path does not match.
    Path,
    /// The path matches, the method is not among the route's.
    Method,
    /// This header condition fails.
    Header(&'a HeaderName, &'a HeaderValue),
    /// This query condition fails.
    Query(&'a str, &'a str),
}

impl<T> RouteTable<T> {
    /// Every route in precedence order, with its verdict for the request.
    /// The first [`Verdict::Matched`] is the route [`RouteTable::route`]
    /// returns; none matched and some failed only on the method: 405.
    pub fn explain(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Vec<Considered<'_, T>> {
        let mut matched = false;
        self.routes()
            .iter()
            .enumerate()
            .map(|(rank, route)| {
                let mut verdict = verdict(route, method, path, query, headers);
                if verdict == Verdict::Matched {
                    if matched {
                        verdict = Verdict::Shadowed;
                    }
                    matched = true;
                }
                Considered {
                    rank,
                    conditions: conditions(route),
                    target: &route.target,
                    verdict,
                }
            })
            .collect()
    }
}

fn verdict<'a, T>(
    route: &'a Route<T>,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Verdict<'a> {
    if route.match_path(path).is_none() {
        return Verdict::Path;
    }
    for (name, value) in route.headers.iter() {
        if !headers.get_all(name).iter().any(|v| v == value) {
            return Verdict::Header(name, value);
        }
    }
    for (key, value) in route.query.iter() {
        if !query.is_some_and(|q| super::query::has_pair(q, key, value)) {
            return Verdict::Query(key, value);
        }
    }
    if !route.allows(method) {
        return Verdict::Method;
    }
    Verdict::Matched
}

fn conditions<T>(route: &Route<T>) -> Conditions<'_> {
    let (kind, path) = match &route.path {
        PathMatcher::Exact(path) => ("exact", &**path),
        PathMatcher::Prefix(prefix) => ("prefix", &**prefix),
        PathMatcher::Pattern { pattern, .. } => ("pattern", &**pattern),
    };
    Conditions {
        kind,
        path,
        methods: route.methods.as_deref(),
        headers: &route.headers,
        query: &route.query,
    }
}

impl fmt::Display for Conditions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.path)?;
        if let Some(methods) = self.methods {
            let names: Vec<&str> = methods.iter().map(Method::as_str).collect();
            write!(f, ", methods {}", names.join("|"))?;
        }
        for (name, value) in self.headers {
            write!(
                f,
                ", header {name}: {}",
                value.to_str().unwrap_or("<binary>")
            )?;
        }
        for (key, value) in self.query {
            write!(f, ", query {key}={value}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Verdict<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Matched => f.write_str("matched"),
            Verdict::Shadowed => f.write_str("would match, but a route above matched first"),
            Verdict::Path => f.write_str("path does not match"),
            Verdict::Method => f.write_str("method not allowed by this route"),
            Verdict::Header(name, value) => write!(
                f,
                "header {name} is not \"{}\"",
                value.to_str().unwrap_or("<binary>")
            ),
            Verdict::Query(key, value) => write!(f, "query parameter {key} is not \"{value}\""),
        }
    }
}
