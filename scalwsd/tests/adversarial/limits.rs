//! Limits set in the file take effect end to end (those that
//! `limits_from_yaml.rs` does not already prove): `max_connections` holds
//! further clients in the backlog until a connection closes, and
//! `h2_max_concurrent_streams` keeps a second stream from reaching the
//! upstream while the first is open, and the idle timeouts never cut a
//! response that is still streaming, however quiet.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use test_support::upstream::{Upstream, ok};
use test_support::{closed_within, read_whole};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::support;

fn config(limits: &str, upstream: std::net::SocketAddr) -> String {
    format!(
        r#"
limits: {{ {limits} }}
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app: {{ addresses: ["{upstream}"] }}
applications:
  - name: site
    domains: ["*"]
    routes: [{{ path: /, proxy: app }}]
"#
    )
}

async fn answered_within(stream: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut buf = [0u8; 4096];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        _ => None,
    }
}

#[tokio::test]
async fn max_connections_holds_the_next_client_until_one_closes() {
    let upstream = Upstream::named("up").await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&config("max_connections: 2", upstream.addr), dir.path());
    let addr = running.addr("http");
    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(GET).await.unwrap();
        let answer = answered_within(&mut stream, Duration::from_secs(3)).await;
        assert!(answer.is_some_and(|a| a.starts_with("HTTP/1.1 200")));
        held.push(stream);
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    third.write_all(GET).await.unwrap();
    assert_eq!(
        answered_within(&mut third, Duration::from_millis(500)).await,
        None
    );
    drop(held.pop());
    let answer = answered_within(&mut third, Duration::from_secs(3)).await;
    assert!(
        answer.is_some_and(|a| a.starts_with("HTTP/1.1 200")),
        "served once a place freed"
    );
    assert!(!closed_within(&mut held[0], Duration::from_millis(100)).await);
}

#[tokio::test]
async fn h2_max_concurrent_streams_holds_the_second_stream() {
    let release = Arc::new(Notify::new());
    let fast_hits = Arc::new(AtomicUsize::new(0));
    let (gate, hits) = (release.clone(), fast_hits.clone());
    let upstream = Upstream::start(move |request: http::Request<hyper::body::Incoming>| {
        let (gate, hits) = (gate.clone(), hits.clone());
        async move {
            if request.uri().path() == "/slow" {
                gate.notified().await;
            } else {
                hits.fetch_add(1, Ordering::SeqCst);
            }
            ok("done")
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(
        &config("h2_max_concurrent_streams: 1", upstream.addr),
        dir.path(),
    );
    let mut h2 = test_support::h2_connection(running.addr("http")).await;
    let get = |path: &str| {
        Request::get(format!("http://a.test{path}"))
            .body(Full::<Bytes>::default())
            .unwrap()
    };
    // Let the server's SETTINGS arrive before opening streams.
    let warm = read_whole(h2.send_request(get("/warm")).await.unwrap()).await;
    assert_eq!(warm.status, 200);
    let before = fast_hits.load(Ordering::SeqCst);
    let slow = tokio::spawn(h2.send_request(get("/slow")));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut second = h2.clone();
    let fast = tokio::spawn(async move { second.send_request(get("/fast")).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fast_hits.load(Ordering::SeqCst),
        before,
        "a second stream reached the upstream"
    );
    release.notify_one();
    let slow = read_whole(slow.await.unwrap().unwrap()).await;
    let fast = read_whole(fast.await.unwrap().unwrap()).await;
    assert_eq!((slow.status, fast.status), (200, 200));
    assert_eq!(fast_hits.load(Ordering::SeqCst), before + 1);
}

/// A response that streams, then says nothing for longer than
/// `keepalive_timeout` and `header_read_timeout` together, and than
/// `send_timeout` (server-sent events between two events): the connection
/// is busy, not idle, the body waits on its upstream and not on the client,
/// and the client gets the rest. Before, the request stopped counting at its
/// response head and such a stream was cut.
#[tokio::test]
async fn a_quiet_streaming_response_is_not_idle() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(async move {
        // One connection per client protocol; bounded.
        for _ in 0..2 {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n";
                let _ = stream.write_all(head.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(2500)).await;
                let _ = stream.write_all(b"4\r\nlast\r\n0\r\n\r\n").await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(
        &config(
            "keepalive_timeout: 1s, header_read_timeout: 1s, send_timeout: 1s",
            upstream,
        ),
        dir.path(),
    );
    let addr = running.addr("http");
    for proto in [test_support::Proto::Http1, test_support::Proto::H2c] {
        let client = test_support::TestClient::new(proto);
        let reply = client.get(addr, "a.test", "/events").await;
        assert_eq!(reply.status, 200, "{proto:?}");
        assert_eq!(reply.text(), "firstlast", "{proto:?}");
    }
}
