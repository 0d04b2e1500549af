//! The admin listener, metrics, the access log and signals, against the real
//! `scalwsd` binary: what an operator scrapes, purges, rotates and stops.
#![allow(clippy::unwrap_used, missing_docs)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use http_body_util::Full;
use test_support::upstream::{Upstream, ok};
use test_support::{Proto, Reply, TestClient, closed_within, request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;

use support::process::{Scalwsd, free_addrs};

/// `method path` with `host`, on a new connection that the request closes.
async fn send(addr: SocketAddr, method: &str, host: &str, path: &str) -> Reply {
    TestClient::new(Proto::Http1)
        .send(
            addr,
            request(method, host, path)
                .header("connection", "close")
                .body(Full::default())
                .unwrap(),
        )
        .await
}

async fn get(addr: SocketAddr, host: &str, path: &str) -> Reply {
    send(addr, "GET", host, path).await
}

async fn admin(addr: SocketAddr, method: &str, path: &str) -> Reply {
    send(addr, method, "127.0.0.1", path).await
}

/// Polls `GET /metrics` until every line of `expected` is in it, for up to
/// `wait`; fails with the missing lines and the last body.
async fn metrics_until(admin_addr: SocketAddr, expected: &[String], wait: Duration) -> String {
    let deadline = Instant::now() + wait;
    loop {
        let reply = admin(admin_addr, "GET", "/metrics").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let body = reply.text().to_owned();
        let missing: Vec<&String> = expected
            .iter()
            .filter(|line| !body.lines().any(|l| l == line.as_str()))
            .collect();
        if missing.is_empty() {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "missing from /metrics:\n{}\n--- /metrics ---\n{body}",
            missing
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Every histogram's buckets never decrease, end with `le="+Inf"`, and that
/// last bucket equals `_count`.
fn assert_histograms_are_cumulative(body: &str) {
    let mut checked = 0;
    for count_line in body.lines().filter(|l| l.contains("_count{")) {
        let (series, count) = count_line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once("_count{").unwrap();
        let prefix = format!("{name}_bucket{{le=");
        let suffix = format!(",{labels}");
        let buckets: Vec<(&str, u64)> = body
            .lines()
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let le = series.strip_prefix(&prefix)?.strip_suffix(&suffix)?;
                Some((le, value.parse().unwrap()))
            })
            .collect();
        assert!(!buckets.is_empty(), "no buckets for {count_line}:\n{body}");
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "buckets of {series} decrease: {buckets:?}\n{body}"
        );
        assert_eq!(
            buckets.last().copied(),
            Some(("\"+Inf\"", count.parse().unwrap())),
            "the last bucket of {series} must be le=\"+Inf\" and equal _count\n{body}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no histogram in:\n{body}");
}

/// Opens a connection, sends one keep-alive GET on it, reads the whole
/// response, and hands the still-open connection back with the response.
async fn keepalive_get(addr: SocketAddr, host: &str, path: &str) -> (TcpStream, u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream))
        .await
        .expect("no response on the keep-alive connection");
    (stream, status, body)
}

/// Reads one HTTP/1.1 response with a `Content-Length` body.
async fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed mid-response: {data:?}");
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no content-length: {head}"));
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed mid-body");
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..head_end + length]).into_owned();
    (status, body)
}

