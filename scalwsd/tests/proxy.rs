//! The `proxy` and `backends` actions through scalwsd, against real upstream
//! servers on 127.0.0.1 started by each test.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::Response;
use http_body_util::{BodyExt, Full, StreamBody};
use test_support::upstream::{Upstream, UpstreamBody, ok, refused_addr};
use test_support::{Proto, TestClient, raw_exchange, read_until_close, request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn proxy_to(upstream: &str, extra_route: &str) -> String {
    format!(
        r#"
limits: {{ max_request_body: 1MiB }}
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app:
    addresses: [{upstream}]
    request_timeout: 2s
applications:
  - name: site
    domains: ["*"]
    routes:
{extra_route}
      - {{ path: /, proxy: app }}
"#
    )
}

/// One listener whose every request goes to the upstream `app`, given as
/// its YAML mapping (`{ addresses: [...], ... }`).
fn everything_to(app: &str) -> String {
    format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app: {app}
applications:
  - name: site
    domains: ["*"]
    routes:
      - {{ path: /, proxy: app }}
"#
    )
}

/// An upstream that answers with the request line and headers it received,
/// one per line, and sends hop-by-hop headers the proxy must remove.
async fn echo_headers() -> Upstream {
    test_support::upstream::echo(&[
        ("connection", "x-upstream-hop"),
        ("x-upstream-hop", "1"),
        ("keep-alive", "timeout=5"),
        ("x-end-to-end", "kept"),
    ])
    .await
}

#[tokio::test]
async fn headers_are_cleaned_and_forwarding_headers_set_both_protocols() {
    let upstream = echo_headers().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream.addr.to_string(), ""), dir.path());
    let addr = running.addr("http");
    for proto in [Proto::Http1, Proto::H2c] {
        let mut builder = request("GET", "app.example.com", "/x/y?q=1")
            .header("x-forwarded-for", "10.0.0.1")
            .header("x-forwarded-proto", "https")
            .header("x-client", "yes");
        if proto == Proto::Http1 {
            builder = builder
                .header("connection", "keep-alive, x-client-hop")
                .header("x-client-hop", "secret")
                .header("keep-alive", "timeout=5")
                .header("te", "gzip")
                .header("proxy-connection", "keep-alive");
        }
        let reply = TestClient::new(proto)
            .send(addr, builder.body(Full::default()).unwrap())
            .await;
        assert_eq!(reply.status, 200, "{proto:?}");
        let seen = reply.text();
        let lines: Vec<&str> = seen.lines().collect();
        assert_eq!(lines[0], "GET /x/y?q=1", "{proto:?}");
        let header = |name: &str| -> Vec<&str> {
            lines[1..]
                .iter()
                .filter_map(|l| l.strip_prefix(&format!("{name}: ")))
                .collect()
        };
        assert_eq!(header("host"), ["app.example.com"], "{proto:?}: {seen}");
        assert_eq!(header("x-forwarded-for"), ["10.0.0.1, 127.0.0.1"], "{seen}");
        assert_eq!(header("x-forwarded-proto"), ["http"], "{seen}");
        assert_eq!(header("x-forwarded-host"), ["app.example.com"], "{seen}");
        assert_eq!(header("x-client"), ["yes"]);
        for hop in [
            "x-client-hop",
            "keep-alive",
            "te",
            "proxy-connection",
            "via",
        ] {
            assert!(
                header(hop).is_empty(),
                "{proto:?}: {hop} reached the upstream: {seen}"
            );
        }
        // And on the way back.
        assert_eq!(reply.header("x-end-to-end"), Some("kept"));
        assert_eq!(reply.header("x-upstream-hop"), None);
        assert_eq!(reply.header("keep-alive"), None);
    }
}

