//! SPEC section 4 precedence between several matching routes.

#![allow(clippy::unwrap_used)]

use http::Method;

use super::*;

#[test]
fn exact_outranks_any_prefix() {
    let t = table(vec![
        prefix("/login/deep/path", "prefix"),
        exact("/login/deep/path", "exact"),
    ]);
    assert_eq!(get(&t, "/login/deep/path"), Ok("exact"));
    assert_eq!(get(&t, "/login/deep/path/x"), Ok("prefix"));
}

#[test]
fn longer_prefix_outranks_shorter() {
    let t = table(vec![
        prefix("/", "root"),
        prefix("/api", "api"),
        prefix("/api/v2", "v2"),
    ]);
    assert_eq!(get(&t, "/api/v2/x"), Ok("v2"));
    assert_eq!(get(&t, "/api/v3"), Ok("api"));
    assert_eq!(get(&t, "/other"), Ok("root"));
}

#[test]
fn pattern_ranks_by_literal_characters_against_prefix_length() {
    // "/users/{id}/posts" has 13 literal bytes; "/users" 6 and "/users/me/posts/x" 17.
    let t = table(vec![
        prefix("/users", "users"),
        pattern("/users/{id}/posts", "posts"),
        prefix("/users/me/posts/x", "long"),
    ]);
    assert_eq!(get(&t, "/users/7/posts"), Ok("posts"));
    assert_eq!(get(&t, "/users/me/posts"), Ok("posts"));
    assert_eq!(get(&t, "/users/me/posts/x"), Ok("long"));
    assert_eq!(get(&t, "/users/7"), Ok("users"));
}

#[test]
fn route_with_methods_outranks_same_path_without() {
    let t = table(vec![
        prefix("/api", "any"),
        with_methods(prefix("/api", "post"), &[Method::POST]),
    ]);
    assert_eq!(req(&t, Method::POST, "/api", None, &[]), Ok("post"));
    assert_eq!(get(&t, "/api"), Ok("any"));
}

#[test]
fn more_headers_outrank_fewer() {
    let t = table(vec![
        with_headers(prefix("/", "one"), &[("x-canary", "1")]),
        with_headers(prefix("/", "two"), &[("x-canary", "1"), ("x-beta", "yes")]),
        prefix("/", "none"),
    ]);
    let both = [("x-canary", "1"), ("x-beta", "yes")];
    assert_eq!(req(&t, Method::GET, "/", None, &both), Ok("two"));
    assert_eq!(req(&t, Method::GET, "/", None, &both[..1]), Ok("one"));
    assert_eq!(
        req(&t, Method::GET, "/", None, &[("x-canary", "2")]),
        Ok("none")
    );
}

#[test]
fn more_query_conditions_outrank_fewer() {
    let t = table(vec![
        with_query(prefix("/", "one"), &[("v", "2")]),
        with_query(prefix("/", "two"), &[("v", "2"), ("beta", "1")]),
        prefix("/", "none"),
    ]);
    assert_eq!(
        req(&t, Method::GET, "/", Some("beta=1&v=2"), &[]),
        Ok("two")
    );
    assert_eq!(req(&t, Method::GET, "/", Some("v=2"), &[]), Ok("one"));
    assert_eq!(req(&t, Method::GET, "/", Some("v=3"), &[]), Ok("none"));
    assert_eq!(req(&t, Method::GET, "/", None, &[]), Ok("none"));
}

#[test]
fn header_conditions_outrank_query_conditions() {
    let t = table(vec![
        with_query(prefix("/", "query"), &[("a", "1"), ("b", "2")]),
        with_headers(prefix("/", "header"), &[("x-a", "1")]),
    ]);
    assert_eq!(
        req(&t, Method::GET, "/", Some("a=1&b=2"), &[("x-a", "1")]),
        Ok("header")
    );
}

#[test]
fn file_order_breaks_full_ties() {
    let t = table(vec![
        with_headers(prefix("/api", "first"), &[("x-a", "1")]),
        with_headers(prefix("/api/", "second"), &[("x-b", "1")]),
    ]);
    let both = [("x-a", "1"), ("x-b", "1")];
    assert_eq!(req(&t, Method::GET, "/api", None, &both), Ok("first"));
    assert_eq!(req(&t, Method::GET, "/api", None, &both[1..]), Ok("second"));

    let t = table(vec![prefix("/api", "first"), prefix("/api/", "second")]);
    assert!(t.is_prefix_only());
    assert_eq!(get(&t, "/api/x"), Ok("first"));
}
