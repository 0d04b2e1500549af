//! The access log over real sockets and real files: one JSON line per
//! request, the upstream and cache status of proxied routes, a full queue
//! that drops instead of waiting, reopening for rotation, and clients that
//! go away mid-body.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{Full, StreamBody};
use scalws_cache::{Cache, CacheOptions};
use scalws_core::{Body, Limits, ListenerSpec, Server};
use scalws_proxy::access_log::{AccessLog, AccessLogEntry, AccessLogLayer, LogTarget};
use scalws_proxy::upstream::{UpstreamOptions, UpstreamPool};
use scalws_proxy::{Action, Application, Gateway, Proxy, Respond};
use scalws_router::{PathMatch, RouteSpec};
use serde_json::Value;
use tempfile::TempDir;
use test_support::upstream::{Upstream, ok};
use test_support::{Proto, TestClient, request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, ServiceExt};

// === helpers ===

/// An access log writing to `access.log` in a fresh directory.
struct LogFile {
    _dir: TempDir,
    path: PathBuf,
    log: AccessLog,
}

impl LogFile {
    fn start(capacity: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let capacity = NonZeroUsize::new(capacity).unwrap();
        let log = AccessLog::start(LogTarget::File(path.clone()), capacity).unwrap();
        Self {
            _dir: dir,
            path,
            log,
        }
    }

    /// Waits (up to 5 s) until `n` entries are written, then parses every
    /// line of the file. The server logs an entry when it is done with the
    /// response body, which may be just after the client has read it.
    async fn lines(&self, n: u64) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            self.log.flush().await;
            if self.log.written() >= n || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        read_lines(&self.path)
    }
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Serves `service` on a fresh port of 127.0.0.1, listener `http`.
async fn serve<S>(service: S) -> SocketAddr
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let listeners = [ListenerSpec::http("http", "127.0.0.1:0".parse().unwrap())];
    let server = Server::bind(&listeners, Limits::default()).unwrap();
    let addr = server.local_addrs()[0].1;
    tokio::spawn(server.serve(service, std::future::pending()));
    addr
}

fn route(prefix: &str, action: Action) -> RouteSpec<Action> {
    RouteSpec {
        path: PathMatch::Prefix(prefix.into()),
        methods: None,
        headers: vec![],
        query: vec![],
        target: action,
    }
}

fn pool(upstream: &Upstream) -> UpstreamPool {
    let options = UpstreamOptions {
        addresses: vec![(upstream.addr, 1)],
        ..UpstreamOptions::default()
    };
    UpstreamPool::new("app", options).unwrap()
}

fn entry(n: usize) -> AccessLogEntry {
    AccessLogEntry {
        time: SystemTime::now(),
        conn: None,
        method: Method::GET,
        host: Some("a.test".into()),
        path: format!("/{n}"),
        status: 200,
        bytes: 0,
        duration: Duration::from_micros(5),
        upstream: None,
        cache: None,
    }
}

fn paths(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["path"].as_str().unwrap()).collect()
}

// === tests ===

