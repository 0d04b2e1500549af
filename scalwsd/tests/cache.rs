//! The response cache through scalwsd: configured per application, bypassed
//! per route, keyed by host, and safe for keep-alive connections.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::time::Duration;

use test_support::upstream::{Upstream, ok};
use test_support::{Proto, TestClient, read_until_close};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn cacheable_upstream() -> Upstream {
    Upstream::start(|req| async move {
        let host = req
            .headers()
            .get("host")
            .map(|h| h.to_str().unwrap_or("").to_owned())
            .unwrap_or_default();
        let mut response = ok(format!("{} for {host}", req.uri().path()));
        response
            .headers_mut()
            .insert("cache-control", "max-age=60".parse().unwrap());
        response
    })
    .await
}

fn config(upstream: &Upstream) -> String {
    format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  origin: {{ addresses: ["{}"] }}
applications:
  - name: site
    domains: [a.test, b.test]
    cache: {{ max_size: 1MiB, max_object: 64KiB, default_ttl: 0s }}
    routes:
      - {{ path: /live, proxy: origin, cache: false }}
      - {{ path: /, proxy: origin }}
  - name: other
    domains: [c.test]
    routes:
      - {{ path: /, proxy: origin }}
"#,
        upstream.addr
    )
}

#[tokio::test]
async fn hits_are_served_from_the_cache_with_age_and_routes_can_opt_out() {
    let upstream = cacheable_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&config(&upstream), dir.path());
    let addr = running.addr("http");
    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        let path = format!("/page-{proto:?}");
        let first = client.get(addr, "a.test", &path).await;
        assert_eq!(first.text(), format!("{path} for a.test"));
        let before = upstream.hits();
        let second = client.get(addr, "a.test", &path).await;
        assert_eq!(second.text(), first.text());
        assert_eq!(
            upstream.hits(),
            before,
            "{proto:?}: the second GET must be a hit"
        );
        assert!(
            second.header("age").is_some(),
            "{proto:?}: a hit carries Age"
        );
    }
    // `cache: false` on a route: every request goes upstream.
    let client = TestClient::new(Proto::Http1);
    let before = upstream.hits();
    client.get(addr, "a.test", "/live").await;
    client.get(addr, "a.test", "/live").await;
    assert_eq!(upstream.hits(), before + 2);
    // An application without a cache.
    let before = upstream.hits();
    client.get(addr, "c.test", "/x").await;
    client.get(addr, "c.test", "/x").await;
    assert_eq!(upstream.hits(), before + 2);
}

#[tokio::test]
async fn the_host_is_part_of_the_key() {
    let upstream = cacheable_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&config(&upstream), dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::Http1);
    assert_eq!(
        client.get(addr, "a.test", "/same").await.text(),
        "/same for a.test"
    );
    assert_eq!(
        client.get(addr, "b.test", "/same").await.text(),
        "/same for b.test"
    );
    assert_eq!(
        client.get(addr, "a.test", "/same").await.text(),
        "/same for a.test"
    );
    assert_eq!(upstream.hits(), 2);
}

#[tokio::test]
async fn a_hit_with_a_request_body_leaves_the_connection_clean() {
    let upstream = cacheable_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&config(&upstream), dir.path());
    let addr = running.addr("http");
    TestClient::new(Proto::Http1)
        .get(addr, "a.test", "/warm")
        .await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let body = "GET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let first = format!(
        "GET /warm HTTP/1.1\r\nHost: a.test\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(first.as_bytes()).await.unwrap();
    stream
        .write_all(b"GET /warm HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let replies = read_until_close(&mut stream, Duration::from_secs(5)).await;
    assert!(replies.starts_with("HTTP/1.1 200"), "{replies}");
    assert!(
        !replies.contains("/smuggled"),
        "a request body was taken for a request: {replies}"
    );
}

#[test]
fn cache_settings_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "listeners: [{ name: http, address: \"127.0.0.1:0\" }]\napplications:\n  - name: a\n    domains: [a.test]\n    cache: { max_size: 1MiB, max_object: 2MiB }\n    routes:\n      - { path: /, respond: {}, cache: true }\n";
    let errors = scalwsd::config::load("c.yaml", yaml, dir.path())
        .unwrap_err()
        .to_string();
    assert_eq!(
        errors,
        "c.yaml:5:42: applications[0].cache.max_object: must not be larger than max_size\n\
         c.yaml:7:40: applications[0].routes[0].cache: cache: true needs a cache on the application (applications[].cache)\n\
         c.yaml:7:40: applications[0].routes[0].cache: cache applies only to proxy routes"
    );
}

#[tokio::test]
async fn a_header_matched_canary_route_never_answers_for_the_route_it_shadows() {
    let cacheable = |name: &'static str| {
        Upstream::start(move |_req| async move {
            let mut response = ok(name);
            response
                .headers_mut()
                .insert("cache-control", "max-age=60".parse().unwrap());
            response
        })
    };
    let main = cacheable("main").await;
    let canary = cacheable("canary").await;
    let yaml = format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  main: {{ addresses: ["{}"] }}
  canary: {{ addresses: ["{}"] }}
applications:
  - name: site
    domains: ["*"]
    cache: {{ max_size: 1MiB }}
    routes:
      - {{ match: {{ path: {{ prefix: / }}, headers: {{ x-canary: "1" }} }}, proxy: canary }}
      - {{ path: /, proxy: main }}
"#,
        main.addr, canary.addr
    );
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml, dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::Http1);
    let canary_request = || {
        test_support::request("GET", "x", "/page")
            .header("x-canary", "1")
            .body(http_body_util::Full::default())
            .unwrap()
    };
    assert_eq!(client.send(addr, canary_request()).await.text(), "canary");
    assert_eq!(client.get(addr, "x", "/page").await.text(), "main");
    assert_eq!(client.send(addr, canary_request()).await.text(), "canary");
    assert_eq!(client.get(addr, "x", "/page").await.text(), "main");
    assert_eq!(
        (main.hits(), canary.hits()),
        (1, 1),
        "each route stores its own entry"
    );
}
