//! The key (scheme, host, path and query), `Vary`, and what that means for
//! cache poisoning and cache deception.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use scalws_cache::CacheOptions;
use scalws_core::{Body, ConnInfo, Scheme};
use support::{Harness, get, header, reply, request};

async fn with_encoding(h: &Harness, encoding: &str) -> String {
    let r = h
        .send(
            get("/r")
                .header("accept-encoding", encoding)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    r.text().to_owned()
}

#[tokio::test]
async fn vary_accept_encoding_keeps_one_entry_per_encoding() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        let body = format!("for {}", header(&req, "accept-encoding").unwrap_or("-"));
        reply(
            200,
            &[("cache-control", "max-age=60"), ("vary", "Accept-Encoding")],
            body,
        )
    })
    .await;
    assert_eq!(with_encoding(&h, "gzip, br").await, "for gzip, br");
    assert_eq!(with_encoding(&h, "identity").await, "for identity");
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 2);
    // Both variants are served; the same codings in another order and case match.
    assert_eq!(with_encoding(&h, "BR,gzip").await, "for gzip, br");
    assert_eq!(with_encoding(&h, "identity").await, "for identity");
    assert_eq!(h.upstream_hits(), 2);
    // No Accept-Encoding at all is a third variant.
    assert_eq!(h.get("/r").await.text(), "for -");
    assert_eq!(h.upstream_hits(), 3);
    assert_eq!(h.stats().entries, 3);
}

#[tokio::test]
async fn vary_star_is_not_stored() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60"), ("vary", "*")], "x").await;
    h.get("/r").await;
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 0);
}

fn forwarded_host(value: &str) -> http::Request<Body> {
    get("/page")
        .header("x-forwarded-host", value)
        .body(Body::empty())
        .unwrap()
}

/// The documented rule: a header outside the key cannot change what others
/// get, so an origin that reflects one without `Vary` has its first answer
/// served to everyone. The attacker's value reaches other clients only
/// because the origin said the response does not depend on it.
#[tokio::test]
async fn an_unkeyed_reflected_header_without_vary_is_cached_as_is() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        let host = header(&req, "x-forwarded-host")
            .unwrap_or("example.com")
            .to_owned();
        reply(
            200,
            &[("cache-control", "max-age=60")],
            format!("<script src=//{host}/a.js>"),
        )
    })
    .await;
    let first = h.send(forwarded_host("evil.example")).await;
    let other = h.get("/page").await;
    assert_eq!(h.upstream_hits(), 1);
    assert_eq!(other.body, first.body);
}

#[tokio::test]
async fn a_reflected_header_named_in_vary_keys_separate_entries() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        let host = header(&req, "x-forwarded-host")
            .unwrap_or("example.com")
            .to_owned();
        reply(
            200,
            &[
                ("cache-control", "max-age=60"),
                ("vary", "X-Forwarded-Host"),
            ],
            format!("<script src=//{host}/a.js>"),
        )
    })
    .await;
    let evil = h.send(forwarded_host("evil.example")).await;
    let clean = h.get("/page").await;
    assert_eq!(evil.text(), "<script src=//evil.example/a.js>");
    assert_eq!(clean.text(), "<script src=//example.com/a.js>");
    assert_eq!(
        h.get("/page").await.text(),
        "<script src=//example.com/a.js>"
    );
    assert_eq!(h.upstream_hits(), 2);
}

#[tokio::test]
async fn cache_deception_private_css_is_not_stored() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        let who = header(&req, "cookie").unwrap_or("anonymous").to_owned();
        reply(
            200,
            &[
                ("cache-control", "private, max-age=600"),
                ("content-type", "text/html"),
            ],
            who,
        )
    })
    .await;
    let victim = h
        .send(
            get("/account/x.css")
                .header("cookie", "session=victim")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(victim.text(), "session=victim");
    let attacker = h.get("/account/x.css").await;
    assert_eq!(attacker.text(), "anonymous");
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 0);
}

#[tokio::test]
async fn the_host_is_part_of_the_key() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        let host = header(&req, "host").unwrap_or("-").to_owned();
        reply(200, &[("cache-control", "max-age=60")], host)
    })
    .await;
    for _ in 0..2 {
        for host in ["a.example", "b.example", "A.Example:8080"] {
            let r = h
                .send(request("GET", host, "/same").body(Body::empty()).unwrap())
                .await;
            let expected = if host.starts_with('A') {
                "a.example"
            } else {
                host
            };
            assert_eq!(r.text(), expected, "{host}");
        }
    }
    assert_eq!(
        h.upstream_hits(),
        2,
        "a.example and A.Example:8080 are one host"
    );
}

#[tokio::test]
async fn the_query_and_the_scheme_are_part_of_the_key() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        reply(
            200,
            &[("cache-control", "max-age=60")],
            req.uri().to_string(),
        )
    })
    .await;
    let over = |scheme: Scheme, path: &str| {
        let mut r = get(path).body(Body::empty()).unwrap();
        let conn = ConnInfo::new(
            Arc::from("test"),
            scheme,
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
            None,
        );
        r.extensions_mut().insert(conn);
        r
    };
    assert_eq!(h.send(over(Scheme::Http, "/p?a=1")).await.text(), "/p?a=1");
    assert_eq!(h.send(over(Scheme::Http, "/p?a=2")).await.text(), "/p?a=2");
    h.send(over(Scheme::Https, "/p?a=1")).await;
    assert_eq!(h.upstream_hits(), 3);
    h.send(over(Scheme::Https, "/p?a=1")).await;
    h.send(over(Scheme::Http, "/p?a=2")).await;
    assert_eq!(h.upstream_hits(), 3);
}

#[tokio::test]
async fn a_request_with_a_crafted_host_is_not_cached() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    for _ in 0..2 {
        h.send(
            request("GET", "example.com/evil", "/x")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    }
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().bypasses, 2);
}
