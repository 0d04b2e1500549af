//! Host matching (SPEC 3) and route precedence (SPEC 4), over real sockets,
//! answered the same on HTTP/1.1 and h2c.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Full;
use test_support::{Proto, TestClient, raw_exchange, request};

const HOSTS: &str = r#"
listeners:
  - { name: a, address: "127.0.0.1:0" }
  - { name: b, address: "127.0.0.1:0" }
applications:
  - name: exact
    domains: [example.com]
    listeners: [a]
    routes: [{ path: /, respond: { body: exact } }]
  - name: one-label
    domains: ["*.example.com"]
    routes: [{ path: /, respond: { body: one-label } }]
  - name: any-labels
    domains: ["**.example.com", "**.deep.example.com"]
    routes: [{ path: /, respond: { body: any-labels } }]
  - name: deeper
    domains: ["**.x.deep.example.com"]
    routes: [{ path: /, respond: { body: deeper } }]
  - name: catch-all
    domains: ["*"]
    listeners: [a]
    routes: [{ path: /, respond: { body: catch-all } }]
  - name: b-only
    domains: [example.com]
    listeners: [b]
    routes: [{ path: /, respond: { body: b-only } }]
"#;

async fn answer(client: &TestClient, addr: SocketAddr, host: &str) -> String {
    let reply = client.get(addr, host, "/").await;
    match reply.status {
        200 => reply.text().to_owned(),
        status => status.to_string(),
    }
}

#[tokio::test]
async fn host_table_as_in_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(HOSTS, dir.path());
    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        let a = running.addr("a");
        let b = running.addr("b");
        let table = [
            (a, "example.com", "exact"),
            (a, "EXAMPLE.COM", "exact"),
            (a, "example.com:8080", "exact"),
            (a, "example.com.", "exact"),
            (a, "Example.Com.:80", "exact"),
            (a, "a.example.com", "one-label"),
            (a, "a.b.example.com", "any-labels"),
            (a, "q.deep.example.com", "any-labels"),
            (a, "p.q.deep.example.com", "any-labels"),
            (a, "p.x.deep.example.com", "deeper"),
            (a, "p.q.x.deep.example.com", "deeper"),
            (a, "other.net", "catch-all"),
            (a, "127.0.0.1", "catch-all"),
            // Listener scoping: `exact` and `catch-all` live on `a` only.
            (b, "example.com", "b-only"),
            (b, "a.example.com", "one-label"),
            (b, "other.net", "404"),
        ];
        for (addr, host, expected) in table {
            assert_eq!(
                answer(&client, addr, host).await,
                expected,
                "{proto:?} Host: {host}"
            );
        }
    }
}

#[tokio::test]
async fn empty_missing_or_invalid_host_on_http1_is_400() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(HOSTS, dir.path());
    let a = running.addr("a");
    for head in [
        "GET / HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: exa mple.com\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a..b\r\nConnection: close\r\n\r\n",
    ] {
        let reply = raw_exchange(a, head.as_bytes(), Duration::from_secs(5)).await;
        assert!(reply.starts_with("HTTP/1.1 400"), "{head:?} -> {reply}");
    }
}

const ROUTES: &str = r#"
listeners:
  - { name: http, address: "127.0.0.1:0" }
