//! What is stored and what is served (RFC 9111 3, 4, 5.2): each rule against
//! a real upstream, counting the requests it receives.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, SystemTime};

use scalws_cache::CacheOptions;
use scalws_core::Body;
use support::{Count, Harness, age, get, header, lines, reply, request};

/// Two GETs for the same URL; returns how many reached the upstream.
async fn twice(h: &Harness) -> usize {
    let first = h.get("/r").await;
    let second = h.get("/r").await;
    assert_eq!(first.body, second.body);
    h.upstream_hits()
}

#[tokio::test]
async fn max_age_is_stored_and_hits_carry_age_and_the_origin_date() {
    let h = Harness::fixed(
        200,
        &[
            ("cache-control", "max-age=60"),
            ("content-type", "text/plain"),
        ],
        "hello",
    )
    .await;
    let first = h.get("/r").await;
    let second = h.get("/r").await;
    assert_eq!(h.upstream_hits(), 1);
    assert_eq!(second.status, 200);
    assert_eq!(second.text(), "hello");
    assert_eq!(age(&second), 0);
    assert_eq!(second.header("date"), first.header("date"));
    assert_eq!(second.header("content-length"), Some("5"));
    assert_eq!(second.header("content-type"), Some("text/plain"));
    for name in [
        "age",
        "date",
        "content-length",
        "cache-control",
        "content-type",
    ] {
        assert_eq!(lines(&second, name), 1, "{name}");
    }
}

#[tokio::test]
async fn age_from_upstream_is_kept_and_grows() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60"), ("age", "5")], "x").await;
    h.get("/r").await;
    let hit = h.get("/r").await;
    assert_eq!(h.upstream_hits(), 1);
    assert!((5..=6).contains(&age(&hit)), "{:?}", hit.header("age"));
}

#[tokio::test]
async fn s_maxage_wins_over_max_age() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=0, s-maxage=60")], "x").await;
    assert_eq!(twice(&h).await, 1);
}

#[tokio::test]
async fn expires_minus_date_gives_freshness() {
    let now = SystemTime::now();
    let date = httpdate::fmt_http_date(now);
    let expires = httpdate::fmt_http_date(now + Duration::from_secs(60));
    let h = Harness::start(CacheOptions::default(), move |_req| {
        let (date, expires) = (date.clone(), expires.clone());
        async move { reply(200, &[("date", &date), ("expires", &expires)], "x") }
    })
    .await;
    assert_eq!(twice(&h).await, 1);
}

#[tokio::test]
async fn an_expires_in_the_past_is_not_stored() {
    let h = Harness::fixed(200, &[("expires", "Thu, 01 Jan 1970 00:00:00 GMT")], "x").await;
    assert_eq!(twice(&h).await, 2);
    assert_eq!(h.stats().entries, 0);
}

#[tokio::test]
async fn without_freshness_default_ttl_decides() {
    let h = Harness::fixed(200, &[], "x").await;
    assert_eq!(twice(&h).await, 2, "default_ttl 0: not stored");
    let options = CacheOptions {
        default_ttl: Duration::from_secs(60),
        ..CacheOptions::default()
    };
    let h = Harness::start(options, |_req| async { reply(200, &[], "x") }).await;
    assert_eq!(twice(&h).await, 1);
}

#[tokio::test]
async fn no_store_is_not_stored() {
    let h = Harness::fixed(200, &[("cache-control", "no-store, max-age=60")], "x").await;
    assert_eq!(twice(&h).await, 2);
}

#[tokio::test]
async fn private_is_not_stored() {
    let h = Harness::fixed(200, &[("cache-control", "private, max-age=60")], "x").await;
    assert_eq!(twice(&h).await, 2);
}

#[tokio::test]
async fn set_cookie_is_not_stored() {
    let h = Harness::fixed(
        200,
        &[("cache-control", "max-age=60"), ("set-cookie", "s=1")],
        "x",
    )
    .await;
    assert_eq!(twice(&h).await, 2);
}

#[tokio::test]
async fn statuses_outside_the_cacheable_set_are_not_stored() {
    for status in [302, 206, 500, 501, 503] {
        let h = Harness::fixed(status, &[("cache-control", "max-age=60")], "x").await;
        assert_eq!(twice(&h).await, 2, "{status}");
    }
    for status in [404, 301, 410] {
        let h = Harness::fixed(status, &[("cache-control", "max-age=60")], "x").await;
        assert_eq!(twice(&h).await, 1, "{status}");
    }
}

#[tokio::test]
async fn no_cache_is_stored_and_revalidated_on_every_use() {
    let conditional = Count::default();
    let seen = conditional.clone();
    let h = Harness::start(CacheOptions::default(), move |req| {
        let seen = seen.clone();
        async move {
            if header(&req, "if-none-match") == Some("\"v1\"") {
                seen.bump();
                return reply(304, &[("etag", "\"v1\"")], "");
            }
            reply(
                200,
                &[("cache-control", "no-cache"), ("etag", "\"v1\"")],
                "body",
            )
        }
    })
    .await;
    for _ in 0..3 {
        let r = h.get("/r").await;
        assert_eq!((r.status, r.text()), (200, "body"));
    }
    assert_eq!(h.upstream_hits(), 3);
    assert_eq!(conditional.get(), 2);
    let stats = h.stats();
    assert_eq!((stats.misses, stats.revalidations, stats.hits), (1, 2, 2));
}

