//! Stale responses: revalidation with validators, 304 refreshes,
//! `stale-while-revalidate` and `stale-if-error`.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scalws_cache::CacheOptions;
use support::{Count, Harness, age, header, reply};

/// `max-age=1` with `Age: 1`: stale as soon as it is stored.
const STALE: (&str, &str) = ("age", "1");

#[tokio::test]
async fn stale_with_etag_is_revalidated_and_a_304_refreshes_it() {
    let conditional = Arc::new(Mutex::new(Vec::new()));
    let seen = conditional.clone();
    let h = Harness::start(CacheOptions::default(), move |req| {
        let inm = header(&req, "if-none-match").map(str::to_owned);
        seen.lock().unwrap().push(inm.clone());
        async move {
            if inm.as_deref() == Some("\"v1\"") {
                return reply(
                    304,
                    &[("cache-control", "max-age=60"), ("x-version", "2")],
                    "",
                );
            }
            reply(
                200,
                &[
                    ("cache-control", "max-age=1"),
                    STALE,
                    ("etag", "\"v1\""),
                    ("x-version", "1"),
                ],
                "body",
            )
        }
    })
    .await;
    let first = h.get("/r").await;
    assert_eq!(age(&first), 1);
    // Stale: the upstream sees a conditional request and says 304.
    let revalidated = h.get("/r").await;
    assert_eq!((revalidated.status, revalidated.text()), (200, "body"));
    assert_eq!(
        revalidated.header("x-version"),
        Some("2"),
        "304 headers update the stored ones"
    );
    assert_eq!(revalidated.header("etag"), Some("\"v1\""));
    assert_eq!(age(&revalidated), 0, "freshness starts again");
    // Now fresh for 60 s: a plain hit.
    let hit = h.get("/r").await;
    assert_eq!((hit.text(), age(&hit)), ("body", 0));
    assert_eq!(hit.header("x-version"), Some("2"));
    assert_eq!(hit.header("content-length"), Some("4"));
    assert_eq!(
        *conditional.lock().unwrap(),
        [None, Some("\"v1\"".to_owned())]
    );
    let stats = h.stats();
    assert_eq!(
        (stats.misses, stats.revalidations, stats.hits, stats.stores),
        (1, 1, 2, 1)
    );
    assert_eq!(stats.entries, 1);
}

#[tokio::test]
async fn last_modified_is_revalidated_with_if_modified_since() {
    const MODIFIED: &str = "Mon, 01 Jan 2024 00:00:00 GMT";
    let h = Harness::start(CacheOptions::default(), |req| async move {
        if header(&req, "if-modified-since") == Some(MODIFIED) {
            return reply(304, &[], "");
        }
        reply(
            200,
            &[("cache-control", "max-age=0"), ("last-modified", MODIFIED)],
            "body",
        )
    })
    .await;
    h.get("/r").await;
    let r = h.get("/r").await;
    assert_eq!((r.status, r.text()), (200, "body"));
    assert_eq!(h.stats().revalidations, 1);
}

#[tokio::test]
async fn a_full_response_to_a_revalidation_replaces_the_entry() {
    let n = Count::default();
    let h = Harness::start(CacheOptions::default(), move |_req| {
        let version = n.bump();
        async move {
            let cc = if version == 1 {
                "max-age=0"
            } else {
                "max-age=60"
            };
            reply(
                200,
                &[("cache-control", cc), ("etag", &format!("\"v{version}\""))],
                format!("v{version}"),
            )
        }
    })
    .await;
    assert_eq!(h.get("/r").await.text(), "v1");
    assert_eq!(h.get("/r").await.text(), "v2");
    assert_eq!(h.get("/r").await.text(), "v2");
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 1);
}

#[tokio::test]
async fn a_client_conditional_request_gets_a_304_from_the_cache() {
    let h = Harness::fixed(
        200,
        &[("cache-control", "max-age=60"), ("etag", "W/\"e\"")],
        "body",
    )
    .await;
    h.get("/r").await;
    let request = support::get("/r").header("if-none-match", "\"x\", \"e\"");
    let r = h
        .send(request.body(scalws_core::Body::empty()).unwrap())
        .await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some("W/\"e\""));
    assert!(r.header("age").is_some());
    assert_eq!(h.upstream_hits(), 1);
}

#[tokio::test]
async fn stale_while_revalidate_answers_at_once_and_refreshes_once_in_the_background() {
    let n = Count::default();
    let h = Harness::start(CacheOptions::default(), move |_req| {
        let version = n.bump();
        async move {
            if version > 1 {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            reply(
                200,
                &[
                    ("cache-control", "max-age=1, stale-while-revalidate=60"),
                    STALE,
                ],
                format!("v{version}"),
            )
        }
    })
    .await;
    assert_eq!(h.get("/r").await.text(), "v1");
    let start = Instant::now();
    let stale = futures_util::future::join_all((0..5).map(|_| h.get("/r"))).await;
    assert!(
        start.elapsed() < Duration::from_millis(200),
        "{:?}",
        start.elapsed()
    );
    assert!(stale.iter().all(|r| r.text() == "v1"));
    // One refresh, in the background, for all five.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.upstream_hits(), 2);
    let stats = h.stats();
    assert_eq!((stats.stale_served, stats.stores), (5, 2));
    // The refreshed response (stale again at once here: Age 1) is the new one.
    assert_eq!(h.get("/r").await.text(), "v2");
}

#[tokio::test]
async fn stale_if_error_serves_the_stale_response_on_a_503() {
    let n = Count::default();
    let h = Harness::start(CacheOptions::default(), move |_req| {
        let first = n.bump() == 1;
        async move {
            if first {
                reply(
                    200,
                    &[
                        ("cache-control", "max-age=1, stale-if-error=60"),
                        STALE,
                        ("etag", "\"e\""),
                    ],
                    "good",
                )
            } else {
                reply(503, &[], "down")
            }
        }
    })
    .await;
    h.get("/r").await;
    let r = h.get("/r").await;
    assert_eq!((r.status, r.text()), (200, "good"));
    assert!(age(&r) >= 1);
    assert_eq!(h.upstream_hits(), 2);
    let stats = h.stats();
    assert_eq!((stats.stale_served, stats.revalidations), (1, 1));
}

#[tokio::test]
async fn without_stale_if_error_the_error_goes_to_the_client() {
    let n = Count::default();
    let h = Harness::start(CacheOptions::default(), move |_req| {
        let first = n.bump() == 1;
        async move {
            if first {
                reply(
                    200,
                    &[("cache-control", "max-age=1"), STALE, ("etag", "\"e\"")],
                    "good",
                )
            } else {
                reply(503, &[], "down")
            }
        }
    })
    .await;
    h.get("/r").await;
    let r = h.get("/r").await;
    assert_eq!((r.status, r.text()), (503, "down"));
}
