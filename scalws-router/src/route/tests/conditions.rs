//! Header, query and method conditions, and the 405 they lead to.

#![allow(clippy::unwrap_used)]

use http::Method;

use super::*;

#[test]
fn header_names_are_case_insensitive_and_values_exact() {
    let t = table(vec![
        with_headers(prefix("/", "canary"), &[("X-Canary", "On")]),
        prefix("/", "stable"),
    ]);
    assert_eq!(
        req(&t, Method::GET, "/", None, &[("x-canary", "On")]),
        Ok("canary")
    );
    assert_eq!(
        req(&t, Method::GET, "/", None, &[("X-CANARY", "On")]),
        Ok("canary")
    );
    assert_eq!(
        req(&t, Method::GET, "/", None, &[("x-canary", "on")]),
        Ok("stable")
    );
    // One of several values of a repeated header is enough.
    let repeated = [("x-canary", "off"), ("x-canary", "On")];
    assert_eq!(req(&t, Method::GET, "/", None, &repeated), Ok("canary"));
}

#[test]
fn query_values_are_percent_decoded() {
    let t = table(vec![
        with_query(prefix("/", "match"), &[("name", "a b/é")]),
        prefix("/", "other"),
    ]);
    for q in [
        "name=a+b/%C3%A9",
        "name=a%20b%2F%c3%a9",
        "x=1&n%61me=a+b%2f%C3%A9",
    ] {
        assert_eq!(req(&t, Method::GET, "/", Some(q), &[]), Ok("match"), "{q}");
    }
    assert_eq!(
        req(&t, Method::GET, "/", Some("name=a%2Bb/%C3%A9"), &[]),
        Ok("other")
    );
}

#[test]
fn method_mismatch_gives_405_with_the_union_of_methods() {
    let t = table(vec![
        with_methods(exact("/items", "list"), &[Method::POST, Method::GET]),
        with_methods(exact("/items", "create"), &[Method::POST]),
        with_methods(exact("/items", "head"), &[Method::HEAD, Method::GET]),
        with_methods(exact("/other", "other"), &[Method::DELETE]),
    ]);
    assert_eq!(
        req(&t, Method::PUT, "/items", None, &[]),
        not_allowed("GET, HEAD, POST")
    );
    assert_eq!(req(&t, Method::POST, "/items", None, &[]), Ok("list"));
    assert_eq!(
        req(&t, Method::PUT, "/missing", None, &[]),
        Err(NoRoute::NotFound)
    );
}

#[test]
fn allow_lists_get_and_post_of_two_routes() {
    let t = table(vec![
        with_methods(prefix("/api", "post"), &[Method::POST]),
        with_methods(prefix("/api", "get"), &[Method::GET]),
    ]);
    assert_eq!(
        req(&t, Method::PUT, "/api/x", None, &[]),
        not_allowed("GET, POST")
    );
}

#[test]
fn allow_only_counts_routes_whose_other_conditions_hold() {
    let ext = Method::from_bytes(b"PURGE").unwrap();
    let t = table(vec![
        with_methods(prefix("/", "get"), &[Method::GET]),
        with_methods(
            with_headers(prefix("/", "canary"), &[("x-canary", "1")]),
            &[Method::PATCH],
        ),
        with_methods(prefix("/", "purge"), &[ext.clone(), Method::DELETE]),
    ]);
    assert_eq!(
        req(&t, Method::PUT, "/", None, &[]),
        not_allowed("GET, DELETE, PURGE")
    );
    assert_eq!(
        req(&t, Method::PUT, "/", None, &[("x-canary", "1")]),
        not_allowed("GET, DELETE, PATCH, PURGE")
    );
    assert_eq!(req(&t, ext, "/", None, &[]), Ok("purge"));
}

#[test]
fn no_405_when_another_route_matches_fully() {
    let t = table(vec![
        with_methods(exact("/api", "post"), &[Method::POST]),
        prefix("/", "fallback"),
    ]);
    assert_eq!(req(&t, Method::PUT, "/api", None, &[]), Ok("fallback"));

    // A route whose other conditions fail does not make a 405.
    let t = table(vec![with_methods(
        with_headers(exact("/api", "post"), &[("x-a", "1")]),
        &[Method::POST],
    )]);
    assert_eq!(
        req(&t, Method::PUT, "/api", None, &[]),
        Err(NoRoute::NotFound)
    );
}

#[test]
fn head_is_not_implied_by_get() {
    let t = table(vec![with_methods(exact("/", "get"), &[Method::GET])]);
    assert_eq!(req(&t, Method::HEAD, "/", None, &[]), not_allowed("GET"));
}
