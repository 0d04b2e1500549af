//! Route policies from YAML over real sockets, HTTP/1.1 and h2c: `redirect`,
//! `rewrite`, `request_headers` and `response_headers`, against a real upstream
//! on 127.0.0.1 that echoes what it received.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use test_support::upstream::{Upstream, refused_addr};
use test_support::{Proto, Reply, TestClient, request};

const PROTOS: [Proto; 2] = [Proto::Http1, Proto::H2c];

/// An upstream that answers with its request line and headers, one per line.
async fn echo() -> Upstream {
    test_support::upstream::echo(&[
        ("x-up-set", "old"),
        ("x-up-add", "a"),
        ("server", "upstream"),
    ])
    .await
}

fn request_line(reply: &Reply) -> &str {
    reply.text().lines().next().unwrap()
}

fn echoed<'a>(reply: &'a Reply, name: &str) -> Vec<&'a str> {
    let prefix = format!("{name}: ");
    reply
        .text()
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .collect()
}

#[tokio::test]
async fn redirects() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: site
    domains: ["*"]
    routes:
      - { path: /same, redirect: {} }
      - { path: /secure, redirect: { scheme: https } }
      - { path: /moved, redirect: { scheme: https, host: www.example.org, port: 8443, status: 301 } }
      - { path: /old, redirect: { prefix: /new, status: 308 } }
      - { path: /strip, redirect: { prefix: "" } }
      - { path: /fixed, redirect: { path: /landing, port: 80, status: 307 } }
      - match: { path: { exact: /login } }
        redirect: { host: auth.example.com, path: /sign-in, status: 303 }
"#;
    let running = support::start(yaml, dir.path());
    let addr = running.addr("http");
    let port = addr.port();
    let table = [
        (
            "/same/x?q=1",
            302,
            format!("http://example.com:{port}/same/x?q=1"),
        ),
        (
            "/secure/a?b=c",
            302,
            "https://example.com/secure/a?b=c".to_owned(),
        ),
        (
            "/moved/a",
            301,
            "https://www.example.org:8443/moved/a".to_owned(),
        ),
        (
            "/old/a/b?x",
            308,
            format!("http://example.com:{port}/new/a/b?x"),
        ),
        ("/old", 308, format!("http://example.com:{port}/new")),
        ("/old/", 308, format!("http://example.com:{port}/new/")),
        ("/strip/a", 302, format!("http://example.com:{port}/a")),
        ("/strip", 302, format!("http://example.com:{port}/")),
        (
            "/fixed/x?y=1",
            307,
            "http://example.com/landing?y=1".to_owned(),
        ),
        (
            "/login?next=%2F",
            303,
            format!("http://auth.example.com:{port}/sign-in?next=%2F"),
        ),
    ];
    for proto in PROTOS {
        let client = TestClient::new(proto);
        for (target, status, location) in &table {
            let reply = client.get(addr, "Example.com", target).await;
            assert_eq!(reply.status, *status, "{proto:?} {target}");
            assert_eq!(
                reply.header("location"),
                Some(location.as_str()),
                "{proto:?} {target}"
            );
            assert_eq!(
                reply.header("content-length"),
                Some("0"),
                "{proto:?} {target}"
            );
            assert!(reply.body.is_empty());
        }
    }
}

#[tokio::test]
async fn rewrites_seen_by_the_upstream() {
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
applications:
  - name: site
    domains: ["*"]
    routes:
      - {{ path: /foo, proxy: "{up}", rewrite: {{ prefix: /xyz }} }}
      - {{ path: /empty, proxy: "{up}", rewrite: {{ prefix: "" }} }}
      - {{ path: /slash/, proxy: "{up}", rewrite: {{ prefix: / }} }}
      - {{ path: /full, proxy: "{up}", rewrite: {{ path: /replaced }} }}
      - match: {{ path: {{ exact: /exact }} }}
        proxy: "{up}"
        rewrite: {{ path: /other }}
      - {{ path: /host, proxy: "{up}", rewrite: {{ host: "internal.example:9000" }} }}
      - {{ path: /, proxy: "{up}" }}
"#,
        up = upstream.addr
    );
    let running = support::start(&yaml, dir.path());
    let addr = running.addr("http");
    let table = [
        ("/foo/bar", "/xyz/bar"),
        ("/foo/bar?a=1", "/xyz/bar?a=1"),
        ("/foo", "/xyz"),
        ("/foo/", "/xyz/"),
        ("/empty/bar", "/bar"),
        ("/empty", "/"),
        ("/empty/", "/"),
        ("/slash/bar/", "/bar/"),
        ("/slash", "/"),
        ("/full/a/b?q", "/replaced?q"),
        ("/exact?z=9", "/other?z=9"),
        ("/foobar", "/foobar"),
    ];
    for proto in PROTOS {
        let client = TestClient::new(proto);
        for (target, want) in table {
            let reply = client.get(addr, "app.example.com", target).await;
            assert_eq!(reply.status, 200, "{proto:?} {target}");
            assert_eq!(
                request_line(&reply),
                format!("GET {want}"),
                "{proto:?} {target}"
            );
            assert_eq!(echoed(&reply, "host"), ["app.example.com"], "{proto:?}");
        }
        let reply = client.get(addr, "app.example.com", "/host/x").await;
        assert_eq!(request_line(&reply), "GET /host/x");
        assert_eq!(
            echoed(&reply, "host"),
            ["internal.example:9000"],
            "{proto:?}"
        );
    }
}