/// `X-Forwarded-For` on several lines becomes one line, the client's
/// values joined and its address last, whatever the upstream speaks (an
/// `http1` upstream's head gets the fields as it is written, an `http2`
/// one's through the header map). Three lines made a 500 before: http's
/// `insert_mult` panics on them.
#[tokio::test]
async fn several_forwarded_for_lines_become_one_for_either_upstream_protocol() {
    let upstream = echo_headers().await;
    let dir = tempfile::tempdir().unwrap();
    for protocol in ["http1", "http2"] {
        let app = format!(
            r#"{{ addresses: ["{}"], protocol: {protocol} }}"#,
            upstream.addr
        );
        let running = support::start(&everything_to(&app), dir.path());
        let builder = request("GET", "app.example.com", "/")
            .header("x-forwarded-for", "10.0.0.1")
            .header("x-forwarded-for", "10.0.0.2, 10.0.0.3")
            .header("x-forwarded-for", "10.0.0.4")
            .header("x-forwarded-host", "evil.example")
            .header("x-forwarded-proto", "https");
        let reply = TestClient::new(Proto::Http1)
            .send(running.addr("http"), builder.body(Full::default()).unwrap())
            .await;
        assert_eq!(reply.status, 200, "{protocol}");
        let seen = reply.text();
        let header = |name: &str| -> Vec<&str> {
            seen.lines()
                .filter_map(|l| l.strip_prefix(&format!("{name}: ")))
                .collect()
        };
        assert_eq!(
            header("x-forwarded-for"),
            ["10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 127.0.0.1"],
            "{protocol}: {seen}"
        );
        assert_eq!(
            header("x-forwarded-host"),
            ["app.example.com"],
            "{protocol}: {seen}"
        );
        assert_eq!(header("x-forwarded-proto"), ["http"], "{protocol}: {seen}");
    }
}

/// A balancer that hashes `X-Forwarded-For` hashes it as the upstream gets
/// it: a client that sent none is keyed by its own address, so all its
/// requests go to one upstream (not round robin, as for a missing header).
#[tokio::test]
async fn header_hash_on_forwarded_for_sees_the_proxy_s_value() {
    let first = Upstream::start(|_| async { ok("first") }).await;
    let second = Upstream::start(|_| async { ok("second") }).await;
    let dir = tempfile::tempdir().unwrap();
    let app = format!(
        r#"{{ addresses: ["{}", "{}"], balance: header_hash, hash_header: x-forwarded-for }}"#,
        first.addr, second.addr
    );
    let running = support::start(&everything_to(&app), dir.path());
    let client = TestClient::new(Proto::Http1);
    let mut answers = Vec::new();
    for _ in 0..6 {
        let builder = request("GET", "app.example.com", "/");
        let reply = client
            .send(running.addr("http"), builder.body(Full::default()).unwrap())
            .await;
        assert_eq!(reply.status, 200);
        answers.push(reply.text().to_owned());
    }
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
}

