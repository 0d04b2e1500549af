//! HTTPS, HTTP/2 over TLS and HTTP/3 listeners from YAML, over real sockets:
//! the same answers as plain HTTP, SNI, 421, https_redirect, Alt-Svc.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Full};
use test_support::tls::{TestCa, h3, https};
use test_support::upstream::{Upstream, ok};
use test_support::{Proto, TestClient, request};

/// A port free for both TCP and UDP on 127.0.0.1.
fn free_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

struct Site {
    ca: TestCa,
    running: support::Running,
    https_port: u16,
    _dir: tempfile::TempDir,
    _upstream: Upstream,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test", "*.a.test"], false);
    ca.issue(dir.path(), "b", &["b.test"], false);
    std::fs::create_dir(dir.path().join("public")).unwrap();
    std::fs::write(dir.path().join("public/file.txt"), "0123456789abcdef").unwrap();
    let upstream = futures_block_on_upstream();
    let https_port = free_port();
    let yaml = format!(
        r#"
listeners:
  - {{ name: http, address: "127.0.0.1:0" }}
  - name: https
    address: "127.0.0.1:{https_port}"
    protocol: https
    tls: {{ certificates: [ {{ cert: a.pem, key: a.key }}, {{ cert: b.pem, key: b.key }} ] }}
  - name: h3
    address: "127.0.0.1:{https_port}"
    protocol: http3
    tls: {{ certificates: [ {{ cert: a.pem, key: a.key }}, {{ cert: b.pem, key: b.key }} ] }}
upstreams:
  echo: {{ addresses: ["{upstream}"] }}
applications:
  - name: a
    domains: [a.test, "*.a.test"]
    routes:
      - {{ path: /respond, respond: {{ body: "hello from a\n" }} }}
      - {{ path: /files, static: {{ root: ./public }} }}
      - {{ path: /proxy, proxy: echo }}
      - {{ path: /secure, respond: {{ body: "secure\n" }}, https_redirect: true }}
  - name: b
    domains: [b.test]
    https_redirect: true
    routes:
      - {{ path: /, respond: {{ body: "hello from b\n" }} }}
"#,
        upstream = upstream.addr
    );
    let running = support::start(&yaml, dir.path());
    Site {
        ca,
        running,
        https_port,
        _dir: dir,
        _upstream: upstream,
    }
}

/// The echo upstream, started on the current runtime.
fn futures_block_on_upstream() -> Upstream {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(Upstream::start(|req| async move {
            let method = req.method().clone();
            let proto = req
                .headers()
                .get("x-forwarded-proto")
                .map(|v| v.to_str().unwrap_or("").to_owned());
            let body = req.into_body().collect().await.unwrap().to_bytes();
            ok(format!(
                "{method} {} bytes proto={}",
                body.len(),
                proto.unwrap_or_default()
            ))
        }))
    })
}