#[tokio::test]
async fn rewrite_before_static() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("public/v2")).unwrap();
    std::fs::write(dir.path().join("public/app.css"), "body{}").unwrap();
    std::fs::write(dir.path().join("public/v2/app.css"), "v2{}").unwrap();
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: site
    domains: ["*"]
    routes:
      - { path: /assets, static: { root: public }, rewrite: { prefix: / } }
      - { path: /next, static: { root: public }, rewrite: { prefix: /v2 } }
      - { path: /plain, static: { root: public } }
"#;
    let running = support::start(yaml, dir.path());
    let addr = running.addr("http");
    for proto in PROTOS {
        let client = TestClient::new(proto);
        for (target, body) in [
            ("/assets/app.css", "body{}"),
            ("/next/app.css", "v2{}"),
            ("/plain/app.css", "body{}"),
        ] {
            let reply = client.get(addr, "x.test", target).await;
            assert_eq!(
                (reply.status, reply.text()),
                (200, body),
                "{proto:?} {target}"
            );
        }
    }
}

#[tokio::test]
async fn header_modifiers_on_request_and_response() {
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
applications:
  - name: site
    domains: ["*"]
    routes:
      - path: /down
        proxy: "{down}"
        response_headers: {{ set: {{ x-policy: "yes" }} }}
      - path: /fixed
        respond: {{ body: hi }}
        response_headers: {{ add: {{ x-policy: "yes" }}, remove: [Content-Type] }}
      - path: /
        proxy: "{up}"
        request_headers:
          set: {{ X-Set: new }}
          add: {{ X-Add: "2", x-fresh: fresh }}
          remove: [X-REMOVE]
        response_headers:
          set: {{ X-UP-SET: new }}
          add: {{ x-up-add: b }}
          remove: [Server]
"#,
        up = upstream.addr,
        down = refused_addr(),
    );
    let running = support::start(&yaml, dir.path());
    let addr = running.addr("http");
    for proto in PROTOS {
        let client = TestClient::new(proto);
        let builder = request("GET", "app.example.com", "/x")
            .header("x-set", "old")
            .header("x-add", "1")
            .header("x-remove", "gone")
            .header("x-other", "kept");
        let reply = client
            .send(addr, builder.body(Default::default()).unwrap())
            .await;
        assert_eq!(reply.status, 200, "{proto:?}");
        assert_eq!(
            echoed(&reply, "x-set"),
            ["new"],
            "{proto:?}: {}",
            reply.text()
        );
        assert_eq!(echoed(&reply, "x-add"), ["1,2"], "{proto:?}");
        assert_eq!(echoed(&reply, "x-fresh"), ["fresh"], "{proto:?}");
        assert!(echoed(&reply, "x-remove").is_empty(), "{proto:?}");
        assert_eq!(echoed(&reply, "x-other"), ["kept"], "{proto:?}");
        assert_eq!(reply.header("x-up-set"), Some("new"), "{proto:?}");
        assert_eq!(reply.header("x-up-add"), Some("a,b"), "{proto:?}");
        assert_eq!(reply.header("server"), None, "{proto:?}");

        let reply = client.get(addr, "app.example.com", "/down").await;
        assert_eq!(reply.status, 502, "{proto:?}");
        assert_eq!(reply.header("x-policy"), Some("yes"), "{proto:?}");

        let reply = client.get(addr, "app.example.com", "/fixed").await;
        assert_eq!((reply.status, reply.text()), (200, "hi"), "{proto:?}");
        assert_eq!(reply.header("x-policy"), Some("yes"), "{proto:?}");
        assert_eq!(reply.header("content-type"), None, "{proto:?}");
    }
}