fn authorized(path: &str) -> http::Request<Body> {
    get(path)
        .header("authorization", "Bearer secret")
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn authorized_requests_are_not_stored_without_public_or_s_maxage() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    h.send(authorized("/r")).await;
    h.send(authorized("/r")).await;
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 0);
}

#[tokio::test]
async fn authorized_requests_share_public_and_s_maxage_responses() {
    for cc in [
        "public, max-age=60",
        "s-maxage=60",
        "max-age=60, must-revalidate",
    ] {
        let h = Harness::start(CacheOptions::default(), move |_req| async move {
            reply(200, &[("cache-control", cc)], "shared")
        })
        .await;
        h.send(authorized("/r")).await;
        let hit = h.send(authorized("/r")).await;
        assert_eq!(hit.text(), "shared");
        assert_eq!(h.upstream_hits(), 1, "{cc}");
    }
}

#[tokio::test]
async fn a_stored_response_without_public_is_not_served_to_authorized_requests() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    h.get("/r").await;
    h.send(authorized("/r")).await;
    assert_eq!(h.upstream_hits(), 2);
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 2, "anonymous requests still hit");
}

#[tokio::test]
async fn request_no_store_bypasses_the_cache() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    let no_store = || {
        get("/r")
            .header("cache-control", "no-store")
            .body(Body::empty())
            .unwrap()
    };
    h.send(no_store()).await;
    assert_eq!(h.stats().entries, 0, "not stored");
    h.get("/r").await;
    h.send(no_store()).await;
    assert_eq!(h.upstream_hits(), 3, "not served");
    assert_eq!(h.stats().bypasses, 2);
}

#[tokio::test]
async fn request_no_cache_and_max_age_zero_revalidate() {
    let conditional = Count::default();
    let seen = conditional.clone();
    let h = Harness::start(CacheOptions::default(), move |req| {
        let seen = seen.clone();
        async move {
            if header(&req, "if-none-match").is_some() {
                seen.bump();
                return reply(304, &[], "");
            }
            reply(
                200,
                &[("cache-control", "max-age=60"), ("etag", "\"e\"")],
                "body",
            )
        }
    })
    .await;
    h.get("/r").await;
    for cc in ["no-cache", "max-age=0"] {
        let r = h
            .send(
                get("/r")
                    .header("cache-control", cc)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!((r.status, r.text()), (200, "body"));
    }
    assert_eq!(conditional.get(), 2);
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 3);
}

#[tokio::test]
async fn only_if_cached_without_a_stored_response_is_504() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    let only = || {
        get("/r")
            .header("cache-control", "only-if-cached")
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(h.send(only()).await.status, 504);
    h.get("/r").await;
    assert_eq!(h.send(only()).await.status, 200);
    assert_eq!(h.upstream_hits(), 1);
}

#[tokio::test]
async fn head_is_served_from_a_stored_get_without_body() {
    let methods = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = methods.clone();
    let h = Harness::start(CacheOptions::default(), move |req| {
        seen.lock().unwrap().push(req.method().to_string());
        async { reply(200, &[("cache-control", "max-age=60")], "hello") }
    })
    .await;
    let head = || {
        request("HEAD", support::HOST, "/r")
            .body(Body::empty())
            .unwrap()
    };
    // A HEAD miss goes as HEAD and is not stored.
    let miss = h.send(head()).await;
    assert!(miss.body.is_empty());
    let got = h.get("/r").await;
    let hit = h.send(head()).await;
    assert_eq!(*methods.lock().unwrap(), ["HEAD", "GET"]);
    assert_eq!(hit.status, 200);
    assert!(hit.body.is_empty());
    assert_eq!(hit.header("content-length"), Some("5"));
    assert_eq!(hit.header("date"), got.header("date"));
    assert!(hit.header("age").is_some());
}

#[tokio::test]
async fn unsafe_methods_that_succeed_invalidate_the_url() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    h.get("/r").await;
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 1);
    let post = request("POST", support::HOST, "/r")
        .body(Body::from("data"))
        .unwrap();
    h.send(post).await;
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 3);
    let delete = request("DELETE", support::HOST, "/r")
        .body(Body::empty())
        .unwrap();
    h.send(delete).await;
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 5);
    // OPTIONS is safe: no invalidation.
    h.send(
        request("OPTIONS", support::HOST, "/r")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 6);
}

#[tokio::test]
async fn a_failed_unsafe_request_does_not_invalidate() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        if req.method() == http::Method::POST {
            return reply(403, &[], "no");
        }
        reply(200, &[("cache-control", "max-age=60")], "x")
    })
    .await;
    h.get("/r").await;
    h.send(
        request("POST", support::HOST, "/r")
            .body(Body::from("d"))
            .unwrap(),
    )
    .await;
    h.get("/r").await;
    assert_eq!(h.upstream_hits(), 2);
}

#[tokio::test]
async fn a_hit_does_not_read_the_request_body() {
    let h = Harness::fixed(200, &[("cache-control", "max-age=60")], "x").await;
    h.get("/r").await;
    let polled = Count::default();
    let seen = polled.clone();
    let body = futures_util::stream::poll_fn(move |_| {
        seen.bump();
        std::task::Poll::Ready(Some(Ok::<_, std::io::Error>(http_body::Frame::data(
            bytes::Bytes::from("b"),
        ))))
    });
    let request = get("/r")
        .body(Body::new(http_body_util::StreamBody::new(body)))
        .unwrap();
    assert_eq!(h.send(request).await.status, 200);
    assert_eq!(polled.get(), 0);
    assert_eq!(h.upstream_hits(), 1);
}