#[tokio::test]
async fn request_body_streams_up_and_an_unread_body_does_not_leak_into_the_next_request() {
    let upstream = Upstream::start(|req| async move {
        if req.uri().path() == "/ignore" {
            return ok("ignored");
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        ok(format!("got {} bytes", body.len()))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream.addr.to_string(), ""), dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::H2c);
    let reply = client
        .send(
            addr,
            request("POST", "x", "/upload")
                .body(Full::new(Bytes::from(vec![7u8; 300_000])))
                .unwrap(),
        )
        .await;
    assert_eq!(reply.text(), "got 300000 bytes");
    let too_big = client
        .send(
            addr,
            request("POST", "x", "/upload")
                .body(Full::new(Bytes::from(vec![7u8; 2 << 20])))
                .unwrap(),
        )
        .await;
    assert_eq!(too_big.status, 413);

    // A body the upstream never reads, then a second request on the same connection.
    let body = "z".repeat(50_000);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let first = format!(
        "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(first.as_bytes()).await.unwrap();
    stream
        .write_all(b"GET /second HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let replies = read_until_close(&mut stream, Duration::from_secs(5)).await;
    assert!(replies.starts_with("HTTP/1.1 200"), "{replies}");
    assert!(replies.contains("ignored"), "{replies}");
    // Either the connection was closed after the first answer, or the second
    // request was answered as itself; never a request made of body bytes.
    assert!(!replies.contains("400"), "{replies}");
}

#[tokio::test]
async fn slow_upstream_gets_504_at_request_timeout_and_route_timeout() {
    let upstream = Upstream::start(|req| async move {
        let wait = if req.uri().path() == "/slow" {
            5_000
        } else {
            800
        };
        tokio::time::sleep(Duration::from_millis(wait)).await;
        ok("late")
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let route = "      - { path: /route-timeout, proxy: app, timeout: 300ms }";
    let running = support::start(&proxy_to(&upstream.addr.to_string(), route), dir.path());
    let addr = running.addr("http");
    let client = TestClient::new(Proto::Http1);

    let started = Instant::now();
    let reply = client.get(addr, "x", "/slow").await;
    let waited = started.elapsed();
    assert_eq!(reply.status, 504);
    assert!(
        waited >= Duration::from_millis(1_900) && waited < Duration::from_millis(3_000),
        "{waited:?}"
    );

    let started = Instant::now();
    let reply = client.get(addr, "x", "/route-timeout").await;
    let waited = started.elapsed();
    assert_eq!(reply.status, 504);
    assert!(
        waited >= Duration::from_millis(280) && waited < Duration::from_millis(750),
        "{waited:?}"
    );
}

#[tokio::test]
async fn nothing_to_connect_to_is_502_quickly() {
    let dead = refused_addr();
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&dead.to_string(), ""), dir.path());
    let started = Instant::now();
    let reply = TestClient::new(Proto::Http1)
        .get(running.addr("http"), "x", "/")
        .await;
    assert_eq!(reply.status, 502);
    assert_eq!(reply.text(), "502 Bad Gateway\n");
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// A stream of `total` bytes in 64 KiB chunks, counting what was produced.
fn counted_stream(total: u64, produced: Arc<AtomicU64>) -> UpstreamBody {
    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
    let stream = futures_util::stream::unfold(0u64, move |sent| {
        let chunk = chunk.clone();
        let produced = produced.clone();
        async move {
            if sent >= total {
                return None;
            }
            let n = (total - sent).min(chunk.len() as u64);
            produced.fetch_add(n, Ordering::SeqCst);
            Some((
                Ok::<_, std::io::Error>(hyper::body::Frame::data(chunk.slice(..n as usize))),
                sent + n,
            ))
        }
    });
    BodyExt::boxed(StreamBody::new(stream))
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_100_mib_response_streams_without_growing_memory_and_slow_readers_apply_backpressure() {
    const TOTAL: u64 = 100 << 20;
    let produced = Arc::new(AtomicU64::new(0));
    let counter = produced.clone();
    let upstream = Upstream::start(move |_req| {
        let produced = counter.clone();
        async move { Response::new(counted_stream(TOTAL, produced)) }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream.addr.to_string(), ""), dir.path());
    let addr = running.addr("http");

    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    // Read the head and about 1 MiB, then stop reading for a while.
    let mut read = 0u64;
    while read < 1 << 20 {
        read += stream.read(&mut buf).await.unwrap() as u64;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let ahead = produced.load(Ordering::SeqCst) - read;
    assert!(
        ahead < 16 << 20,
        "the proxy buffered {} MiB for a client that stopped reading",
        ahead >> 20
    );

    let rss_before = rss_kib();
    loop {
        match stream.read(&mut buf).await.unwrap() {
            0 => break,
            n => read += n as u64,
        }
    }
    let growth = rss_kib().saturating_sub(rss_before);
    assert!(read > TOTAL, "read {read} bytes");
    assert!(growth < 16 * 1024, "RSS grew by {growth} KiB");
}

#[tokio::test]
async fn an_upstream_reset_mid_body_aborts_the_client_response() {
    // A raw upstream that promises 1000 bytes, sends 10, then closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = vec![0u8; 4096];
            let _ = socket.read(&mut head).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
                .await;
            drop(socket);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream_addr.to_string(), ""), dir.path());
    let reply = raw_exchange(
        running.addr("http"),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("content-length: 1000"), "{reply}");
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("");
    assert_eq!(
        body, "0123456789",
        "the client must see a short, aborted body, never a complete one"
    );
}

#[tokio::test]
async fn garbage_from_the_upstream_is_502() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let _ = socket.write_all(b"NOT HTTP AT ALL\r\n\r\n").await;
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream_addr.to_string(), ""), dir.path());
    let reply = TestClient::new(Proto::Http1)
        .get(running.addr("http"), "x", "/")
        .await;
    assert_eq!(reply.status, 502);
}

#[tokio::test]
async fn weighted_split_with_a_status_share() {
    let a = Upstream::named("a").await;
    let yaml = format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  a: {{ addresses: ["{}"] }}
applications:
  - name: split
    domains: ["*"]
    routes:
      - path: /
        backends:
          - {{ proxy: a, weight: 90 }}
          - {{ status: 503, weight: 10 }}
          - {{ status: 418, weight: 0 }}
"#,
        a.addr
    );
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml, dir.path());
    let addr = running.addr("http");
    let mut ok_count = 0;
    let mut unavailable = 0;
    let sender = test_support::h2_connection(addr).await;
    for _ in 0..1_000 {
        let mut sender = sender.clone();
        let req = request("GET", "x", "/")
            .version(http::Version::HTTP_2)
            .body(Full::default())
            .unwrap();
        let response = sender.send_request(req).await.unwrap();
        match response.status().as_u16() {
            200 => ok_count += 1,
            503 => {
                unavailable += 1;
                let body = response.into_body().collect().await.unwrap().to_bytes();
                assert!(body.is_empty());
            }
            other => panic!("unexpected status {other}"),
        }
    }
    // A smooth round robin: exactly 90 of every 100 requests.
    assert_eq!(ok_count, 900, "{ok_count} of 1000 went to the proxy share");
    assert_eq!(ok_count + unavailable, 1_000);
    assert_eq!(a.hits(), ok_count);
}

