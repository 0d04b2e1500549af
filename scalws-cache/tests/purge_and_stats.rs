//! Purge by URL, host and prefix; counters after known traffic.
#![allow(clippy::unwrap_used)]

mod support;

use scalws_cache::{CacheOptions, CacheStats};
use scalws_core::Body;
use support::{Harness, get, header, reply, request};

async fn cached_everything() -> Harness {
    Harness::start(CacheOptions::default(), |req| async move {
        let body = format!("{} {}", header(&req, "host").unwrap_or("-"), req.uri());
        reply(
            200,
            &[("cache-control", "max-age=60"), ("vary", "accept-encoding")],
            body,
        )
    })
    .await
}

async fn fetch(h: &Harness, host: &str, path: &str, encoding: Option<&str>) {
    let mut r = request("GET", host, path);
    if let Some(e) = encoding {
        r = r.header("accept-encoding", e);
    }
    h.send(r.body(Body::empty()).unwrap()).await;
}

#[tokio::test]
async fn purge_url_removes_every_variant_of_the_url() {
    let h = cached_everything().await;
    fetch(&h, "a.example", "/x", Some("gzip")).await;
    fetch(&h, "a.example", "/x", Some("br")).await;
    fetch(&h, "a.example", "/y", None).await;
    assert_eq!(h.stats().entries, 3);
    assert_eq!(h.cache.purge_url("http", "A.example:80", "/x"), 2);
    assert_eq!(h.cache.purge_url("http", "a.example", "/x"), 0);
    assert_eq!(
        h.cache.purge_url("https", "a.example", "/y"),
        0,
        "another scheme"
    );
    assert_eq!(h.stats().entries, 1);
    // Purged: the next request goes upstream again; HEAD shares GET's entry.
    fetch(&h, "a.example", "/x", Some("gzip")).await;
    assert_eq!(h.upstream_hits(), 4);
    h.send(
        request("HEAD", "a.example", "/x")
            .header("accept-encoding", "gzip")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(h.upstream_hits(), 4);
}

#[tokio::test]
async fn purge_host_and_prefix() {
    let h = cached_everything().await;
    for path in ["/img/1", "/img/2", "/img2", "/css/a"] {
        fetch(&h, "a.example", path, None).await;
    }
    fetch(&h, "b.example", "/img/1", None).await;
    assert_eq!(h.stats().entries, 5);
    assert_eq!(h.cache.purge_prefix("a.example", "/img/"), 2);
    assert_eq!(h.stats().entries, 3);
    assert_eq!(h.cache.purge_host("A.EXAMPLE"), 2);
    assert_eq!(h.stats().entries, 1);
    fetch(&h, "b.example", "/img/1", None).await;
    assert_eq!(h.upstream_hits(), 5, "b.example untouched");
    assert_eq!(h.cache.purge_host("b.example"), 1);
    let stats = h.stats();
    assert_eq!((stats.entries, stats.bytes_stored), (0, 0));
}

#[tokio::test]
async fn stats_are_exact_after_known_traffic() {
    let h = Harness::start(CacheOptions::default(), |req| async move {
        match req.uri().path() {
            "/nostore" => reply(200, &[("cache-control", "no-store")], "n"),
            _ => reply(200, &[("cache-control", "max-age=60")], "0123456789"),
        }
    })
    .await;
    h.get("/a").await; // miss, store
    h.get("/a").await; // hit
    h.get("/a").await; // hit
    h.get("/b").await; // miss, store
    h.get("/nostore").await; // miss
    h.get("/nostore").await; // miss
    h.send(
        request("HEAD", support::HOST, "/b")
            .body(Body::empty())
            .unwrap(),
    )
    .await; // hit
    h.send(
        request("POST", support::HOST, "/b")
            .body(Body::from("x"))
            .unwrap(),
    )
    .await; // bypass, invalidates /b
    h.send(
        get("/a")
            .header("cache-control", "no-store")
            .body(Body::empty())
            .unwrap(),
    )
    .await; // bypass
    let stats = h.stats();
    assert_eq!(
        CacheStats {
            bytes_stored: 0,
            ..stats
        },
        CacheStats {
            hits: 3,
            misses: 4,
            stale_served: 0,
            revalidations: 0,
            bytes_stored: 0,
            entries: 1,
            stores: 2,
            bypasses: 2,
        }
    );
    assert!(
        stats.bytes_stored > 10 && stats.bytes_stored < 2048,
        "{stats:?}"
    );
    assert_eq!(h.upstream_hits(), 6);
    assert_eq!(
        stats.hits + stats.misses + stats.stale_served + stats.bypasses,
        9
    );
}
