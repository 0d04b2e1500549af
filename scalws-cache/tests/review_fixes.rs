//! Background refreshes (their request, their bounded reading), absurd `Age`
//! values, partitions, and `stale-if-error` without validators, over an
//! in-process origin.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use scalws_cache::{Cache, CacheOptions};
use scalws_core::{Body, BoxError};
use tower::{Layer, Service, ServiceExt};

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// An origin that records each request's headers and answers the n-th
/// request (from 0) with `answer(n)`.
fn origin<F>(
    answer: F,
) -> (
    Seen,
    impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static,
)
where
    F: Fn(usize) -> Response<Body> + Clone + Send + Sync + 'static,
{
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let service = tower::service_fn(move |request: Request<Body>| {
        let n = {
            let mut log = log.lock().unwrap();
            log.push(request.headers().clone());
            log.len() - 1
        };
        let answer = answer.clone();
        async move { Ok::<_, Infallible>(answer(n)) }
    });
    (seen, service)
}

fn response(status: u16, headers: &[(&'static str, &str)], body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        response.headers_mut().append(*name, value.parse().unwrap());
    }
    response
}

fn get(path: &str) -> http::request::Builder {
    Request::get(format!("http://example.com{path}"))
}

async fn send<S>(service: &S, request: Request<Body>) -> (u16, HeaderMap, Bytes)
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone,
{
    let response = service.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, body)
}

async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out");
}

#[tokio::test]
async fn the_background_refresh_sends_no_framing_ranges_or_client_conditions() {
    let (seen, upstream) = origin(|_| {
        response(
            200,
            &[
                ("cache-control", "max-age=1, stale-while-revalidate=60"),
                ("age", "1"),
                ("etag", "\"v1\""),
            ],
            Body::from("hello"),
        )
    });
    let service = Cache::new(CacheOptions::default()).layer().layer(upstream);
    send(&service, get("/a").body(Body::empty()).unwrap()).await;
    let request = get("/a")
        .header("content-length", "5")
        .header("transfer-encoding", "chunked")
        .header("range", "bytes=0-1")
        .header("if-range", "\"v0\"")
        .header("if-none-match", "\"client\"")
        .header("if-modified-since", "Mon, 01 Jan 2024 00:00:00 GMT")
        .header("if-match", "\"m\"")
        .header("if-unmodified-since", "Mon, 01 Jan 2024 00:00:00 GMT")
        .header("expect", "100-continue")
        .header("x-client", "kept")
        .body(Body::empty())
        .unwrap();
    send(&service, request).await;
    until(|| seen.lock().unwrap().len() == 2).await;
    let background = seen.lock().unwrap()[1].clone();
    for gone in [
        "content-length",
        "transfer-encoding",
        "range",
        "if-range",
        "if-modified-since",
        "if-match",
        "if-unmodified-since",
        "expect",
    ] {
        assert!(!background.contains_key(gone), "{gone}: {background:?}");
    }
    assert_eq!(background["if-none-match"], "\"v1\"");
    assert_eq!(background.get_all("if-none-match").iter().count(), 1);
    assert_eq!(background["x-client"], "kept");
}

/// A chunk whose drop is counted.
struct Tracked(Arc<AtomicUsize>);

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &[b'x'; 100]
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn the_background_refresh_never_holds_more_than_max_object() {
    let alive = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (alive2, most2) = (Arc::clone(&alive), Arc::clone(&most));
    let (seen, upstream) = origin(move |n| {
        let headers = [
            ("cache-control", "max-age=1, stale-while-revalidate=60"),
            ("age", "1"),
        ];
        if n == 0 {
            return response(200, &headers, Body::from("small"));
        }
        // 1000 chunks of 100 bytes, far over max_object.
        let (alive, most) = (Arc::clone(&alive2), Arc::clone(&most2));
        let frames = (0..1000).map(move |_| {
            let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            Ok::<_, BoxError>(Frame::data(Bytes::from_owner(Tracked(Arc::clone(&alive)))))
        });
        response(
            200,
            &headers,
            Body::new(StreamBody::new(futures_util::stream::iter(frames))),
        )
    });
    let options = CacheOptions {
        max_object: 1000,
        ..CacheOptions::default()
    };
    let service = Cache::new(options).layer().layer(upstream);
    send(&service, get("/big").body(Body::empty()).unwrap()).await;
    send(&service, get("/big").body(Body::empty()).unwrap()).await;
    until(|| seen.lock().unwrap().len() == 2).await;
    until(|| alive.load(Ordering::SeqCst) == 0 && most.load(Ordering::SeqCst) > 0).await;
    // At most max_object of chunks in the tee, plus the one being read.
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 12, "{most} chunks of 100 bytes held at once");
}