#[tokio::test]
async fn all_zero_weights_answer_500() {
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: split
    domains: ["*"]
    routes:
      - { path: /, backends: [{ status: 200, weight: 0 }] }
"#;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(yaml, dir.path());
    assert_eq!(
        TestClient::new(Proto::Http1)
            .get(running.addr("http"), "x", "/")
            .await
            .status,
        500
    );
}

#[tokio::test]
async fn websocket_upgrade_echo_and_close_through_the_proxy() {
    let upstream = test_support::upstream::websocket_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream.to_string(), ""), dir.path());
    let stream = TcpStream::connect(running.addr("http")).await.unwrap();
    let (mut ws, response) =
        tokio_tungstenite::client_async("ws://chat.example.com/socket", stream)
            .await
            .unwrap();
    assert_eq!(response.status(), 101);
    use tokio_tungstenite::tungstenite::Message;
    ws.send(Message::text("hello through scalws"))
        .await
        .unwrap();
    let echoed = ws.next().await.unwrap().unwrap();
    assert_eq!(echoed, Message::text("hello through scalws"));
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        Message::binary(vec![1u8, 2, 3])
    );
    ws.close(None).await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_answers_200_to_an_upgrade_does_not_become_a_tunnel() {
    let upstream = Upstream::named("plain").await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream.addr.to_string(), ""), dir.path());
    let mut stream = TcpStream::connect(running.addr("http")).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Still HTTP: a second request on the same connection gets its own answer.
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let replies = read_until_close(&mut stream, Duration::from_secs(5)).await;
    assert_eq!(replies.matches("HTTP/1.1 200").count(), 2, "{replies}");
    assert!(
        !replies.to_ascii_lowercase().contains("upgrade: websocket"),
        "{replies}"
    );
}

#[tokio::test]
async fn a_dead_address_is_retried_then_ejected_with_health_settings_from_yaml() {
    let alive = Upstream::named("alive").await;
    let dead = refused_addr();
    let yaml = format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app:
    addresses: ["{dead}", "{alive}"]
    retries: 1
    connect_timeout: 500ms
    passive: {{ failures: 1, cooldown: 30s }}
    health_check: {{ path: /healthz, interval: 100ms, timeout: 200ms, unhealthy_after: 1, healthy_after: 1 }}
applications:
  - {{ name: a, domains: ["*"], routes: [{{ path: /, proxy: app }}] }}
"#,
        alive = alive.addr
    );
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml, dir.path());
    let client = TestClient::new(Proto::Http1);
    for _ in 0..20 {
        let reply = client.get(running.addr("http"), "x", "/").await;
        assert_eq!((reply.status, reply.text()), (200, "alive"));
    }
    // Health checks run too: the live address has been probed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        alive.hits() > 20,
        "{} requests reached the live upstream",
        alive.hits()
    );
}

#[test]
fn https_upstream_settings_are_checked_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = |ca: &str| {
        format!(
            "listeners: [{{ name: http, address: \"127.0.0.1:0\" }}]\nupstreams:\n  secure:\n    addresses: [\"127.0.0.1:9443\"]\n    protocol: https\n    tls: {{ sni: api.internal, ca: {ca} }}\napplications:\n  - {{ name: a, domains: [\"*\"], routes: [{{ path: /, proxy: secure }}] }}\n"
        )
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let errors = runtime
        .block_on(async { scalwsd::config::load("up.yaml", &yaml("missing.pem"), dir.path()) })
        .unwrap_err()
        .to_string();
    assert!(
        errors.starts_with("up.yaml:6:35: upstreams.secure.tls.ca: cannot read "),
        "{errors}"
    );
    assert!(
        errors.ends_with("missing.pem: No such file or directory (os error 2)"),
        "{errors}"
    );

    let cert = rcgen::generate_simple_self_signed(vec!["api.internal".to_owned()]).unwrap();
    std::fs::write(dir.path().join("ca.pem"), cert.cert.pem()).unwrap();
    runtime
        .block_on(async { scalwsd::config::load("up.yaml", &yaml("ca.pem"), dir.path()) })
        .unwrap();
}

#[tokio::test]
async fn connect_is_not_forwarded() {
    let upstream = Upstream::named("origin").await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_to(&upstream.addr.to_string(), ""), dir.path());
    let reply = raw_exchange(
        running.addr("http"),
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    // An authority-form target has no path to route by: 400, as for any bad path.
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert_eq!(upstream.hits(), 0, "the upstream never saw it");
}
