//! The prefix-only fast path.

#![allow(clippy::unwrap_used)]

use http::{HeaderMap, Method};

use super::*;

#[test]
fn fast_path_is_chosen_only_for_plain_prefixes() {
    assert!(table(vec![]).is_prefix_only());
    assert!(table(vec![prefix("/", "a"), prefix("/api", "b")]).is_prefix_only());
    assert!(!table(vec![prefix("/", "a"), exact("/x", "b")]).is_prefix_only());
    assert!(!table(vec![prefix("/", "a"), pattern("/x/{y}", "b")]).is_prefix_only());
    assert!(!table(vec![with_methods(prefix("/", "a"), &[Method::GET])]).is_prefix_only());
    assert!(!table(vec![with_headers(prefix("/", "a"), &[("x", "1")])]).is_prefix_only());
    assert!(!table(vec![with_query(prefix("/", "a"), &[("x", "1")])]).is_prefix_only());
}

#[test]
fn fast_path_agrees_with_the_scan() {
    let t = table(vec![
        prefix("/static", "static"),
        prefix("/api", "api"),
        prefix("/api/v2/", "v2"),
        prefix("/api/v2", "v2-dup"),
        prefix("/a", "a"),
        prefix("/a/b/c/d", "abcd"),
        prefix("/", "root"),
        prefix("/", "root-dup"),
    ]);
    let no_root = table(vec![prefix("/api", "api"), prefix("/api/v2", "v2")]);
    assert!(t.is_prefix_only() && no_root.is_prefix_only());
    let h = HeaderMap::new();
    for path in [
        "/",
        "//",
        "/static",
        "/static/",
        "/static/x.css",
        "/staticx",
        "/api",
        "/api/",
        "/api/v2",
        "/api/v2/",
        "/api/v2/users/1",
        "/api/v3",
        "/a",
        "/a/b/c",
        "/a/b/c/d",
        "/a/b/c/d/e",
        "/a/b/c/dx",
        "/ab",
        "/x/y/z",
    ] {
        for table in [&t, &no_root] {
            let fast = table.route(&Method::GET, path, None, &h).map(|m| *m.target);
            let slow = table
                .scan(0..table.len(), &Method::GET, path, None, &h)
                .map(|m| *m.target);
            assert_eq!(fast, slow, "{path}");
        }
    }
    assert_eq!(get(&t, "/api/v2/x"), Ok("v2"));
    assert_eq!(get(&t, "/a/b/c"), Ok("a"));
    assert_eq!(get(&t, "/x"), Ok("root"));
    assert_eq!(get(&no_root, "/x"), Err(NoRoute::NotFound));
    assert_eq!(get(&no_root, "/"), Err(NoRoute::NotFound));
}