fn get(host: &str, path: &str) -> http::Request<Full<Bytes>> {
    request("GET", host, path).body(Full::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_h2_over_tls_and_http3_answer_like_plain_http() {
    let site = site();
    let https_addr = site.running.addr("https");
    let h3_addr = site.running.addr("h3");
    let plain = TestClient::new(Proto::Http1);
    for path in ["/respond", "/files/file.txt", "/proxy"] {
        let expected = plain.get(site.running.addr("http"), "a.test", path).await;
        assert_eq!(expected.status, 200, "{path}");
        for h2 in [false, true] {
            let config = site
                .ca
                .client_config(&[if h2 { b"h2" as &[u8] } else { b"http/1.1" }]);
            let got = https(config, https_addr, "a.test", h2, get("a.test", path))
                .await
                .reply;
            assert_eq!(got.status, 200, "{path} h2={h2}");
            let want = expected.text().replace("proto=http", "proto=https");
            assert_eq!(got.text(), want, "{path} h2={h2}");
            assert_eq!(
                got.version,
                if h2 {
                    http::Version::HTTP_2
                } else {
                    http::Version::HTTP_11
                }
            );
            assert_eq!(
                got.header("alt-svc"),
                Some(format!("h3=\":{}\"; ma=86400", site.https_port).as_str())
            );
        }
        let request = http::Request::builder()
            .method(Method::GET)
            .uri(format!("https://a.test{path}"))
            .body(())
            .unwrap();
        let got = h3(&site.ca, h3_addr, "a.test", request, None).await;
        assert_eq!(got.status, 200, "h3 {path}");
        assert_eq!(
            got.text(),
            expected.text().replace("proto=http", "proto=https"),
            "h3 {path}"
        );
    }

    // Static with Range over HTTP/3.
    let ranged = http::Request::builder()
        .uri("https://a.test/files/file.txt")
        .header("range", "bytes=4-7")
        .body(())
        .unwrap();
    let got = h3(&site.ca, h3_addr, "a.test", ranged, None).await;
    assert_eq!((got.status, got.text()), (206, "4567"));

    // A POST body streams up through HTTP/3 to the upstream.
    let post = http::Request::builder()
        .method(Method::POST)
        .uri("https://a.test/proxy")
        .body(())
        .unwrap();
    let got = h3(
        &site.ca,
        h3_addr,
        "a.test",
        post,
        Some(Bytes::from(vec![1u8; 1 << 20])),
    )
    .await;
    assert_eq!(got.text(), "POST 1048576 bytes proto=https");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_chooses_the_certificate_and_a_host_it_does_not_cover_is_421() {
    let site = site();
    let addr = site.running.addr("https");
    let config = || site.ca.client_config(&[b"http/1.1"]);
    let a = https(
        config(),
        addr,
        "x.a.test",
        false,
        get("x.a.test", "/respond"),
    )
    .await;
    assert_eq!(a.reply.text(), "hello from a\n");
    let b = https(config(), addr, "b.test", false, get("b.test", "/")).await;
    assert_eq!(b.reply.text(), "hello from b\n");
    assert_ne!(a.peer_certificate, b.peer_certificate);
    // A connection made for a.test asking for b.test (an application, but not
    // a name of the certificate served): 421.
    let misdirected = https(config(), addr, "a.test", false, get("b.test", "/")).await;
    assert_eq!(misdirected.reply.status, 421);
    let misdirected = https(
        site.ca.client_config(&[b"h2"]),
        addr,
        "a.test",
        true,
        get("b.test", "/"),
    )
    .await;
    assert_eq!(misdirected.reply.status, 421);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_redirect_for_an_application_and_a_route_keeps_the_query() {
    let site = site();
    let plain = TestClient::new(Proto::Http1);
    let http_addr = site.running.addr("http");
    let app = plain
        .get(http_addr, "b.test:8080", "/some/path?x=1&y=2")
        .await;
    assert_eq!(app.status, 308);
    assert_eq!(
        app.header("location"),
        Some(format!("https://b.test:{}/some/path?x=1&y=2", site.https_port).as_str())
    );
    let route = plain.get(http_addr, "a.test", "/secure?q=1").await;
    assert_eq!(route.status, 308);
    assert_eq!(
        route.header("location"),
        Some(format!("https://a.test:{}/secure?q=1", site.https_port).as_str())
    );
    // Other routes of that application are not redirected.
    assert_eq!(plain.get(http_addr, "a.test", "/respond").await.status, 200);
    // No redirect on the https listener.
    let config = site.ca.client_config(&[b"http/1.1"]);
    let secure = https(
        config,
        site.running.addr("https"),
        "a.test",
        false,
        get("a.test", "/secure?q=1"),
    )
    .await;
    assert_eq!(
        (secure.reply.status, secure.reply.text()),
        (200, "secure\n")
    );
}

#[tokio::test]
async fn https_redirect_leaves_out_port_443() {
    // Only the configuration is needed: 443 cannot be bound in a test, so
    // the gateway is called directly with a plain-HTTP ConnInfo.
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    let yaml = r#"
listeners:
  - { name: http, address: "127.0.0.1:80" }
  - name: https
    address: "127.0.0.1:443"
    protocol: https
    tls: { certificates: [ { cert: a.pem, key: a.key } ] }
applications:
  - { name: a, domains: [a.test], https_redirect: true, routes: [{ path: /, respond: {} }] }
"#;
    let config = scalwsd::config::load("t.yaml", yaml, dir.path()).unwrap();
    let conn = scalws_core::ConnInfo::new(
        "http".into(),
        scalws_core::Scheme::Http,
        "127.0.0.1:5000".parse().unwrap(),
        "127.0.0.1:80".parse().unwrap(),
        None,
    );
    let mut request = http::Request::builder()
        .uri("/p?q=1")
        .header("host", "a.test")
        .body(scalws_core::Body::empty())
        .unwrap();
    request.extensions_mut().insert(conn);
    let response = tower::ServiceExt::oneshot(config.gateway, request)
        .await
        .unwrap();
    assert_eq!(response.status(), 308);
    assert_eq!(response.headers()["location"], "https://a.test/p?q=1");
}

#[test]
fn tls_listener_errors_point_at_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    ca.issue(dir.path(), "b", &["b.test"], false);
    let yaml = |cert: &str, key: &str| {
        format!(
            "listeners:\n  - name: https\n    address: 127.0.0.1:0\n    protocol: https\n    tls:\n      certificates:\n        - {{ cert: {cert}, key: {key} }}\n"
        )
    };
    let errors = |yaml: String| {
        scalwsd::config::load("t.yaml", &yaml, dir.path())
            .unwrap_err()
            .to_string()
            .replace(&dir.path().display().to_string(), "DIR")
    };
    assert_eq!(
        errors(yaml("a.pem", "b.key")),
        "t.yaml:7:11: listeners[0].tls.certificates[0]: certificate DIR/a.pem: does not match key DIR/b.key"
    );
    let missing = errors(yaml("missing.pem", "a.key"));
    assert!(missing.starts_with("t.yaml:7:11: listeners[0].tls.certificates[0]: certificate DIR/missing.pem: cannot read"), "{missing}");
    assert_eq!(
        errors(
            "listeners:\n  - { name: https, address: 127.0.0.1:0, protocol: https }\n".to_owned()
        ),
        "t.yaml:2:52: listeners[0].tls: protocol https needs tls.certificates"
    );
    assert_eq!(
        errors(format!(
            "{}      unknown_sni: refused\n",
            yaml("a.pem", "a.key")
        )),
        "t.yaml:8:20: listeners[0].tls.unknown_sni: unknown unknown_sni \"refused\" (did you mean \"refuse\"?); expected refuse or default"
    );
}

#[test]
fn an_expired_certificate_is_logged_at_start_and_still_served() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "old", &["old.test"], true);
    let port = free_port();
    std::fs::write(
        dir.path().join("scalws.yaml"),
        format!(
            "listeners:\n  - name: https\n    address: 127.0.0.1:{port}\n    protocol: https\n    tls: {{ certificates: [ {{ cert: old.pem, key: old.key }} ] }}\napplications:\n  - {{ name: a, domains: ['*'], routes: [{{ path: /, respond: {{ body: still-served }} }}] }}\n"
        ),
    )
    .unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_scalwsd"))
        .arg("--check")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&check.stderr).contains("expired"),
        "{check:?}"
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_scalwsd"))
        .args(["--workers", "1"])
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let reply = runtime.block_on(async {
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let config = test_support::tls::insecure_client_config(&[b"http/1.1"]);
        https(
            config,
            ([127, 0, 0, 1], port).into(),
            "old.test",
            false,
            get("old.test", "/"),
        )
        .await
        .reply
    });
    assert_eq!((reply.status, reply.text()), (200, "still-served"));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(logs.contains("ERROR") && logs.contains("expired"), "{logs}");
}
