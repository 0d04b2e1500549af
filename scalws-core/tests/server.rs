//! The server runtime over real sockets: limits, timeouts, panics, protocols, drain.
#![allow(clippy::unwrap_used, missing_docs)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use scalws_core::{Body, ConnInfo, Limits, ListenerSpec, Server};
use test_support::{
    Connection, Proto, TestClient, closed_within, raw_exchange, read_response, request,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// How many `/hold` requests were dropped before they were answered.
static HELD_AND_DROPPED: AtomicUsize = AtomicUsize::new(0);

/// Counts itself in `HELD_AND_DROPPED` when dropped.
struct Held;

impl Drop for Held {
    fn drop(&mut self) {
        HELD_AND_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// Answers by path: `/echo-body` reads the body, `/trailers` ends with a
/// trailer field, `/connection-headers` answers with connection-specific
/// fields, `/echo-header` answers the
/// value of `x-echo`, `/panic` panics, `/slow` sleeps, `/hold` waits 30 s
/// (counting itself in `HELD_AND_DROPPED` if dropped before),
/// anything else names the listener and scheme from `ConnInfo`.
async fn app(request: Request<Body>) -> Result<Response<Body>, Infallible> {
    match request.uri().path() {
        "/panic" => panic!("boom"),
        "/hold" => {
            let held = Held;
            tokio::time::sleep(Duration::from_secs(30)).await;
            std::mem::forget(held);
            Ok(Response::new(Body::from("held")))
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(800)).await;
            Ok(Response::new(Body::from("slow done")))
        }
        "/echo-header" => {
            let value = request.headers().get("x-echo").cloned();
            Ok(Response::new(Body::full(Bytes::from(
                value.map_or_else(Vec::new, |v| v.as_bytes().to_vec()),
            ))))
        }
        "/trailers" => {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("x-checksum", http::HeaderValue::from_static("42"));
            let frames = futures_util::stream::iter([
                Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"body"))),
                Ok(http_body::Frame::trailers(trailers)),
            ]);
            let mut response = Response::new(Body::new(http_body_util::StreamBody::new(frames)));
            // hyper sends only the trailer fields the response declares.
            response
                .headers_mut()
                .insert("trailer", http::HeaderValue::from_static("x-checksum"));
            Ok(response)
        }
        path if path.starts_with("/sized/") => {
            // `/sized/N`: N bytes, in chunks of at most 10,000 (the last
            // one smaller), or one chunk with `?whole`.
            let len: usize = path["/sized/".len()..].parse().unwrap_or(0);
            let body: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            if request.uri().query() == Some("whole") {
                return Ok(Response::new(Body::full(Bytes::from(body))));
            }
            let chunks: Vec<_> = body
                .chunks(10_000)
                .map(|c| Ok::<_, Infallible>(http_body::Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            let frames = futures_util::stream::iter(chunks);
            Ok(Response::new(Body::new(http_body_util::StreamBody::new(
                frames,
            ))))
        }
        "/connection-headers" => {
            let mut response = Response::new(Body::from("named"));
            for (name, value) in [
                ("connection", "x-only-here"),
                ("x-only-here", "1"),
                ("keep-alive", "timeout=5"),
                ("proxy-connection", "keep-alive"),
                ("upgrade", "websocket"),
                ("te", "gzip"),
                ("x-kept", "2"),
            ] {
                response.headers_mut().insert(
                    http::HeaderName::from_static(name),
                    http::HeaderValue::from_static(value),
                );
            }
            Ok(response)
        }
        "/echo-body" => match request.into_body().collect().await {
            Ok(body) => Ok(Response::new(Body::full(body.to_bytes()))),
            Err(error) => {
                let status = scalws_core::error::status_for(error.as_ref());
                Ok(scalws_core::error::error_response(status))
            }
        },
        _ => {
            let conn = request.extensions().get::<ConnInfo>().unwrap();
            let text = format!(
                "{} {} {:?}",
                conn.listener(),
                conn.scheme().as_str(),
                request.version()
            );
            Ok(Response::new(Body::from(text)))
        }
    }
}

struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

fn start(limits: Limits) -> Running {
    start_serving(limits, tower::service_fn(app))
}

/// A server on a free loopback port serving `service` until dropped.
fn start_serving<S>(limits: Limits, service: S) -> Running
where
    S: tower::Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Error: Into<scalws_core::BoxError>,
    S::Future: Send + 'static,
{
    let spec = ListenerSpec::http("edge", "127.0.0.1:0".parse().unwrap());
    let server = Server::bind(&[spec], limits).unwrap();
    let addr = server.local_addrs()[0].1;
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(service, async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
        done,
    }
}

#[tokio::test]
async fn http1_and_h2c_answer_with_conn_info() {
    let server = start(Limits::default());
    let h1 = TestClient::new(Proto::Http1)
        .get(server.addr, "x", "/")
        .await;
    assert_eq!(h1.text(), "edge http HTTP/1.1");
    let h2 = TestClient::new(Proto::H2c).get(server.addr, "x", "/").await;
    assert_eq!(h2.text(), "edge http HTTP/2.0");
}

/// RFC 9110 6.6.1: an origin server with a clock sends `Date`, the time the
/// message was made, in whole seconds. (hyper's cached field is read on the
/// kernel's coarse wall clock: a patch.)
#[tokio::test]
async fn every_answer_carries_the_current_date() {
    let server = start(Limits::default());
    for proto in [Proto::Http1, Proto::H2c] {
        for _ in 0..3 {
            let before = std::time::SystemTime::now();
            let reply = TestClient::new(proto).get(server.addr, "x", "/").await;
            let after = std::time::SystemTime::now();
            let date = reply.header("date").expect("a Date field");
            let date = httpdate::parse_http_date(date).expect("an HTTP date");
            // Whole seconds: the field may lag by up to one second (plus a tick).
            let slack = Duration::from_millis(1100);
            assert!(
                date + slack >= before && date <= after,
                "{proto:?}: Date {date:?} outside {before:?}..{after:?}"
            );
        }
        // Past the slack: a cached field that never moved on fails the next round.
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
}

/// RFC 9110 6.5.1 and 10.1.4: trailer fields go to an HTTP/1.1 client only
/// when its `TE` lists `trailers`, on any of its `TE` lines, in any case.
/// (hyper reads the request's `TE` as it parses the head: a patch.)
#[tokio::test]
async fn response_trailers_go_only_to_a_client_that_accepts_them() {
    let server = start(Limits::default());
    let ask = |te_lines: &str| {
        format!("GET /trailers HTTP/1.1\r\nHost: x\r\n{te_lines}Connection: close\r\n\r\n")
    };
    // (the client's TE lines, whether the trailer field is sent)
    for (te_lines, accepted) in [
        ("TE: trailers\r\n", true),
        ("TE: gzip, Trailers\r\n", true),
        ("TE: gzip\r\nTE: deflate, trailers\r\n", true),
        ("TE: trailers\r\nTE: gzip\r\n", true),
        ("", false),
        ("TE: gzip\r\n", false),
        ("TE: trailersx\r\n", false),
    ] {
        let head = ask(te_lines);
        let reply = raw_exchange(server.addr, head.as_bytes(), Duration::from_secs(5)).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.contains("\r\n4\r\nbody\r\n"), "{te_lines}: {reply}");
        assert_eq!(
            reply.ends_with("\r\n0\r\nx-checksum: 42\r\n\r\n"),
            accepted,
            "{te_lines}: {reply}"
        );
        assert_eq!(
            reply.contains("x-checksum: 42"),
            accepted,
            "{te_lines}: {reply}"
        );
    }
}

/// RFC 9113 8.2.2: a service's connection-specific response fields (and
/// those its `Connection` names) are not sent to an HTTP/2 client, and the
/// rest of the response is. (hyper and h2 check the names in one pass: a
/// patch.)
#[tokio::test]
async fn an_h2_response_goes_without_its_connection_specific_fields() {
    let server = start(Limits::default());
    let reply = TestClient::new(Proto::H2c)
        .get(server.addr, "x", "/connection-headers")
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "named");
    assert_eq!(reply.headers["x-kept"], "2");
    for name in [
        "connection",
        "x-only-here",
        "keep-alive",
        "proxy-connection",
        "upgrade",
        "te",
    ] {
        assert!(
            !reply.headers.contains_key(name),
            "{name}: {:?}",
            reply.headers
        );
    }
    // The same response over HTTP/1.1 keeps what HTTP/1.1 allows.
    let reply = TestClient::new(Proto::Http1)
        .get(server.addr, "x", "/connection-headers")
        .await;
    assert_eq!(reply.headers["x-kept"], "2");
    assert_eq!(reply.headers["keep-alive"], "timeout=5");
}