applications:
  - name: site
    domains: ["*"]
    routes:
      - { path: /, respond: { body: root } }
      - { path: /api, respond: { body: api } }
      - { path: /api/v1, respond: { body: api-v1 } }
      - { match: { path: { exact: /api/v1/status } }, respond: { body: exact-status } }
      - { match: { path: { prefix: /m }, methods: [POST] }, respond: { body: m-post } }
      - { match: { path: { prefix: /m } }, respond: { body: m-any } }
      - { match: { path: { prefix: /h }, headers: { x-canary: "1" } }, respond: { body: h-one } }
      - { match: { path: { prefix: /h }, headers: { x-canary: "1", x-beta: "yes" } }, respond: { body: h-two } }
      - { match: { path: { prefix: /q }, query: { v: "2" } }, respond: { body: q-one } }
      - { match: { path: { prefix: /q }, query: { v: "2", debug: "on" } }, respond: { body: q-two } }
      - { path: /tie, respond: { body: tie-first } }
      - { path: /tie, respond: { body: tie-second } }
      - { match: { path: { pattern: "/users/{id}" } }, respond: { body: user } }
      - { match: { path: { prefix: /only-get }, methods: [GET, HEAD] }, respond: { body: only-get } }
      - { match: { path: { prefix: /only-get }, methods: [DELETE] }, respond: { body: only-delete } }
  - name: prefix-only
    domains: [fast.test]
    routes:
      - { path: /, respond: { body: fast-root } }
      - { path: /api, respond: { body: fast-api } }
      - { path: /api/, respond: { body: fast-api-dup } }
"#;

async fn routed(
    client: &TestClient,
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> String {
    let mut builder = request(method, host, path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let reply = client
        .send(addr, builder.body(Full::default()).unwrap())
        .await;
    match reply.status {
        200 => reply.text().to_owned(),
        405 => format!("405 allow={}", reply.header("allow").unwrap_or("-")),
        status => status.to_string(),
    }
}

#[tokio::test]
async fn route_precedence_as_in_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(ROUTES, dir.path());
    let addr = running.addr("http");
    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        let cases: &[Case<'_>] = &[
            ("GET", "x", "/", &[], "root"),
            ("GET", "x", "/api", &[], "api"),
            ("GET", "x", "/api/", &[], "api"),
            ("GET", "x", "/api/x", &[], "api"),
            ("GET", "x", "/apix", &[], "root"),
            ("GET", "x", "/api/v1", &[], "api-v1"),
            ("GET", "x", "/api/v1/other", &[], "api-v1"),
            ("GET", "x", "/api/v1/status", &[], "exact-status"),
            ("GET", "x", "/api/v1/status?x=1", &[], "exact-status"),
            ("GET", "x", "/api/v1/status/more", &[], "api-v1"),
            ("POST", "x", "/m", &[], "m-post"),
            ("GET", "x", "/m", &[], "m-any"),
            ("GET", "x", "/h", &[], "root"),
            ("GET", "x", "/h", &[("x-canary", "1")], "h-one"),
            (
                "GET",
                "x",
                "/h",
                &[("X-Canary", "1"), ("x-beta", "yes")],
                "h-two",
            ),
            (
                "GET",
                "x",
                "/h",
                &[("x-canary", "2"), ("x-beta", "yes")],
                "root",
            ),
            ("GET", "x", "/q?v=2", &[], "q-one"),
            ("GET", "x", "/q?v=2&debug=on", &[], "q-two"),
            ("GET", "x", "/q?v=3", &[], "root"),
            ("GET", "x", "/tie", &[], "tie-first"),
            ("GET", "x", "/users/42", &[], "user"),
            ("GET", "x", "/users/42/x", &[], "root"),
            // A method-restricted route only: everything else falls to `/`.
            ("GET", "x", "/only-get", &[], "only-get"),
            ("DELETE", "x", "/only-get", &[], "only-delete"),
            ("PUT", "x", "/only-get", &[], "root"),
            // Dot segments and unreserved escapes are normalised before matching.
            ("GET", "x", "/x/../api", &[], "api"),
            ("GET", "x", "/%61pi", &[], "api"),
            // The prefix-only fast path.
            ("GET", "fast.test", "/", &[], "fast-root"),
            ("GET", "fast.test", "/api/x", &[], "fast-api"),
            ("GET", "fast.test", "/apix", &[], "fast-root"),
        ];
        for (method, host, path, headers, expected) in cases {
            assert_eq!(
                routed(&client, addr, method, host, path, headers).await,
                *expected,
                "{proto:?} {method} {host}{path} {headers:?}"
            );
        }
    }
}

/// Method, host, path, request headers, expected answer.
type Case<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

const NO_FALLBACK: &str = r#"
listeners:
  - { name: http, address: "127.0.0.1:0" }