#[tokio::test]
async fn each_request_is_one_json_line_matching_what_was_sent() {
    let file = LogFile::start(64);
    let site = Application::builder("site")
        .domain("*")
        .unwrap()
        .route(route(
            "/",
            Action::Respond(Respond::new(StatusCode::OK, "hello\n")),
        ))
        .unwrap();
    let gateway = Gateway::builder()
        .listener("http")
        .application(site)
        .build()
        .unwrap();
    let addr = serve(AccessLogLayer::new(file.log.clone()).layer(gateway)).await;

    let h1 = TestClient::new(Proto::Http1);
    let reply = h1.get(addr, "site.test", "/a?x=1&y=%22").await;
    assert_eq!(reply.text(), "hello\n");
    let post = request("POST", "site.test", "/b")
        .body(Full::new(Bytes::from_static(b"data")))
        .unwrap();
    assert_eq!(h1.send(addr, post).await.status, 200);
    let head = request("HEAD", "site.test", "/c")
        .body(Full::default())
        .unwrap();
    assert_eq!(h1.send(addr, head).await.body.len(), 0);
    TestClient::new(Proto::H2c)
        .get(addr, "h2.test:8080", "/d")
        .await;

    let lines = file.lines(4).await;
    assert_eq!(lines.len(), 4, "{lines:?}");
    let mut lines = lines;
    // Entries are written as bodies end: sort by path to compare.
    lines.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    let expected = [
        ("GET", "site.test", "/a?x=1&y=%22", 6),
        ("POST", "site.test", "/b", 6),
        ("HEAD", "site.test", "/c", 0),
        ("GET", "h2.test:8080", "/d", 6),
    ];
    let started = SystemTime::now() - Duration::from_secs(60);
    for (line, (method, host, path, bytes)) in lines.iter().zip(expected) {
        // serde_json's map sorts its keys.
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "bytes",
                "cache",
                "duration_ms",
                "host",
                "listener",
                "method",
                "path",
                "peer",
                "status",
                "time",
                "upstream"
            ]
        );
        assert_eq!(line["method"], method);
        assert_eq!(line["host"], host);
        assert_eq!(line["path"], path);
        assert_eq!(line["status"], 200);
        assert_eq!(line["bytes"], bytes, "{line}");
        assert_eq!(line["listener"], "http");
        let peer: SocketAddr = line["peer"].as_str().unwrap().parse().unwrap();
        assert_eq!(peer.ip().to_string(), "127.0.0.1");
        assert!(line["duration_ms"].as_f64().unwrap() > 0.0, "{line}");
        let time = humantime::parse_rfc3339(line["time"].as_str().unwrap()).unwrap();
        assert!(time > started && time <= SystemTime::now());
        assert!(line["upstream"].is_null() && line["cache"].is_null());
    }
    assert_eq!((file.log.dropped(), file.log.failed()), (0, 0));
}