/// A body's last chunk, when small, goes to h2 at once, before the stream
/// has the window for it (a patch to hyper's body pipe): h2 must still send
/// it only as the client's window allows. A client with a 10-byte stream
/// window gets every body whole, the shortcut's sizes (a whole small body,
/// a small last chunk after larger ones) and the ordinary pipe's (a whole
/// body over 16 KiB).
#[tokio::test]
async fn an_h2_body_goes_whole_through_a_small_client_window() {
    let server = start(Limits::default());
    let stream = TokioIo::new(TcpStream::connect(server.addr).await.unwrap());
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(10)
        .handshake::<_, Full<Bytes>>(stream)
        .await
        .unwrap();
    tokio::spawn(conn);
    for (path, len) in [
        ("/sized/2?whole", 2),
        ("/sized/5000?whole", 5_000),
        ("/sized/16384?whole", 16_384),
        ("/sized/40000?whole", 40_000),
        ("/sized/25000", 25_000),
        ("/sized/0?whole", 0),
    ] {
        let request = Request::get(format!("http://x{path}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(10), async {
            let response = sender.send_request(request).await.unwrap();
            let status = response.status();
            (
                status,
                response.into_body().collect().await.unwrap().to_bytes(),
            )
        })
        .await
        .unwrap_or_else(|_| panic!("{path}: no whole answer in 10 s"));
        assert_eq!(response.0, 200, "{path}");
        let expected: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        assert_eq!(response.1.len(), len, "{path}");
        assert!(response.1 == expected, "{path}: the bytes differ");
    }
}