applications:
  - name: strict
    domains: ["*"]
    routes:
      - { match: { path: { exact: /thing }, methods: [GET] }, respond: { body: get } }
      - { match: { path: { exact: /thing }, methods: [POST] }, respond: { body: post } }
      - { path: /api, respond: { body: api } }
"#;

#[tokio::test]
async fn no_route_is_404_and_wrong_method_is_405_with_allow() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(NO_FALLBACK, dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::Http1);
    assert_eq!(
        routed(&client, addr, "PUT", "x", "/thing", &[]).await,
        "405 allow=GET, POST"
    );
    assert_eq!(
        routed(&client, addr, "GET", "x", "/nothing", &[]).await,
        "404"
    );
    assert_eq!(routed(&client, addr, "GET", "x", "/apix", &[]).await, "404");
    let body = client.get(addr, "x", "/nothing").await;
    assert_eq!(body.text(), "404 Not Found\n");
}

#[tokio::test]
async fn a_path_escaping_the_root_is_400() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(ROUTES, dir.path());
    let addr = running.addr("http");
    for target in ["/../x", "/%2e%2e/x", "/a/../../x"] {
        let head = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let reply = raw_exchange(addr, head.as_bytes(), Duration::from_secs(5)).await;
        assert!(reply.starts_with("HTTP/1.1 400"), "{target} -> {reply}");
    }
}

#[tokio::test]
async fn respond_sets_headers_and_head_has_no_body() {
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: a
    domains: ["*"]
    routes:
      - path: /
        respond: { status: 201, body: "hello\n", headers: { content-type: text/plain, x-served-by: scalws } }
"#;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(yaml, dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::Http1);
    let reply = client.get(addr, "x", "/").await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.text(), "hello\n");
    assert_eq!(reply.header("content-type"), Some("text/plain"));
    assert_eq!(reply.header("x-served-by"), Some("scalws"));
    assert_eq!(reply.header("content-length"), Some("6"));
    let head = client
        .send(
            addr,
            request("HEAD", "x", "/").body(Full::default()).unwrap(),
        )
        .await;
    assert_eq!(head.status, 201);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some("6"));
}

#[tokio::test]
async fn head_and_bodiless_statuses_never_carry_a_body_on_http2() {
    // hyper drops such bodies on HTTP/1.1 by itself; on HTTP/2 a DATA frame
    // after a HEAD or 304 response makes the client reset the stream.
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: a
    domains: [known.test]
    routes:
      - { match: { path: { exact: /only-post }, methods: [POST] }, respond: { body: posted } }
      - { path: /not-modified, respond: { status: 304, body: "must not be sent" } }
      - { path: /no-content, respond: { status: 204, body: "must not be sent" } }
      - { match: { path: { exact: / } }, respond: { body: "hello\n" } }
"#;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(yaml, dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::H2c);
    let head = |host: &'static str, path: &'static str| {
        client.send(
            addr,
            request("HEAD", host, path).body(Full::default()).unwrap(),
        )
    };
    let ok = head("known.test", "/").await;
    assert_eq!(
        (ok.status, ok.body.len(), ok.header("content-length")),
        (200, 0, Some("6"))
    );
    let missing = head("unknown.test", "/").await;
    assert_eq!((missing.status, missing.body.len()), (404, 0));
    assert_eq!(
        missing.header("content-length"),
        Some("14"),
        "the length a GET would have"
    );
    let wrong_method = head("known.test", "/only-post").await;
    assert_eq!(
        (wrong_method.status, wrong_method.header("allow")),
        (405, Some("POST"))
    );

    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        let not_modified = client.get(addr, "known.test", "/not-modified").await;
        assert_eq!(
            (not_modified.status, not_modified.body.len()),
            (304, 0),
            "{proto:?}"
        );
        let no_content = client.get(addr, "known.test", "/no-content").await;
        assert_eq!(
            (no_content.status, no_content.body.len()),
            (204, 0),
            "{proto:?}"
        );
        assert_eq!(no_content.header("content-length"), None);
    }
}