#[tokio::test]
async fn proxied_lines_name_the_upstream_and_cache_status() {
    let upstream = Upstream::start(|_req| async {
        let mut response = ok("cached body");
        response
            .headers_mut()
            .insert("cache-control", "max-age=60".parse().unwrap());
        response
    })
    .await;
    let cache = Cache::new(CacheOptions::default());
    let site = Application::builder("site")
        .domain("*")
        .unwrap()
        .route(route(
            "/cached",
            Action::Proxy(Proxy::new(pool(&upstream)).with_cache(&cache, "cached")),
        ))
        .unwrap()
        .route(route("/direct", Action::Proxy(Proxy::new(pool(&upstream)))))
        .unwrap();
    let gateway = Gateway::builder()
        .listener("http")
        .application(site)
        .build()
        .unwrap();
    let file = LogFile::start(64);
    let addr = serve(AccessLogLayer::new(file.log.clone()).layer(gateway)).await;

    let client = TestClient::new(Proto::Http1);
    for (n, path) in (1..).zip(["/cached", "/cached", "/direct"]) {
        assert_eq!(
            client.get(addr, "site.test", path).await.text(),
            "cached body"
        );
        // One at a time, so the lines come in this order.
        file.lines(n).await;
    }
    let post = request("POST", "site.test", "/cached")
        .body(Full::default())
        .unwrap();
    assert_eq!(client.send(addr, post).await.status, 200);

    let lines = file.lines(4).await;
    let upstream = upstream.addr.to_string();
    let seen: Vec<(&str, &Value, &Value)> = lines
        .iter()
        .map(|l| (l["method"].as_str().unwrap(), &l["upstream"], &l["cache"]))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET", &Value::from(upstream.as_str()), &Value::from("miss")),
            ("GET", &Value::Null, &Value::from("hit")),
            ("GET", &Value::from(upstream.as_str()), &Value::Null),
            (
                "POST",
                &Value::from(upstream.as_str()),
                &Value::from("bypass")
            ),
        ]
    );
    assert!(lines.iter().all(|l| l["bytes"] == 11 && l["status"] == 200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let file = LogFile::start(1);
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for n in 0..10_000 {
        let before = Instant::now();
        file.log.log(entry(n));
        slowest = slowest.max(before.elapsed());
    }
    let elapsed = started.elapsed();
    // Nothing waits for the writer: a call costs a try_send (the bounds are
    // loose for a busy machine; a send that waited would drop nothing).
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");

    file.log.flush().await;
    let (written, dropped) = (file.log.written(), file.log.dropped());
    assert!(dropped > 0, "written {written}, dropped {dropped}");
    assert_eq!(written + dropped, 10_000);
    assert_eq!(file.log.failed(), 0);
    assert_eq!(read_lines(&file.path).len() as u64, written);
}

#[tokio::test]
async fn reopen_sends_new_lines_to_a_new_file() {
    let file = LogFile::start(64);
    for n in 0..3 {
        file.log.log(entry(n));
    }
    file.log.flush().await;
    let rotated = file.path.with_extension("log.1");
    std::fs::rename(&file.path, &rotated).unwrap();
    // Still the open (renamed) file until the reopen.
    file.log.log(entry(3));
    file.log.flush().await;
    file.log.reopen();
    for n in 4..6 {
        file.log.log(entry(n));
    }
    file.log.flush().await;

    assert_eq!(paths(&read_lines(&rotated)), ["/0", "/1", "/2", "/3"]);
    assert_eq!(paths(&read_lines(&file.path)), ["/4", "/5"]);
    assert_eq!(file.log.written(), 6);
}

#[tokio::test]
async fn a_client_gone_mid_body_still_gets_one_line() {
    const CHUNK: usize = 16 * 1024;
    const CHUNKS: usize = 200;
    // 3.2 MB, a chunk every 10 ms: the client leaves after the first.
    let slow = tower::service_fn(|_request: Request<Body>| async {
        let chunks = futures_util::stream::unfold(0, |n| async move {
            if n == CHUNKS {
                return None;
            }
            if n > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let frame = Frame::data(Bytes::from(vec![b'x'; CHUNK]));
            Some((Ok::<_, Infallible>(frame), n + 1))
        });
        Ok::<_, Infallible>(Response::new(Body::new(StreamBody::new(chunks))))
    })
    .map_future(Box::pin);
    let file = LogFile::start(64);
    let addr = serve(AccessLogLayer::new(file.log.clone()).layer(slow)).await;

    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: big.test\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    drop(stream);

    let lines = file.lines(1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(
        (&line["path"], &line["status"]),
        (&Value::from("/big"), &Value::from(200))
    );
    let bytes = line["bytes"].as_u64().unwrap();
    assert!(bytes > 0 && bytes < (CHUNK * CHUNKS) as u64, "{line}");
    // Logged when the server gave up on the client, not after the whole body.
    assert!(line["duration_ms"].as_f64().unwrap() < 1500.0, "{line}");
    // Exactly once: nothing more comes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    file.log.flush().await;
    assert_eq!(read_lines(&file.path).len(), 1);
}

#[tokio::test]
async fn a_panicking_handler_is_logged_as_the_500_the_client_gets() {
    let panicking = tower::service_fn(|request: Request<Body>| async move {
        if request.uri().path() == "/panic" {
            panic!("a handler bug");
        }
        Ok::<_, Infallible>(Response::new(Body::from("fine")))
    })
    .map_future(Box::pin);
    let file = LogFile::start(64);
    let addr = serve(AccessLogLayer::new(file.log.clone()).layer(panicking)).await;

    let client = TestClient::new(Proto::Http1);
    assert_eq!(client.get(addr, "p.test", "/panic").await.status, 500);
    assert_eq!(client.get(addr, "p.test", "/after").await.status, 200);

    let lines = file.lines(2).await;
    let statuses: Vec<(&str, u64)> = lines
        .iter()
        .map(|l| (l["path"].as_str().unwrap(), l["status"].as_u64().unwrap()))
        .collect();
    assert_eq!(statuses, [("/panic", 500), ("/after", 200)], "{lines:?}");
}