#[tokio::test]
async fn an_absurd_age_is_capped_and_never_overflows() {
    let (_seen, upstream) = origin(|_| {
        response(
            200,
            &[
                ("cache-control", "max-age=60, stale-if-error=60"),
                ("age", "18446744073709551615"),
                ("etag", "\"a\""),
            ],
            Body::from("old"),
        )
    });
    let service = Cache::new(CacheOptions::default()).layer().layer(upstream);
    for _ in 0..2 {
        // Age arithmetic on the stored entry overflowed once it had been
        // resident for a second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (status, _, body) = send(&service, get("/age").body(Body::empty()).unwrap()).await;
        assert_eq!((status, &body[..]), (200, &b"old"[..]));
    }
}

#[tokio::test]
async fn partitions_share_the_store_but_never_entries_and_purges_reach_all() {
    let cache = Cache::new(CacheOptions::default());
    let route = |name: &'static str| {
        let (_seen, origin) =
            origin(move |_| response(200, &[("cache-control", "max-age=60")], Body::from(name)));
        origin
    };
    let main = cache.layer().layer(route("main"));
    let canary = cache.layer_for("canary").layer(route("canary"));
    let other = cache.layer_for(String::from("other")).layer(route("other"));
    for _ in 0..2 {
        let (_, _, body) = send(&main, get("/p").body(Body::empty()).unwrap()).await;
        assert_eq!(&body[..], b"main");
        let (_, _, body) = send(&canary, get("/p").body(Body::empty()).unwrap()).await;
        assert_eq!(&body[..], b"canary");
        let (_, _, body) = send(&other, get("/p").body(Body::empty()).unwrap()).await;
        assert_eq!(&body[..], b"other");
    }
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.entries), (3, 3, 3));
    assert_eq!(cache.purge_url("http", "example.com", "/p"), 3);
    for service in [&main, &canary, &other] {
        send(service, get("/p").body(Body::empty()).unwrap()).await;
    }
    assert_eq!(cache.purge_prefix("example.com", "/p"), 3);
    for service in [&main, &canary, &other] {
        send(service, get("/p").body(Body::empty()).unwrap()).await;
    }
    assert_eq!(cache.purge_host("Example.com"), 3);
}

#[tokio::test]
async fn stale_if_error_applies_to_a_refetch_without_validators() {
    let (seen, upstream) = origin(|n| {
        if n == 0 {
            response(
                200,
                &[
                    ("cache-control", "max-age=1, stale-if-error=60"),
                    ("age", "1"),
                ],
                Body::from("stale"),
            )
        } else {
            response(503, &[], Body::from("down"))
        }
    });
    let service = Cache::new(CacheOptions::default()).layer().layer(upstream);
    send(&service, get("/e").body(Body::empty()).unwrap()).await;
    let (status, _, body) = send(&service, get("/e").body(Body::empty()).unwrap()).await;
    assert_eq!((status, &body[..]), (200, &b"stale"[..]));
    assert_eq!(seen.lock().unwrap().len(), 2);
    // Without stale-if-error the error goes through.
    let (_seen, upstream) = origin(|n| {
        if n == 0 {
            response(
                200,
                &[("cache-control", "max-age=1"), ("age", "1")],
                Body::from("stale"),
            )
        } else {
            response(503, &[], Body::from("down"))
        }
    });
    let service = Cache::new(CacheOptions::default()).layer().layer(upstream);
    send(&service, get("/e").body(Body::empty()).unwrap()).await;
    let (status, _, _) = send(&service, get("/e").body(Body::empty()).unwrap()).await;
    assert_eq!(status, 503);
}