/// An upstream whose responses may be cached for a minute.
async fn cacheable_upstream() -> Upstream {
    Upstream::start(|req| async move {
        let mut response = ok(format!("cached {}", req.uri().path()));
        response
            .headers_mut()
            .insert("cache-control", "max-age=60".parse().unwrap());
        response
    })
    .await
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Polls until `path` holds at least `count` lines (10 s at most) and returns them.
async fn lines_when(path: &Path, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {} line(s), expected {count}:\n{text}",
            path.display(),
            lines.len()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_exactly_what_was_sent() {
    let backend = Upstream::named("backend").await;
    let origin = cacheable_upstream().await;
    let [http, admin_addr] = free_addrs();
    let yaml = format!(
        r#"admin: {admin_addr}
listeners: [{{ name: http, address: "{http}" }}]
upstreams:
  backend: {{ addresses: ["{backend}"] }}
  origin: {{ addresses: ["{origin}"] }}
applications:
  - name: app
    domains: [app.test]
    routes:
      - {{ path: /ok, respond: {{ status: 200, body: "ok\n" }} }}
      - {{ path: /fail, respond: {{ status: 503, body: "fail\n" }} }}
      - {{ path: /up, proxy: backend }}
  - name: cached
    domains: [cached.test]
    cache: {{ max_size: 1MiB, max_object: 64KiB }}
    routes:
      - {{ path: /, proxy: origin }}
"#,
        backend = backend.addr,
        origin = origin.addr,
    );
    let server = Scalwsd::start(
        tempfile::tempdir().unwrap(),
        &yaml,
        http,
        Some(admin_addr),
        2,
    )
    .await;

    for _ in 0..7 {
        let reply = get(http, "app.test", "/ok").await;
        assert_eq!((reply.status, reply.text()), (200, "ok\n"));
    }
    for _ in 0..3 {
        assert_eq!(get(http, "app.test", "/fail").await.status, 503);
    }
    for _ in 0..2 {
        assert_eq!(get(http, "app.test", "/nothing-here").await.status, 404);
    }
    // No application for the host: also counted as unrouted.
    assert_eq!(get(http, "nobody.test", "/ok").await.status, 404);
    for _ in 0..4 {
        let reply = get(http, "app.test", "/up").await;
        assert_eq!((reply.status, reply.text()), (200, "backend"));
    }
    for _ in 0..5 {
        let reply = get(http, "cached.test", "/page").await;
        assert_eq!((reply.status, reply.text()), (200, "cached /page"));
    }
    assert_eq!(backend.hits(), 4);
    assert_eq!(origin.hits(), 1, "1 miss, then 4 hits");

    let reply = admin(admin_addr, "GET", "/metrics").await;
    assert_eq!(reply.status, 200);
    let content_type = reply.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(
        reply.text().ends_with("# EOF\n"),
        "OpenMetrics ends with # EOF:\n{}",
        reply.text()
    );

    let hash = sha256_hex(&std::fs::read(&server.config).unwrap());
    let (b, o) = (backend.addr, origin.addr);
    let expected: Vec<String> = [
        r#"scalws_requests_total{application="app",route="/ok",class="2xx"} 7"#,
        r#"scalws_requests_total{application="app",route="/ok",class="5xx"} 0"#,
        r#"scalws_requests_total{application="app",route="/fail",class="5xx"} 3"#,
        r#"scalws_requests_total{application="app",route="/fail",class="2xx"} 0"#,
        r#"scalws_requests_total{application="",route="",class="4xx"} 3"#,
        r#"scalws_requests_total{application="app",route="/up",class="2xx"} 4"#,
        r#"scalws_requests_total{application="cached",route="/",class="2xx"} 5"#,
        r#"scalws_request_duration_seconds_count{application="app",route="/ok"} 7"#,
        r#"scalws_request_duration_seconds_count{application="app",route="/fail"} 3"#,
        r#"scalws_request_duration_seconds_count{application="",route=""} 3"#,
        r#"scalws_request_duration_seconds_count{application="app",route="/up"} 4"#,
        r#"scalws_request_duration_seconds_bucket{le="+Inf",application="app",route="/ok"} 7"#,
        r#"scalws_request_duration_seconds_bucket{le="+Inf",application="app",route="/fail"} 3"#,
        r#"scalws_request_duration_seconds_bucket{le="+Inf",application="",route=""} 3"#,
        r#"scalws_request_duration_seconds_bucket{le="+Inf",application="app",route="/up"} 4"#,
        r#"scalws_request_duration_seconds_bucket{le="+Inf",application="cached",route="/"} 5"#,
        // Requests no route answered count as 0 s: in the first bucket.
        r#"scalws_request_duration_seconds_bucket{le="0.0005",application="",route=""} 3"#,
        &format!(r#"scalws_upstream_in_flight{{upstream="backend",address="{b}"}} 0"#),
        &format!(r#"scalws_upstream_failures_total{{upstream="backend",address="{b}"}} 0"#),
        &format!(r#"scalws_upstream_state{{upstream="backend",address="{b}",state="healthy"}} 1"#),
        &format!(r#"scalws_upstream_state{{upstream="backend",address="{b}",state="ejected"}} 0"#),
        &format!(r#"scalws_upstream_state{{upstream="backend",address="{b}",state="down"}} 0"#),
        &format!(r#"scalws_upstream_in_flight{{upstream="origin",address="{o}"}} 0"#),
        r#"scalws_cache_hits_total{application="cached"} 4"#,
        r#"scalws_cache_misses_total{application="cached"} 1"#,
        r#"scalws_cache_entries{application="cached"} 1"#,
        r#"scalws_config_reloads_total{result="ok"} 0"#,
        r#"scalws_config_reloads_total{result="failed"} 0"#,
        &format!(r#"scalws_config_info{{sha256="{hash}"}} 1"#),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The in-flight gauge may drop a moment after the client has the body: poll briefly.
    let body = metrics_until(admin_addr, &expected, Duration::from_secs(3)).await;
    assert_histograms_are_cumulative(&body);
    assert!(
        !body.contains("scalws_access_log_lines"),
        "no access log configured:\n{body}"
    );

    // Two idle keep-alive connections; every earlier connection was closed.
    let (first, status, _) = keepalive_get(http, "app.test", "/ok").await;
    assert_eq!(status, 200);
    let (_second, status, _) = keepalive_get(http, "app.test", "/ok").await;
    assert_eq!(status, 200);
    metrics_until(
        admin_addr,
        &[r#"scalws_open_connections{listener="http",protocol="http"} 2"#.to_owned()],
        Duration::from_secs(10),
    )
    .await;
    drop(first);
    metrics_until(
        admin_addr,
        &[r#"scalws_open_connections{listener="http",protocol="http"} 1"#.to_owned()],
        Duration::from_secs(10),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints() {
    let origin = cacheable_upstream().await;
    let [http, admin_addr] = free_addrs();
    let yaml = format!(
        r#"admin: {admin_addr}
listeners: [{{ name: http, address: "{http}" }}]
upstreams:
  origin: {{ addresses: ["{origin}"] }}
applications:
  - name: cached
    domains: [cached.test]
    cache: {{ max_size: 1MiB, max_object: 64KiB }}
    routes:
      - {{ path: /, proxy: origin }}
"#,
        origin = origin.addr,
    );
    let _server = Scalwsd::start(
        tempfile::tempdir().unwrap(),
        &yaml,
        http,
        Some(admin_addr),
        2,
    )
    .await;

    let reply = admin(admin_addr, "GET", "/healthz").await;
    assert_eq!((reply.status, reply.text()), (200, "ok\n"));

    let reply = admin(admin_addr, "GET", "/reload").await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("POST"));

    assert_eq!(admin(admin_addr, "GET", "/nope").await.status, 404);

    let reply = admin(admin_addr, "POST", "/cache/purge").await;
    assert_eq!(reply.status, 400, "{}", reply.text());

    // Stored, then a hit.
    assert_eq!(
        get(http, "cached.test", "/page").await.text(),
        "cached /page"
    );
    assert_eq!(
        get(http, "cached.test", "/page").await.text(),
        "cached /page"
    );
    assert_eq!(origin.hits(), 1);

    let reply = admin(
        admin_addr,
        "POST",
        "/cache/purge?host=cached.test&path=/page",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let purged: u64 = reply
        .text()
        .strip_prefix("purged ")
        .and_then(|n| n.strip_suffix('\n'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected body {:?}", reply.text()));
    assert!(purged >= 1, "{}", reply.text());

    // Purged: a miss again.
    assert_eq!(
        get(http, "cached.test", "/page").await.text(),
        "cached /page"
    );
    assert_eq!(
        origin.hits(),
        2,
        "the purged URL must go to the origin again"
    );

    let reply = admin(
        admin_addr,
        "POST",
        "/cache/purge?host=cached.test&path=/page&application=unknown",
    )
    .await;
    assert_eq!(reply.status, 404, "{}", reply.text());

    let reply = admin(admin_addr, "POST", "/reload").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.text().contains("reloaded"), "{}", reply.text());
    metrics_until(
        admin_addr,
        &[
            r#"scalws_config_reloads_total{result="ok"} 1"#.to_owned(),
            r#"scalws_config_reloads_total{result="failed"} 0"#.to_owned(),
        ],
        Duration::ZERO,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_lines_and_rotation_on_sigusr1() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let [http, admin_addr] = free_addrs();
    let yaml = format!(
        r#"admin: {admin_addr}
access_log: '{log}'
listeners: [{{ name: http, address: "{http}" }}]
applications:
  - name: app
    domains: [app.test]
    routes:
      - {{ path: /alpha, respond: {{ body: "alpha\n" }} }}
      - {{ path: /bravo, respond: {{ status: 201, body: "bravo!!\n" }} }}
"#,
        log = log.display(),
    );
    let server = Scalwsd::start(dir, &yaml, http, Some(admin_addr), 2).await;

    let mut sent = Vec::new();
    for path in ["/alpha", "/bravo?x=1", "/missing"] {
        let reply = get(http, "app.test", path).await;
        sent.push((path, reply.status, reply.body.len()));
    }
    assert_eq!(
        sent.iter().map(|s| s.1).collect::<Vec<_>>(),
        [200, 201, 404]
    );

    let keys = [
        "time",
        "listener",
        "peer",
        "method",
        "host",
        "path",
        "status",
        "bytes",
        "duration_ms",
        "upstream",
        "cache",
    ];
    let check = |lines: &[String], sent: &[(&str, u16, usize)]| {
        assert_eq!(lines.len(), sent.len(), "{lines:#?}");
        for &(path, status, bytes) in sent {
            let line = lines
                .iter()
                .find(|l| l.contains(&format!("\"path\":\"{path}\"")))
                .unwrap_or_else(|| panic!("no line for {path}: {lines:#?}"));
            let fields: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
            names.sort_unstable();
            let mut expected = keys.to_vec();
            expected.sort_unstable();
            assert_eq!(names, expected, "{line}");
            assert_eq!(fields["method"], "GET", "{line}");
            assert_eq!(fields["host"], "app.test", "{line}");
            assert_eq!(fields["path"], path, "{line}");
            assert_eq!(fields["status"], status, "{line}");
            assert_eq!(fields["bytes"], bytes, "{line}");
            assert_eq!(fields["listener"], "http", "{line}");
            assert!(
                fields["peer"].as_str().unwrap().starts_with("127.0.0.1:"),
                "{line}"
            );
            assert!(fields["duration_ms"].as_f64().unwrap() >= 0.0, "{line}");
            assert!(fields["upstream"].is_null(), "{line}");
            assert!(fields["cache"].is_null(), "{line}");
            let time = fields["time"].as_str().unwrap();
            assert!(
                time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
                "RFC 3339 with milliseconds: {line}"
            );
        }
    };
    let old = lines_when(&log, 3).await;
    check(&old, &sent);

    // Rotation: move the file away, SIGUSR1, and the log starts a new file.
    let rotated = server.path("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    server.signal("USR1");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !log.exists() {
        assert!(
            Instant::now() < deadline,
            "SIGUSR1 did not reopen {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut sent_after = Vec::new();
    for path in ["/alpha?after=1", "/bravo/after"] {
        let reply = get(http, "app.test", path).await;
        sent_after.push((path, reply.status, reply.body.len()));
    }
    let new = lines_when(&log, 2).await;
    check(&new, &sent_after);
    assert_eq!(
        std::fs::read_to_string(&rotated)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        old,
        "the rotated file keeps the 3 old lines, and only them"
    );
    metrics_until(
        admin_addr,
        &[
            "scalws_access_log_lines_total 5".to_owned(),
            "scalws_access_log_dropped_total 0".to_owned(),
        ],
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_slow_request_and_exits_0() {
    let (arrived_tx, mut arrived) = tokio::sync::mpsc::unbounded_channel::<()>();
    let slow = Upstream::start(move |_req| {
        let arrived_tx = arrived_tx.clone();
        async move {
            let _ = arrived_tx.send(());
            tokio::time::sleep(Duration::from_millis(1500)).await;
            ok("slow")
        }
    })
    .await;
    let [http, admin] = free_addrs();
    let yaml = format!(
        r#"limits: {{ drain_timeout: 5s }}
admin: {admin}
listeners: [{{ name: http, address: "{http}" }}]
upstreams:
  slow: {{ addresses: ["{slow}"] }}
applications:
  - name: app
    domains: ["*"]
    routes:
      - {{ path: /slow, proxy: slow }}
      - {{ path: /, respond: {{ body: "idle\n" }} }}
"#,
        slow = slow.addr,
    );
    let mut server =
        Scalwsd::start(tempfile::tempdir().unwrap(), &yaml, http, Some(admin), 1).await;

    let (mut idle, status, body) = keepalive_get(http, "x.test", "/").await;
    assert_eq!((status, body.as_str()), (200, "idle\n"));
    // A health checker's keep-alive connection to the admin listener.
    let (mut checker, status, _) = keepalive_get(admin, "x.test", "/healthz").await;
    assert_eq!(status, 200);

    let in_flight = tokio::spawn(async move { get(http, "x.test", "/slow").await });
    tokio::time::timeout(Duration::from_secs(5), arrived.recv())
        .await
        .expect("the slow request never reached the upstream")
        .unwrap();

    server.signal("TERM");
    let sigterm = Instant::now();

    // The listening socket goes away: new connections are refused.
    let refused = async {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match TcpStream::connect(http).await {
                // A connect racing the listener's close is reset by the
                // kernel (it was in the backlog): not accepted either; go on.
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
                Err(error) => {
                    assert_eq!(
                        error.kind(),
                        std::io::ErrorKind::ConnectionRefused,
                        "{error}"
                    );
                    break;
                }
                Ok(stream) => drop(stream),
            }
            assert!(
                Instant::now() < deadline,
                "the listener still accepts 2 s after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    // The idle keep-alive connection is closed by the server, without
    // waiting for the slow request.
    let idle_closed = closed_within(&mut idle, Duration::from_secs(3));
    // The admin listener closes its connections too: the checker sees the
    // drain at once rather than 200 on its old connection.
    let checker_closed = closed_within(&mut checker, Duration::from_secs(3));
    let ((), idle_closed, checker_closed) = tokio::join!(refused, idle_closed, checker_closed);
    assert!(idle_closed, "the idle keep-alive connection was not closed");
    assert!(
        checker_closed,
        "the admin keep-alive connection was not closed"
    );
    assert!(
        !in_flight.is_finished(),
        "the idle connection should close while the slow request is still draining"
    );

    let reply = tokio::time::timeout(Duration::from_secs(5), in_flight)
        .await
        .expect("the slow request did not complete")
        .unwrap();
    assert_eq!((reply.status, reply.text()), (200, "slow"));

    let status = server
        .exit_before(sigterm + Duration::from_secs(5))
        .await
        .expect("scalwsd did not exit within the 5 s drain timeout");
    assert_eq!(status.code(), Some(0), "{status}");
    let logs = server.logs();
    assert!(logs.contains("SIGTERM received"), "{logs}");
    assert!(logs.contains("drained"), "{logs}");
    assert!(
        !logs.contains("drain timeout reached"),
        "the drain finished in time: {logs}"
    );
}