#[tokio::test]
async fn oversized_head_gets_431() {
    let server = start(Limits {
        max_header_bytes: 8 * 1024,
        ..Limits::default()
    });
    let big = "a".repeat(10 * 1024);
    let head = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let reply = raw_exchange(server.addr, head.as_bytes(), Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");

    // The same on a kept connection, whose read buffer is a spare of its
    // thread, larger than the limit.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(HTTP1_GET).await.unwrap();
    let (first, _) = read_response(&mut stream).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    stream.write_all(head.as_bytes()).await.unwrap();
    let (second, _) = read_response(&mut stream).await;
    assert!(second.starts_with("HTTP/1.1 431"), "{second}");
}

#[tokio::test]
async fn too_many_headers_get_431() {
    let server = start(Limits {
        max_headers: 10,
        ..Limits::default()
    });
    let mut head = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..11 {
        head.push_str(&format!("X-H{i}: v\r\n"));
    }
    head.push_str("\r\n");
    let reply = raw_exchange(server.addr, head.as_bytes(), Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");

    // Exactly at the limit is fine.
    let mut head = String::from("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for i in 0..8 {
        head.push_str(&format!("X-H{i}: v\r\n"));
    }
    head.push_str("\r\n");
    let reply = raw_exchange(server.addr, head.as_bytes(), Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

#[tokio::test]
async fn declared_body_over_limit_gets_413() {
    let server = start(Limits {
        max_request_body: 1024,
        ..Limits::default()
    });
    let head = "POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n";
    let reply = raw_exchange(server.addr, head.as_bytes(), Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("413 Payload Too Large"), "{reply}");
}

#[tokio::test]
async fn streamed_body_over_limit_gets_413_and_under_limit_passes() {
    let server = start(Limits {
        max_request_body: 1024,
        ..Limits::default()
    });
    let client = TestClient::new(Proto::Http1);
    let ok = client
        .send(
            server.addr,
            request("POST", "x", "/echo-body")
                .body(Full::new(Bytes::from(vec![b'a'; 1024])))
                .unwrap(),
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body.len(), 1024);

    let chunk = "a".repeat(600);
    let chunked = format!(
        "POST /echo-body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let reply = raw_exchange(server.addr, chunked.as_bytes(), Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
}

#[tokio::test]
async fn half_a_head_is_disconnected_after_header_read_timeout() {
    let server = start(Limits {
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[tokio::test]
async fn silent_new_connection_is_closed_after_header_read_timeout() {
    let server = start(Limits {
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn keepalive_outlives_header_timeout_and_closes_after_keepalive_timeout() {
    let server = start(Limits {
        header_read_timeout: Duration::from_millis(200),
        keepalive_timeout: Duration::from_millis(900),
        ..Limits::default()
    });
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(HTTP1_GET).await.unwrap();
    // Idle for longer than the header timeout but less than keep-alive: still open.
    assert!(!closed_within(&mut stream, Duration::from_millis(500)).await);
    stream.write_all(HTTP1_GET).await.unwrap();
    assert!(!closed_within(&mut stream, Duration::from_millis(300)).await);
    // Then idle past keep-alive: closed.
    assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
}

/// A client's opening of an HTTP/2 connection: the preface, an empty
/// SETTINGS, and stream 1's request, `block` (HEADERS with END_STREAM and
/// END_HEADERS).
fn h2_opening(block: &[u8]) -> Vec<u8> {
    let mut opening = PREFACE.to_vec();
    opening.extend(frame(0x4, 0, 0, &[]));
    opening.extend(frame(0x1, 0x5, 1, block));
    opening
}

/// A connection whose first request is answered at once is idle from then
/// on: `keepalive_timeout` closes it, not the longer `header_read_timeout`
/// its first check was set for, over either protocol.
#[tokio::test]
async fn a_first_request_answered_leaves_keepalive_timeout_to_close_it() {
    let server = start(Limits {
        keepalive_timeout: Duration::from_millis(300),
        header_read_timeout: Duration::from_secs(4),
        ..Limits::default()
    });
    let mut http1 = TcpStream::connect(server.addr).await.unwrap();
    http1.write_all(HTTP1_GET).await.unwrap();
    let mut http2 = TcpStream::connect(server.addr).await.unwrap();
    http2.write_all(&h2_opening(&GET_SLASH)).await.unwrap();
    let (http1, http2) = tokio::join!(
        closed_within(&mut http1, Duration::from_secs(2)),
        goaway_within(&mut http2, Duration::from_secs(2)),
    );
    assert!(http1, "HTTP/1.1 kept past keepalive_timeout");
    assert!(http2, "HTTP/2 kept past keepalive_timeout");
}

/// An idle HTTP/2 connection asked to close (GOAWAY, and a PING the
/// client here never answers) is dropped `header_read_timeout` after, not
/// a whole `keepalive_timeout` after the GOAWAY it wrote itself.
#[tokio::test]
async fn an_idle_http2_connection_that_ignores_its_goaway_is_dropped_after_the_grace() {
    let server = start(Limits {
        keepalive_timeout: Duration::from_millis(1200),
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(&h2_opening(&GET_SLASH)).await.unwrap();
    let started = std::time::Instant::now();
    // Answered, then idle: the GOAWAY comes at about 1.2 s, the drop 0.3 s
    // after it (at 2.4 s, a keep-alive after the GOAWAY, before).
    assert!(
        closed_within(&mut stream, Duration::from_millis(2000)).await,
        "kept past its grace"
    );
    assert!(started.elapsed() >= Duration::from_millis(1100));
}

/// Whether the server sends an HTTP/2 GOAWAY within `wait`. (Its close comes
/// only once a client that does not answer the PING beside it has had its
/// grace, `header_read_timeout`.)
async fn goaway_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    let mut bytes: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // Frames from the first byte on: a 3-byte length, the type, 5 bytes more.
        let mut at = 0;
        while at + 9 <= bytes.len() {
            if bytes[at + 3] == 0x7 {
                return true;
            }
            let length = usize::from(bytes[at]) << 16
                | usize::from(bytes[at + 1]) << 8
                | usize::from(bytes[at + 2]);
            at += 9 + length;
        }
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => bytes.extend(&buf[..n]),
            _ => return false,
        }
    }
}

/// The first byte of a head after an idle spell gives that head
/// `header_read_timeout`, however long `keepalive_timeout` is.
#[tokio::test]
async fn a_head_begun_after_an_idle_spell_has_header_read_timeout() {
    let server = start(Limits {
        keepalive_timeout: Duration::from_secs(4),
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(HTTP1_GET).await.unwrap();
    // Past the first check (at the head timeout), so the next is set idle.
    assert!(!closed_within(&mut stream, Duration::from_millis(500)).await);
    stream.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let started = std::time::Instant::now();
    assert!(
        closed_within(&mut stream, Duration::from_secs(2)).await,
        "half a head outlived header_read_timeout"
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
}

/// A request that ends before its answer (an HTTP/2 stream the client
/// resets: hyper drops the request's future) stops counting as in flight,
/// so its connection, idle after it, is closed. The client is written by
/// hand so that nothing but the reset ends the request.
#[tokio::test]
async fn a_request_reset_before_its_answer_leaves_its_connection_idle() {
    let server = start(Limits {
        keepalive_timeout: Duration::from_millis(300),
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    // GET http://x/slow (HPACK: :method GET, :scheme http, :path and
    // :authority as literals).
    let mut block = vec![0x82, 0x86, 0x44, 5];
    block.extend(b"/slow");
    block.extend([0x01, 0x01, b'x']);
    stream.write_all(&h2_opening(&block)).await.unwrap();
    // `/slow` would answer in 800 ms; the stream is reset (CANCEL) before.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream
        .write_all(&frame(0x3, 0, 1, &8u32.to_be_bytes()))
        .await
        .unwrap();
    assert!(
        closed_within(&mut stream, Duration::from_secs(5)).await,
        "the connection was kept as if the request were still in flight"
    );
}

#[tokio::test]
async fn a_panicking_request_gets_500_and_the_server_goes_on() {
    let server = start(Limits::default());
    let client = TestClient::new(Proto::Http1);
    let reply = client.get(server.addr, "x", "/panic").await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.text(), "500 Internal Server Error\n");
    let again = client.get(server.addr, "x", "/").await;
    assert_eq!(again.status, 200);
}

#[tokio::test]
async fn h2_max_concurrent_streams_is_advertised() {
    let server = start(Limits {
        h2_max_concurrent_streams: std::num::NonZeroU32::new(2).unwrap(),
        ..Limits::default()
    });
    // Five concurrent slow requests on one h2 connection all complete; with two
    // streams at a time they take at least three rounds.
    let sender = test_support::h2_connection(server.addr).await;
    let get = |sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>| async move {
        let mut sender = sender;
        let request = request("GET", "x", "/slow")
            .version(http::Version::HTTP_2)
            .body(Full::default())
            .unwrap();
        sender
            .send_request(request)
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    // One request first, so the client has the server's SETTINGS and queues
    // rather than having extra streams refused.
    assert_eq!(get(sender.clone()).await, 200);
    let started = std::time::Instant::now();
    let replies = futures_join((0..5).map(|_| get(sender.clone()))).await;
    assert!(replies.iter().all(|s| *s == 200));
    assert!(
        started.elapsed() >= Duration::from_millis(2300),
        "{:?}",
        started.elapsed()
    );
}

async fn futures_join<F: std::future::Future<Output = u16> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<u16> {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn drain_finishes_in_flight_and_refuses_new_connections() {
    let mut server = start(Limits {
        drain_timeout: Duration::from_secs(5),
        ..Limits::default()
    });
    let addr = server.addr;
    let slow =
        tokio::spawn(async move { TestClient::new(Proto::Http1).get(addr, "x", "/slow").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "new connections must be refused"
    );
    let reply = slow.await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "slow done");
    tokio::time::timeout(Duration::from_secs(5), server.done)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn drain_timeout_cuts_requests_that_run_too_long() {
    let mut server = start(Limits {
        drain_timeout: Duration::from_millis(100),
        ..Limits::default()
    });
    let addr = server.addr;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.stop.take().unwrap().send(()).unwrap();
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), server.done)
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(700));
}

#[tokio::test]
async fn connections_past_max_connections_wait_in_the_backlog() {
    let server = start(Limits {
        max_connections: 1,
        ..Limits::default()
    });
    // The first connection holds the only slot.
    let mut first = TcpStream::connect(server.addr).await.unwrap();
    first.write_all(HTTP1_GET).await.unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::io::AsyncReadExt::read(&mut first, &mut buf)
        .await
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

    // The second is accepted by the kernel but not served while the first is open.
    let mut second = TcpStream::connect(server.addr).await.unwrap();
    second
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let waiting = test_support::read_until_close(&mut second, Duration::from_millis(400)).await;
    assert_eq!(waiting, "", "served past max_connections");

    // Once the first goes away, the second is served.
    drop(first);
    let reply = test_support::read_until_close(&mut second, Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

/// Between requests, an HTTP/1.1 connection gives its read and write
/// buffers back (the vendored hyper's change) and takes new ones when the
/// next request comes: whatever arrives after an idle spell is read whole,
/// in one write or in pieces, pipelined or large, and a client's close is
/// still seen.
#[tokio::test]
async fn what_comes_after_an_idle_spell_is_read_whole() {
    let server = start(Limits::default());
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let idle = || tokio::time::sleep(Duration::from_millis(150));
    let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    stream.write_all(get).await.unwrap();
    let (head, body) = read_response(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"edge http HTTP/1.1");

    // A head, then after a pause its body.
    idle().await;
    stream
        .write_all(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream.write_all(b"hello").await.unwrap();
    assert_eq!(read_response(&mut stream).await.1, b"hello");

    // Two requests in one write.
    idle().await;
    let mut two = get.to_vec();
    two.extend_from_slice(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    stream.write_all(&two).await.unwrap();
    assert_eq!(read_response(&mut stream).await.1, b"edge http HTTP/1.1");
    assert_eq!(read_response(&mut stream).await.1, b"abc");

    // A head a few bytes at a time.
    idle().await;
    for piece in get.chunks(4) {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(read_response(&mut stream).await.1, b"edge http HTTP/1.1");

    // A body far larger than one buffer, echoed whole.
    idle().await;
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let head = format!(
        "POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        large.len()
    );
    let (mut read, mut write) = stream.into_split();
    let sent = large.clone();
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await.unwrap();
        write.write_all(&sent).await.unwrap();
        write
    });
    let echoed = read_response(&mut read).await.1;
    let write = writer.await.unwrap();
    assert_eq!(echoed.len(), large.len());
    assert!(echoed == large, "the echoed body differs");
    stream = read.reunite(write).unwrap();

    // The client's close, while idle, closes the connection.
    idle().await;
    stream.shutdown().await.unwrap();
    assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
}

/// An HTTP/2 connection with no open stream gives its read, write and HPACK
/// buffers back while it waits (the vendored h2's change, on the server's
/// side and on the client's) and takes new ones when the next frame comes:
/// after each idle spell, bodies far larger than one buffer go both ways
/// whole, on one stream and on several at once, a header block larger than
/// a frame (HEADERS and CONTINUATION) is decoded whole, and a frame or a
/// header block that arrives in pieces, with idle spells between them, is
/// read whole.
#[tokio::test]
async fn an_idle_http2_connection_reads_and_writes_whole_after_an_idle_spell() {
    let server = start(Limits::default());
    let idle = || tokio::time::sleep(Duration::from_millis(150));
    let sender = test_support::h2_connection(server.addr).await;
    let send = |path: &'static str, header: Option<String>, body: Vec<u8>| {
        let mut sender = sender.clone();
        async move {
            let mut builder = request("POST", "x", path).version(http::Version::HTTP_2);
            if let Some(value) = header {
                builder = builder.header("x-echo", value);
            }
            let request = builder.body(Full::new(Bytes::from(body))).unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.status(), 200);
            response.into_body().collect().await.unwrap().to_bytes()
        }
    };
    let body =
        |seed: u32, len: u32| -> Vec<u8> { (0..len).map(|i| ((i + seed) % 251) as u8).collect() };

    assert_eq!(send("/", None, Vec::new()).await, "edge http HTTP/2.0");

    idle().await;
    let large = body(0, 300_000);
    assert!(
        send("/echo-body", None, large.clone()).await == large,
        "the echoed body differs"
    );

    idle().await;
    let streams: Vec<_> = (0..5u32)
        .map(|n| {
            let sent = body(n, 40_000 + n * 1000);
            let reply = tokio::spawn(send("/echo-body", None, sent.clone()));
            (sent, reply)
        })
        .collect();
    for (sent, reply) in streams {
        assert!(reply.await.unwrap() == sent, "an echoed body differs");
    }

    // 40,000 characters: more than one 16 KiB frame, so HEADERS and then
    // CONTINUATION frames; letters, so the encoder may Huffman-code them.
    idle().await;
    let value: String = (0..40_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    assert_eq!(
        send("/echo-header", Some(value.clone()), Vec::new()).await,
        value
    );

    // The same by hand: a frame in pieces, and a header block split between
    // HEADERS and CONTINUATION, each with idle spells between the writes.
    let mut raw = TcpStream::connect(server.addr).await.unwrap();
    let block = GET_SLASH;
    let mut start = PREFACE.to_vec();
    start.extend(frame(4, 0, 0, &[]));
    start.extend(frame(4, 1, 0, &[]));
    raw.write_all(&start).await.unwrap();
    let mut reader = RawFrames::default();
    assert_eq!(reader.body(&mut raw, 0).await, b"", "the server's SETTINGS");
    idle().await;
    let whole = frame(1, 0x4 | 0x1, 1, &block);
    for piece in whole.chunks(4) {
        raw.write_all(piece).await.unwrap();
        idle().await;
    }
    assert_eq!(reader.body(&mut raw, 1).await, b"edge http HTTP/2.0");
    idle().await;
    raw.write_all(&frame(1, 0x1, 3, &block[..3])).await.unwrap();
    idle().await;
    raw.write_all(&frame(9, 0x4, 3, &block[3..])).await.unwrap();
    assert_eq!(reader.body(&mut raw, 3).await, b"edge http HTTP/2.0");

    // PRIORITY frames (on a closed stream and on an idle one) are read and
    // ignored; h2 never writes one (its encoder has no PRIORITY branch).
    let priority = [0, 0, 0, 0, 15];
    let mut frames = frame(2, 0, 1, &priority);
    frames.extend(frame(2, 0, 5, &priority));
    frames.extend(frame(1, 0x4 | 0x1, 5, &block));
    raw.write_all(&frames).await.unwrap();
    assert_eq!(reader.body(&mut raw, 5).await, b"edge http HTTP/2.0");
}

/// A whole HTTP/1.1 request for `/`.
const HTTP1_GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/// HTTP/2's connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A header block: :method GET, :scheme http, :path / (static table), :authority x.
const GET_SLASH: [u8; 6] = [0x82, 0x86, 0x84, 0x01, 0x01, b'x'];

/// One HTTP/2 frame, written out.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = u32::try_from(payload.len()).unwrap().to_be_bytes()[1..].to_vec();
    bytes.extend_from_slice(&[kind, flags]);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A plain connection is HTTP/2 when its first bytes are the preface, and
/// the server tells from the bytes it has: a preface in pieces, with pauses
/// between them, is still HTTP/2; a start that leaves the preface at its
/// second byte, after a pause, is HTTP/1.1; half a preface and silence is
/// closed at `header_read_timeout`.
#[tokio::test]
async fn the_protocol_is_told_from_the_first_bytes_however_they_come() {
    let server = start(Limits {
        header_read_timeout: Duration::from_millis(1500),
        ..Limits::default()
    });
    let pause = || tokio::time::sleep(Duration::from_millis(120));

    let mut raw = TcpStream::connect(server.addr).await.unwrap();
    for piece in [&PREFACE[..1], &PREFACE[1..11], &PREFACE[11..23]] {
        raw.write_all(piece).await.unwrap();
        pause().await;
    }
    let mut rest = PREFACE[23..].to_vec();
    rest.extend(frame(4, 0, 0, &[]));
    rest.extend(frame(4, 1, 0, &[]));
    rest.extend(frame(1, 0x4 | 0x1, 1, &GET_SLASH));
    raw.write_all(&rest).await.unwrap();
    let mut reader = RawFrames::default();
    assert_eq!(reader.body(&mut raw, 1).await, b"edge http HTTP/2.0");

    let mut raw = TcpStream::connect(server.addr).await.unwrap();
    raw.write_all(b"P").await.unwrap();
    pause().await;
    raw.write_all(b"OST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        .await
        .unwrap();
    let (head, body) = read_response(&mut raw).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"hi");

    let mut raw = TcpStream::connect(server.addr).await.unwrap();
    raw.write_all(&PREFACE[..10]).await.unwrap();
    let started = std::time::Instant::now();
    assert!(closed_within(&mut raw, Duration::from_secs(10)).await);
    assert!(started.elapsed() >= Duration::from_millis(1200));
}

/// A client that closes before its first byte gives its place back at once,
/// not at `header_read_timeout`: with room for one connection, the next
/// client is answered well before that.
#[tokio::test]
async fn a_connection_closed_before_its_first_byte_frees_its_place() {
    let server = start(Limits {
        max_connections: 1,
        header_read_timeout: Duration::from_secs(3),
        ..Limits::default()
    });
    drop(TcpStream::connect(server.addr).await.unwrap());
    let started = std::time::Instant::now();
    let reply = raw_exchange(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        Duration::from_secs(10),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited {:?} for the closed connection's place",
        started.elapsed()
    );
}

/// Frames read off a raw HTTP/2 connection.
#[derive(Default)]
struct RawFrames {
    read: Vec<u8>,
}

impl RawFrames {
    /// Reads frames until the response on `stream` ends (for stream 0,
    /// until a SETTINGS frame) and returns its body; any other frame is
    /// dropped.
    async fn body(&mut self, stream: &mut TcpStream, want: u32) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut body = Vec::new();
        loop {
            while self.read.len() >= 9 {
                let len = usize::from(self.read[0]) << 16
                    | usize::from(self.read[1]) << 8
                    | usize::from(self.read[2]);
                if self.read.len() < 9 + len {
                    break;
                }
                let head: Vec<u8> = self.read.drain(..9).collect();
                let payload: Vec<u8> = self.read.drain(..len).collect();
                let (kind, flags) = (head[3], head[4]);
                let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                assert_ne!(kind, 7, "GOAWAY: {payload:?}");
                if want == 0 && kind == 4 && flags & 1 == 0 {
                    return body;
                }
                if id == want && kind == 0 {
                    body.extend_from_slice(&payload);
                }
                if id == want && (kind == 0 || kind == 1) && flags & 1 != 0 {
                    return body;
                }
            }
            let mut buf = [0u8; 16384];
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
                .await
                .expect("no frame within 5 s")
                .unwrap();
            assert!(n > 0, "the server closed the connection");
            self.read.extend_from_slice(&buf[..n]);
        }
    }
}

/// While a request is being answered, the server watches its connection for
/// the client closing (hyper's read of `mid_message_detect_eof`): a client
/// that closes gets its request dropped at once, and a request pipelined
/// behind a slow one, in pieces, is read whole and answered after it.
#[tokio::test]
async fn a_request_in_flight_notices_its_client_closing_and_keeps_what_is_pipelined() {
    let server = start(Limits::default());

    let mut gone = TcpStream::connect(server.addr).await.unwrap();
    gone.write_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(HELD_AND_DROPPED.load(Ordering::SeqCst), 0);
    drop(gone);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while HELD_AND_DROPPED.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the request outlived its client by 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The second request comes while the first is in flight, in two pieces.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stream.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stream.write_all(b"st: x\r\n\r\n").await.unwrap();
    let (head, body) = read_response(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"slow done");
    let (head, body) = read_response(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"edge http HTTP/1.1");
}

/// A service that panics in `poll_ready` when its request count is a
/// multiple of three, in `call` itself (before making a future) for
/// `/panic-in-call`, and else answers 200.
#[derive(Clone, Default)]
struct PanicsOutsideItsFuture {
    readied: Arc<AtomicUsize>,
}

impl tower::Service<Request<Body>> for PanicsOutsideItsFuture {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        if self.readied.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
            panic!("boom in poll_ready");
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if request.uri().path() == "/panic-in-call" {
            panic!("boom in call");
        }
        std::future::ready(Ok(Response::new(Body::from("fine"))))
    }
}

/// A panic in the service's `call` or `poll_ready`, not only in its future,
/// is answered 500 and the connection goes on, over either protocol (on
/// HTTP/2 the service is called within the connection's own poll).
#[tokio::test]
async fn a_panic_in_call_or_poll_ready_gets_500_and_the_connection_goes_on() {
    for proto in [Proto::Http1, Proto::H2c] {
        let server = start_serving(Limits::default(), PanicsOutsideItsFuture::default());
        // Requests 1 and 2 are readied; the third panics in poll_ready.
        let paths = ["/", "/panic-in-call", "/", "/"];
        let answers = tokio::time::timeout(
            Duration::from_secs(10),
            on_one_connection(server.addr, proto, &paths),
        )
        .await
        .expect("answered in time");
        assert_eq!(
            answers,
            [(200, "fine"), (500, ""), (500, ""), (200, "fine")].map(|(s, t)| (s, t.to_owned())),
            "{proto:?}"
        );
    }
}

/// GETs `paths` one after another on one connection speaking `proto`: the
/// status of each answer, and its body when it is 200.
async fn on_one_connection(addr: SocketAddr, proto: Proto, paths: &[&str]) -> Vec<(u16, String)> {
    let mut connection = Connection::open(addr, proto).await;
    let mut answers = Vec::new();
    for path in paths {
        let reply = connection
            .send(request("GET", "x", path).body(Full::default()).unwrap())
            .await;
        let text = if reply.status == 200 {
            reply.text()
        } else {
            ""
        };
        answers.push((reply.status, text.to_owned()));
    }
    answers
}

/// A service whose readiness fails every other time it is asked.
#[derive(Clone, Default)]
struct FailsToBeReady {
    asked: Arc<AtomicUsize>,
}

impl tower::Service<Request<Body>> for FailsToBeReady {
    type Response = Response<Body>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Response<Body>, std::io::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), std::io::Error>> {
        if self.asked.fetch_add(1, Ordering::SeqCst) % 2 == 1 {
            return std::task::Poll::Ready(Err(std::io::Error::other("not today")));
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        std::future::ready(Ok(Response::new(Body::from("ready"))))
    }
}

/// A service whose `poll_ready` fails at once is answered 500 for that
/// request, and the connection goes on, over either protocol.
#[tokio::test]
async fn a_failed_readiness_gets_500_and_the_connection_goes_on() {
    for proto in [Proto::Http1, Proto::H2c] {
        let server = start_serving(Limits::default(), FailsToBeReady::default());
        let answers = tokio::time::timeout(
            Duration::from_secs(10),
            on_one_connection(server.addr, proto, &["/", "/", "/"]),
        )
        .await
        .expect("answered in time");
        assert_eq!(
            answers,
            [(200, "ready"), (500, ""), (200, "ready")].map(|(s, t)| (s, t.to_owned())),
            "{proto:?}"
        );
    }
}

/// A service that is ready only 100 ms after each request first asks
/// (each request gets its own clone), and says so with the waker it is given.
#[derive(Clone, Default)]
struct ReadyLater {
    asked: Option<std::time::Instant>,
}

impl tower::Service<Request<Body>> for ReadyLater {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        let wait = Duration::from_millis(100);
        let asked = *self.asked.get_or_insert_with(std::time::Instant::now);
        if asked.elapsed() >= wait {
            return std::task::Poll::Ready(Ok(()));
        }
        let waker = cx.waker().clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            waker.wake();
        });
        std::task::Poll::Pending
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let text = format!("ready for {}", request.uri().path());
        std::future::ready(Ok(Response::new(Body::from(text))))
    }
}

/// A service not ready when its request comes is asked again until it is,
/// and then answers, over either protocol.
#[tokio::test]
async fn a_service_not_ready_at_once_answers_when_it_is() {
    let server = start_serving(Limits::default(), ReadyLater::default());
    for proto in [Proto::Http1, Proto::H2c] {
        let started = std::time::Instant::now();
        let reply = tokio::time::timeout(
            Duration::from_secs(5),
            TestClient::new(proto).get(server.addr, "x", "/later"),
        )
        .await
        .expect("the request waited for good");
        assert_eq!((reply.status, reply.text()), (200, "ready for /later"));
        assert!(started.elapsed() >= Duration::from_millis(100));
    }
}
