//! Path conditions, parameters and route validation.

#![allow(clippy::unwrap_used)]

use http::{HeaderMap, HeaderValue, Method};

use super::*;

#[test]
fn prefix_matches_whole_segments_only() {
    let t = table(vec![prefix("/api", "api")]);
    assert_eq!(get(&t, "/api"), Ok("api"));
    assert_eq!(get(&t, "/api/"), Ok("api"));
    assert_eq!(get(&t, "/api/x/y"), Ok("api"));
    assert_eq!(get(&t, "/apix"), Err(NoRoute::NotFound));
    assert_eq!(get(&t, "/ap"), Err(NoRoute::NotFound));
    assert_eq!(get(&t, "/"), Err(NoRoute::NotFound));
}

#[test]
fn trailing_slash_on_a_prefix_is_ignored_but_root_matches_everything() {
    let t = table(vec![prefix("/api/", "api"), prefix("/", "root")]);
    assert_eq!(get(&t, "/api"), Ok("api"));
    assert_eq!(get(&t, "/api/x"), Ok("api"));
    assert_eq!(get(&t, "/apix"), Ok("root"));
    assert_eq!(get(&t, "/"), Ok("root"));
    assert_eq!(get(&t, "//x"), Ok("root"));
}

#[test]
fn exact_matches_the_path_alone() {
    let t = table(vec![exact("/login", "login")]);
    assert_eq!(get(&t, "/login"), Ok("login"));
    assert_eq!(
        req(&t, Method::GET, "/login", Some("next=/"), &[]),
        Ok("login")
    );
    assert_eq!(get(&t, "/login/"), Err(NoRoute::NotFound));
    assert_eq!(get(&t, "/login/x"), Err(NoRoute::NotFound));
}

#[test]
fn pattern_params_are_captured() {
    let t = table(vec![
        pattern("/users/{id}", "user"),
        pattern("/assets/{*rest}", "assets"),
        prefix("/", "root"),
    ]);
    let h = HeaderMap::new();
    let m = t.route(&Method::GET, "/users/42", None, &h).unwrap();
    assert_eq!(*m.target, "user");
    assert_eq!(m.params.get("id"), Some("42"));
    assert_eq!(m.params.iter().collect::<Vec<_>>(), [("id", "42")]);

    let m = t
        .route(&Method::GET, "/assets/css/site.css", None, &h)
        .unwrap();
    assert_eq!(*m.target, "assets");
    assert_eq!(m.params.get("rest"), Some("css/site.css"));
    assert_eq!(m.params.get("id"), None);

    let m = t.route(&Method::GET, "/users/42/x", None, &h).unwrap();
    assert_eq!(*m.target, "root");
    assert!(m.params.is_empty());
}

#[test]
fn conflicting_patterns_are_legal_in_one_table() {
    let t = table(vec![
        pattern("/{a}/x", "first"),
        pattern("/{b}/x", "second"),
    ]);
    assert_eq!(get(&t, "/q/x"), Ok("first"));
}

#[test]
fn invalid_routes_are_rejected_with_a_reason() {
    let mut b = RouteTableBuilder::<()>::new();
    let mut reason = |path: PathMatch, methods: Option<Vec<Method>>| {
        b.route(RouteSpec {
            path,
            methods,
            headers: vec![],
            query: vec![],
            target: (),
        })
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        reason(PathMatch::Prefix("api".into()), None),
        "invalid route path \"api\": must start with \"/\""
    );
    assert_eq!(
        reason(PathMatch::Pattern("users/{id}".into()), None),
        "invalid route path \"users/{id}\": must start with \"/\""
    );
    assert_eq!(
        reason(PathMatch::Pattern("/users/{id".into()), None),
        "invalid route path \"/users/{id\": Parameters must be registered with a valid name"
    );
    assert_eq!(
        reason(PathMatch::Pattern("/{*rest}/x".into()), None),
        "invalid route path \"/{*rest}/x\": Catch-all parameters are only allowed at the end of a route"
    );
    assert_eq!(
        reason(PathMatch::Pattern("/{a}-{b}".into()), None),
        "invalid route path \"/{a}-{b}\": Only one parameter is allowed per path segment"
    );
    // Past 25 parameters matchit panics (found by the `routes` fuzz target):
    // refused first, with a limit of 16.
    let many: String = (0..30).map(|i| format!("/{{p{i}}}")).collect();
    assert_eq!(
        reason(PathMatch::Pattern(many.clone()), None),
        format!("invalid route path \"{many}\": more than 16 parameters in one pattern")
    );
    let sixteen: String = (0..16).map(|i| format!("/{{p{i}}}")).collect();
    assert!(
        RouteTableBuilder::<()>::new()
            .route(RouteSpec::pattern(sixteen, ()))
            .is_ok()
    );
    // Escaped braces are not parameters.
    let braces: String = (0..20).map(|i| format!("/{{{{x{i}}}}}")).collect();
    assert!(
        RouteTableBuilder::<()>::new()
            .route(RouteSpec::pattern(braces, ()))
            .is_ok()
    );
    assert_eq!(
        reason(PathMatch::Exact("/a".into()), Some(vec![])),
        "invalid route path \"/a\": methods must not be empty"
    );
    assert_eq!(
        reason(PathMatch::Exact("/../a".into()), None),
        "invalid route path \"/../a\": path escapes the root"
    );
    assert_eq!(
        reason(PathMatch::Prefix("/a%zz".into()), None),
        "invalid route path \"/a%zz\": invalid percent-escape"
    );
}

#[test]
fn configured_paths_are_normalised_like_requests() {
    let t = table(vec![exact("/%7Eme/./x", "me"), prefix("/a/b/../c/", "c")]);
    assert_eq!(get(&t, "/~me/x"), Ok("me"));
    assert_eq!(get(&t, "/a/c/d"), Ok("c"));
}

#[test]
fn sizes() {
    let t = table(vec![prefix("/", "a"), exact("/x", "b")]);
    assert_eq!((t.len(), t.is_empty()), (2, false));
    let t = RouteTableBuilder::<()>::default().build();
    assert_eq!((t.len(), t.is_empty()), (0, true));
    assert_eq!(
        t.route(&Method::GET, "/", None, &HeaderMap::new())
            .map(|_| ()),
        Err(NoRoute::NotFound)
    );
}

#[test]
fn error_text() {
    assert_eq!(
        NoRoute::NotFound.to_string(),
        "no route matches the request"
    );
    let e = NoRoute::MethodNotAllowed {
        allow: HeaderValue::from_static("GET"),
    };
    assert_eq!(e.to_string(), "method not allowed");
}
