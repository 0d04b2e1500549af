//! Route table tests; helpers shared by the files below.

#![allow(clippy::unwrap_used)]

mod conditions;
mod fast_path;
mod index;
mod paths;
mod precedence;

use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::*;

fn spec(path: PathMatch, target: &'static str) -> RouteSpec<&'static str> {
    RouteSpec {
        path,
        methods: None,
        headers: vec![],
        query: vec![],
        target,
    }
}

fn prefix(p: &str, target: &'static str) -> RouteSpec<&'static str> {
    spec(PathMatch::Prefix(p.into()), target)
}

fn exact(p: &str, target: &'static str) -> RouteSpec<&'static str> {
    spec(PathMatch::Exact(p.into()), target)
}

fn pattern(p: &str, target: &'static str) -> RouteSpec<&'static str> {
    spec(PathMatch::Pattern(p.into()), target)
}

fn with_methods(mut s: RouteSpec<&'static str>, methods: &[Method]) -> RouteSpec<&'static str> {
    s.methods = Some(methods.to_vec());
    s
}

fn with_headers(mut s: RouteSpec<&'static str>, h: &[(&str, &str)]) -> RouteSpec<&'static str> {
    s.headers = h
        .iter()
        .map(|(n, v)| {
            (
                HeaderName::try_from(*n).unwrap(),
                HeaderValue::try_from(*v).unwrap(),
            )
        })
        .collect();
    s
}

fn with_query(mut s: RouteSpec<&'static str>, q: &[(&str, &str)]) -> RouteSpec<&'static str> {
    s.query = q
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s
}

fn table(specs: Vec<RouteSpec<&'static str>>) -> RouteTable<&'static str> {
    let mut builder = RouteTableBuilder::new();
    for s in specs {
        builder.route(s).unwrap();
    }
    builder.build()
}

/// The target for a GET without query or headers, or the error.
fn get(t: &RouteTable<&'static str>, path: &str) -> Result<&'static str, NoRoute> {
    req(t, Method::GET, path, None, &[])
}

fn req(
    t: &RouteTable<&'static str>,
    method: Method,
    path: &str,
    query: Option<&str>,
    headers: &[(&str, &str)],
) -> Result<&'static str, NoRoute> {
    let mut map = HeaderMap::new();
    for (n, v) in headers {
        map.append(
            HeaderName::try_from(*n).unwrap(),
            HeaderValue::try_from(*v).unwrap(),
        );
    }
    t.route(&method, path, query, &map).map(|m| *m.target)
}

fn not_allowed(allow: &'static str) -> Result<&'static str, NoRoute> {
    Err(NoRoute::MethodNotAllowed {
        allow: HeaderValue::from_static(allow),
    })
}
