//! Bounds: `max_size` evicts, `max_object` passes through, failed bodies are
//! not stored.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use scalws_cache::CacheOptions;
use support::{Harness, reply};
use test_support::upstream::UpstreamBody;

#[tokio::test]
async fn filling_past_max_size_evicts() {
    let options = CacheOptions {
        max_size: 64 * 1024,
        max_object: 16 * 1024,
        ..CacheOptions::default()
    };
    let h = Harness::start(options, |_req| async {
        reply(
            200,
            &[("cache-control", "max-age=60")],
            vec![b'x'; 8 * 1024],
        )
    })
    .await;
    for i in 0..40 {
        assert_eq!(h.get(&format!("/object/{i}")).await.body.len(), 8 * 1024);
    }
    let stats = h.stats();
    assert_eq!(stats.stores, 40);
    assert!(stats.bytes_stored <= 64 * 1024, "{stats:?}");
    assert!((1..40).contains(&stats.entries), "{stats:?}");
    assert!(stats.bytes_stored >= stats.entries * 8 * 1024, "{stats:?}");
}

/// Read without forcing maintenance: after every store of a stream of
/// distinct objects the cache holds at most `max_size`.
#[tokio::test]
async fn a_stream_of_distinct_objects_never_leaves_it_over_max_size() {
    let options = CacheOptions {
        max_size: 64 * 1024,
        max_object: 16 * 1024,
        ..CacheOptions::default()
    };
    let h = Harness::start(options, |_req| async {
        reply(
            200,
            &[("cache-control", "max-age=60")],
            vec![b'x'; 3 * 1024],
        )
    })
    .await;
    let mut most = 0;
    for i in 0..300 {
        assert_eq!(h.get(&format!("/stream/{i}")).await.body.len(), 3 * 1024);
        most = most.max(h.cache.stats().bytes_stored);
    }
    assert!(most <= 64 * 1024, "held {most} bytes at most, over 65536");
    assert!(most > 32 * 1024, "held {most}: the bound is also used");
}

#[tokio::test]
async fn an_object_over_max_object_passes_through_whole_and_is_not_stored() {
    let options = CacheOptions {
        max_object: 1024,
        ..CacheOptions::default()
    };
    let h = Harness::start(options, |_req| async {
        reply(
            200,
            &[("cache-control", "max-age=60")],
            vec![b'y'; 256 * 1024],
        )
    })
    .await;
    for _ in 0..2 {
        assert_eq!(h.get("/big").await.body.len(), 256 * 1024);
    }
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 0);
}

/// A body of `chunks` chunks of `size` bytes, without Content-Length, the
/// last one an error if `fail`.
fn streamed(chunks: usize, size: usize, fail: bool) -> Response<UpstreamBody> {
    let frames = (0..chunks).map(move |i| {
        if fail && i == chunks - 1 {
            Err(std::io::Error::other("upstream died"))
        } else {
            Ok(http_body::Frame::data(Bytes::from(vec![b'z'; size])))
        }
    });
    let stream = futures_util::stream::iter(frames).then(|frame| async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        frame
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    response
        .headers_mut()
        .insert("cache-control", "max-age=60".parse().unwrap());
    response
}

use futures_util::StreamExt;

#[tokio::test]
async fn an_unknown_length_over_max_object_streams_through_and_is_not_stored() {
    let options = CacheOptions {
        max_object: 10 * 1024,
        ..CacheOptions::default()
    };
    let h = Harness::start(options, |_req| async { streamed(8, 4096, false) }).await;
    for _ in 0..2 {
        assert_eq!(h.get("/stream").await.body.len(), 8 * 4096);
    }
    assert_eq!(h.upstream_hits(), 2);
    // Under the limit, the same streamed body is stored.
    let h = Harness::start(CacheOptions::default(), |_req| async {
        streamed(8, 4096, false)
    })
    .await;
    h.get("/stream").await;
    let hit = h.get("/stream").await;
    assert_eq!(hit.body.len(), 8 * 4096);
    assert_eq!(hit.header("content-length"), Some("32768"));
    assert_eq!(h.upstream_hits(), 1);
}

#[tokio::test]
async fn a_body_that_fails_midway_is_not_stored() {
    let h = Harness::start(CacheOptions::default(), |_req| async {
        streamed(4, 1024, true)
    })
    .await;
    for _ in 0..2 {
        let response = h
            .respond(
                support::get("/broken")
                    .body(scalws_core::Body::empty())
                    .unwrap(),
            )
            .await;
        assert!(response.into_body().collect().await.is_err());
    }
    assert_eq!(h.upstream_hits(), 2);
    assert_eq!(h.stats().entries, 0);
}
