//! The exchange against servers on loopback that answer set bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::poll_fn;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::{Request, Response};
use http_body::Frame;
use http_body_util::StreamBody;
use scalws_core::{Body, BoxError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A connection to a server on loopback that reads a request until it
/// ends with `until`, answers `answer`, and closes if `close`. Gives
/// back what the server received.
async fn upstream(
    until: &'static str,
    answer: &'static [u8],
    close: bool,
) -> (Box<Wire>, tokio::task::JoinHandle<String>) {
    upstream_in_pieces(until, vec![answer], close).await
}

/// As `upstream`, with the answer written in `pieces`, a pause after
/// each, so that the client reads it in as many parts.
async fn upstream_in_pieces(
    until: &'static str,
    pieces: Vec<&'static [u8]>,
    close: bool,
) -> (Box<Wire>, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.ends_with(until.as_bytes()) {
            let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buf))
                .await
                .expect("the request within 5 s")
                .unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        for piece in pieces {
            // The client may have given up (a refused head): not an error here.
            if socket.write_all(piece).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        if close {
            let _ = socket.shutdown().await;
        } else {
            // Held open until the client is done.
            let _ = socket.read(&mut buf).await;
        }
        String::from_utf8(got).unwrap()
    });
    let client = TcpStream::connect(addr).await.unwrap();
    (
        Box::new(Wire::new(UpstreamStream::Plain(client), 1024)),
        server,
    )
}

struct Answer {
    response: Response<()>,
    body: Vec<u8>,
    trailers: Option<HeaderMap>,
    reusable: bool,
}

async fn exchange(wire: Box<Wire>, request: Request<Body>) -> Result<Answer, WireError> {
    let (head, body) = request.into_parts();
    let mut exchange = Exchange::start(wire, &head, body, None).map_err(|(_, e)| e)?;
    let response = poll_fn(|cx| exchange.poll_head(cx)).await?;
    let mut body = Vec::new();
    let mut trailers = None;
    while let Some(frame) = poll_fn(|cx| exchange.poll_body(cx)).await {
        match frame?.into_data() {
            Ok(data) => body.extend_from_slice(&data),
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    Ok(Answer {
        response,
        body,
        trailers,
        reusable: exchange.into_reusable().is_some(),
    })
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header("host", "a.test")
        .body(Body::empty())
        .unwrap()
}

fn streamed(parts: &[&'static str], trailers: Option<HeaderMap>) -> Body {
    let mut frames: Vec<Result<Frame<Bytes>, BoxError>> = parts
        .iter()
        .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
        .collect();
    frames.extend(trailers.map(|t| Ok(Frame::trailers(t))));
    Body::new(StreamBody::new(futures_util::stream::iter(frames)))
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[tokio::test]
async fn requests_are_framed_as_hyper_framed_them() {
    let cases: Vec<(&str, Request<Body>, &'static str, &str)> = vec![
        (
            "an empty GET",
            get("/x?y"),
            "\r\n\r\n",
            "GET /x?y HTTP/1.1\r\nhost: a.test\r\n\r\n",
        ),
        (
            "a body of known size gets its length",
            Request::post("/").body(Body::full("hello")).unwrap(),
            "hello",
            "POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
        ),
        (
            "a declared length is kept and sent exactly",
            Request::put("/")
                .header("content-length", "5")
                .body(streamed(&["he", "llo"], None))
                .unwrap(),
            "hello",
            "PUT / HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
        ),
        (
            "an unknown length is chunked, empty frames skipped",
            Request::post("/")
                .body(streamed(&["ab", "", "cde"], None))
                .unwrap(),
            "0\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n",
        ),
        (
            "a coding not ending in chunked gets chunked, and the length goes",
            Request::post("/")
                .header("transfer-encoding", "gzip")
                .header("content-length", "3")
                .body(streamed(&["abc"], None))
                .unwrap(),
            "0\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            "only declared trailers that may be trailers go",
            Request::post("/")
                .header("trailer", "x-sum, content-type")
                .body(streamed(
                    &["abc"],
                    Some({
                        let mut t = HeaderMap::new();
                        t.insert("x-sum", HeaderValue::from_static("7"));
                        t.insert("x-other", HeaderValue::from_static("1"));
                        t.insert("content-type", HeaderValue::from_static("text/plain"));
                        t
                    }),
                ))
                .unwrap(),
            "\r\n\r\n3\r\nabc\r\n0\r\nx-sum: 7\r\n\r\n",
            "POST / HTTP/1.1\r\ntrailer: x-sum, content-type\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-sum: 7\r\n\r\n",
        ),
        (
            "a GET of unknown length goes without its body",
            Request::get("/").body(streamed(&["abc"], None)).unwrap(),
            "\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
        ),
        (
            "an ended body drops its coding and keeps a zero length",
            Request::post("/")
                .header("content-length", "0")
                .header("transfer-encoding", "chunked")
                .body(Body::empty())
                .unwrap(),
            "\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
        ),
    ];
    for (what, request, until, expected) in cases {
        let (wire, server) = upstream(until, OK, false).await;
        let answer = exchange(wire, request).await.unwrap();
        assert_eq!(answer.body, b"ok", "{what}");
        assert!(answer.reusable, "{what}");
        // The connection was dropped with the answer: the server is done.
        assert_eq!(server.await.unwrap(), expected, "{what}");
    }
}

/// What a response should give: status, body, trailer `x-sum`, reuse.
struct Expect {
    status: u16,
    body: &'static str,
    x_sum: Option<&'static str>,
    reusable: bool,
}

const fn ok(status: u16, body: &'static str, reusable: bool) -> Expect {
    Expect {
        status,
        body,
        x_sum: None,
        reusable,
    }
}

#[tokio::test]
async fn responses_are_framed_by_rfc_9112() {
    // What, the method, the answer's pieces, whether the upstream closes after.
    type Case = (&'static str, &'static str, Vec<&'static [u8]>, bool, Expect);
    let cases: Vec<Case> = vec![
        (
            "a length read in several parts",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 11\r\n\r\nhello", b" world"],
            false,
            ok(200, "hello world", true),
        ),
        (
            "chunks cut anywhere, with extensions and trailers",
            "GET",
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r",
                b"\nhello\r",
                b"\n6 \r\n world\r\n0\r\nx-sum: 42\r",
                b"\n\r\n",
            ],
            false,
            Expect {
                status: 200,
                body: "hello world",
                x_sum: Some("42"),
                reusable: true,
            },
        ),
        (
            "1xx answers before the answer are skipped",
            "GET",
            vec![
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
            ],
            false,
            ok(201, "x", true),
        ),
        (
            "no body after a HEAD, whatever its length says",
            "HEAD",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"],
            false,
            ok(200, "", true),
        ),
        (
            "no body in a 204",
            "GET",
            vec![b"HTTP/1.1 204 No Content\r\n\r\n"],
            false,
            ok(204, "", true),
        ),
        (
            "no body in a 304, whatever its length says",
            "GET",
            vec![b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"],
            false,
            ok(304, "", true),
        ),
        (
            "neither field: the body ends with the connection",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\n\r\nabc", b"def"],
            true,
            ok(200, "abcdef", false),
        ),
        (
            "Connection: close is not reused",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok"],
            false,
            ok(200, "ok", false),
        ),
        (
            "a later keep-alive does not undo a close",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"],
            false,
            ok(200, "ok", false),
        ),
        (
            "HTTP/1.0 is not reused, even with keep-alive (the next request could be chunked)",
            "GET",
            vec![b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"],
            false,
            ok(200, "ok", false),
        ),
        (
            "leading zeros in chunk sizes",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000000002\r\nok\r\n00\r\n\r\n"],
            false,
            ok(200, "ok", true),
        ),
        (
            "a length of twenty digits, most of them zeros",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 00000000000000000002\r\n\r\nok"],
            false,
            ok(200, "ok", true),
        ),
        (
            "HTTP/1.0 without keep-alive is not",
            "GET",
            vec![b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"],
            false,
            ok(200, "ok", false),
        ),
        (
            "chunks win over a length, and the connection is not trusted again",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
            false,
            ok(200, "ok", false),
        ),
        (
            "a coding not ending in chunked reads to the close",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz"],
            true,
            ok(200, "zz", false),
        ),
        (
            "equal lengths in a list are one length",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok"],
            false,
            ok(200, "ok", true),
        ),
        (
            "bytes after the response: the connection is not reused",
            "GET",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"],
            false,
            ok(200, "ok", false),
        ),
    ];
    for (what, method, pieces, close, expect) in cases {
        let (wire, _server) = upstream_in_pieces("\r\n\r\n", pieces, close).await;
        let request = Request::builder()
            .method(method)
            .uri("/")
            .header("host", "a.test")
            .body(Body::empty())
            .unwrap();
        let answer = exchange(wire, request)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(answer.response.status().as_u16(), expect.status, "{what}");
        assert_eq!(
            String::from_utf8(answer.body).unwrap(),
            expect.body,
            "{what}"
        );
        let x_sum = answer.trailers.as_ref().and_then(|t| t.get("x-sum"));
        assert_eq!(x_sum.map(|v| v.to_str().unwrap()), expect.x_sum, "{what}");
        assert_eq!(answer.reusable, expect.reusable, "{what}");
    }
}

#[tokio::test]
async fn the_response_head_keeps_its_fields_and_drops_a_length_beside_chunks() {
    let (wire, _server) = upstream(
        "\r\n\r\n",
        b"HTTP/1.1 299 Fine Thanks\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        false,
    )
    .await;
    let answer = exchange(wire, get("/")).await.unwrap();
    let head = &answer.response;
    let values: Vec<_> = head.headers().get_all("x-a").iter().collect();
    assert_eq!(values, ["1", "2"]);
    assert!(head.headers().get("content-length").is_none());
    assert_eq!(head.headers()["transfer-encoding"], "chunked");
    assert_eq!(
        head.extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| r.as_bytes()),
        Some(&b"Fine Thanks"[..])
    );
}

/// `Connection: keep-alive` or `close` alone is the connection's business,
/// not the answer's field; a `Connection` that lists more is kept whole.
#[tokio::test]
async fn a_lone_keep_alive_or_close_is_not_among_the_fields() {
    for (connection, kept, reusable) in [
        ("keep-alive", false, true),
        ("Keep-Alive", false, true),
        ("close", false, false),
        ("keep-alive, X-Hop", true, true),
        ("close, X-Hop", true, false),
        ("upgrade", true, true),
    ] {
        let answer = format!(
            "HTTP/1.1 200 OK\r\nConnection: {connection}\r\nX-Hop: 1\r\nContent-Length: 2\r\n\r\nok"
        );
        let answer: &'static [u8] = Box::leak(answer.into_bytes().into_boxed_slice());
        let (wire, _server) = upstream("\r\n\r\n", answer, false).await;
        let answer = exchange(wire, get("/")).await.unwrap();
        let headers = answer.response.headers();
        assert_eq!(
            headers.get("connection").map(|v| v.to_str().unwrap()),
            kept.then_some(connection),
            "{connection}"
        );
        assert_eq!(headers["x-hop"], "1", "{connection}");
        assert_eq!(answer.body, b"ok", "{connection}");
        assert_eq!(answer.reusable, reusable, "{connection}");
    }
}

#[tokio::test]
async fn bad_responses_are_refused_with_their_reason() {
    let long_head: &'static [u8] = {
        let mut head = b"HTTP/1.1 200 OK\r\nx-long: ".to_vec();
        head.extend(std::iter::repeat_n(b'a', 1100));
        head.extend_from_slice(b"\r\n\r\n");
        head.leak()
    };
    let many_fields: &'static [u8] = {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..101 {
            head.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        head.leak()
    };
    let cases: Vec<(&str, Vec<&'static [u8]>, bool, &str)> = vec![
        (
            "garbage",
            vec![b"HELLO THERE\r\n\r\n"],
            false,
            "invalid response from the upstream: not an HTTP/1.1 response head",
        ),
        (
            "a head over the limit",
            vec![long_head],
            false,
            "invalid response from the upstream: a response head over the size limit",
        ),
        (
            "too many fields",
            vec![many_fields],
            false,
            "invalid response from the upstream: more than 100 header fields",
        ),
        (
            "lengths that differ",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
            false,
            "invalid response from the upstream: an invalid Content-Length",
        ),
        (
            "a length in a list that differs",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok"],
            false,
            "invalid response from the upstream: an invalid Content-Length",
        ),
        (
            "a length that is not digits",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"],
            false,
            "invalid response from the upstream: an invalid Content-Length",
        ),
        (
            "HTTP/1.0 with a coding",
            vec![b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
            false,
            "invalid response from the upstream: Transfer-Encoding in an HTTP/1.0 response",
        ),
        (
            "a folded field",
            vec![b"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n"],
            false,
            "invalid response from the upstream: not an HTTP/1.1 response head",
        ),
        (
            "a chunk size that is not hex",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
            false,
            "invalid response from the upstream: an invalid chunk size line",
        ),
        (
            "a chunk size of 17 significant digits",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"],
            false,
            "invalid response from the upstream: an invalid chunk size line",
        ),
        (
            "a length past 64 bits",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\nok"],
            false,
            "invalid response from the upstream: an invalid Content-Length",
        ),
        (
            "a chunk size line ended by LF alone",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n"],
            false,
            "invalid response from the upstream: an invalid chunk size line",
        ),
        (
            "chunk data longer than its size",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokk\r\n0\r\n\r\n"],
            false,
            "invalid response from the upstream: chunk data not ended by CRLF",
        ),
        (
            "a body cut short",
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"],
            true,
            "upstream response body cut short",
        ),
        (
            "chunks cut short",
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"],
            true,
            "upstream response body cut short",
        ),
        (
            "a close before the head",
            vec![b"HTTP/1.1 200 OK\r\nContent-"],
            true,
            "upstream closed the connection before the response head",
        ),
        (
            "a close with nothing",
            vec![],
            true,
            "upstream closed the connection before the response head",
        ),
    ];
    for (what, pieces, close, message) in cases {
        let (wire, _server) = upstream_in_pieces("\r\n\r\n", pieces, close).await;
        let error = match exchange(wire, get("/")).await {
            Ok(_) => panic!("{what}: answered"),
            Err(error) => error,
        };
        assert_eq!(error.to_string(), message, "{what}");
    }
}

#[tokio::test]
async fn trailers_past_the_head_limit_are_refused() {
    let trailers: &'static [u8] = {
        let mut body =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-long: ".to_vec();
        body.extend(std::iter::repeat_n(b'a', 1100));
        body.leak()
    };
    let (wire, _server) = upstream("\r\n\r\n", trailers, false).await;
    let error = exchange(wire, get("/")).await.err().expect("refused");
    assert_eq!(
        error.to_string(),
        "invalid response from the upstream: trailers over the head size limit"
    );
    assert!(error.is_final());
}

/// Whether `wire` is seen as unusable within a second (what the upstream
/// did takes a moment to reach this socket).
async fn becomes_unusable(wire: &mut Wire) -> bool {
    for _ in 0..100 {
        if wire.is_unusable() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn an_idle_connection_is_unusable_once_closed_or_sent_to() {
    // Open and quiet: usable.
    let (mut wire, server) = upstream("\r\n\r\n", OK, false).await;
    assert!(!wire.is_unusable());
    drop(wire);
    server.abort();

    // Closed by the upstream.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (socket, _) = listener.accept().await.unwrap();
    drop(socket);
    let mut wire = Wire::new(UpstreamStream::Plain(client), 1024);
    assert!(
        becomes_unusable(&mut wire).await,
        "a closed connection is seen as unusable"
    );

    // Sent bytes nobody asked for.
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (mut socket, _) = listener.accept().await.unwrap();
    socket
        .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        .await
        .unwrap();
    let mut wire = Wire::new(UpstreamStream::Plain(client), 1024);
    assert!(
        becomes_unusable(&mut wire).await,
        "unasked-for bytes make a connection unusable"
    );
}

#[tokio::test]
async fn a_body_that_does_not_match_its_length_is_refused() {
    let cases: Vec<(&str, Body, &str)> = vec![
        (
            "longer",
            streamed(&["abc", "def"], None),
            "request not sendable: a body longer than its Content-Length",
        ),
        (
            "shorter",
            streamed(&["ab"], None),
            "request not sendable: a body shorter than its Content-Length",
        ),
    ];
    for (what, body, message) in cases {
        let (wire, _server) = upstream("never", OK, false).await;
        let request = Request::post("/")
            .header("content-length", "4")
            .body(body)
            .unwrap();
        let error = exchange(wire, request)
            .await
            .err()
            .unwrap_or_else(|| panic!("{what}: sent"));
        assert_eq!(error.to_string(), message, "{what}");
        assert!(error.is_final(), "{what}");
    }
}

/// A connection to a server on loopback that answers each request head it
/// reads (bodiless requests) with the next of `answers`, in turn.
async fn answering_in_turn(answers: &[&'static [u8]]) -> (Box<Wire>, tokio::task::JoinHandle<()>) {
    let answers = answers.to_vec();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        for answer in answers {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.ends_with(b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed before a request");
                got.extend_from_slice(&buf[..n]);
            }
            socket.write_all(answer).await.unwrap();
        }
    });
    let client = TcpStream::connect(addr).await.unwrap();
    (
        Box::new(Wire::new(UpstreamStream::Plain(client), 1024)),
        server,
    )
}

/// Two requests on one connection, the first's header map recycled for the
/// second answer's head (as `http1` does): each answer has its own fields
/// and nothing of the request's or the answer before.
#[tokio::test]
async fn a_recycled_header_map_carries_nothing_into_the_next_answer() {
    let (mut wire, server) = answering_in_turn(&[
        b"HTTP/1.1 200 OK\r\nX-First: 1\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 201 Created\r\nX-Second: 2\r\nContent-Length: 0\r\n\r\n",
    ])
    .await;
    let mut heads = Vec::new();
    for header in ["x-request-one", "x-request-two"] {
        let (head, body) = Request::get("/")
            .header("host", "a.test")
            .header(header, "sent")
            .body(Body::empty())
            .unwrap()
            .into_parts();
        let mut exchange = Exchange::start(wire, &head, body, None)
            .map_err(|(_, e)| e)
            .unwrap();
        let response = poll_fn(|cx| exchange.poll_head(cx)).await.unwrap();
        exchange.recycle(head.headers);
        while let Some(frame) = poll_fn(|cx| exchange.poll_body(cx)).await {
            frame.unwrap();
        }
        heads.push(response);
        wire = exchange
            .into_reusable()
            .expect("reusable after a whole answer");
    }
    server.await.unwrap();
    let names = |response: &Response<()>| -> Vec<String> {
        response.headers().keys().map(|k| k.to_string()).collect()
    };
    assert_eq!(names(&heads[0]), ["x-first", "content-length"]);
    assert_eq!(heads[1].status(), 201);
    assert_eq!(names(&heads[1]), ["x-second", "content-length"]);
    assert_eq!(heads[1].headers()["content-length"], "0");
}

/// Answers on one connection whose fields come at the same places with
/// the names in another case, with another name of the same length, and
/// with more fields than the answer before: each answer's names are its
/// own (the connection remembers the last head's names by place).
#[tokio::test]
async fn field_names_remembered_by_place_are_each_answers_own() {
    let answers: [&'static [u8]; 4] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: a\r\nX-Ab: 1\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nCONTENT-TYPE: b\r\nX-AC: 2\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-type: c\r\nx-ab: 3\r\nContent-Length: 0\r\nX-More: 4\r\nX-Most: 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    ];
    let (mut wire, server) = answering_in_turn(&answers).await;
    let mut fields = Vec::new();
    for _ in answers {
        let (head, body) = get("/").into_parts();
        let mut exchange = Exchange::start(wire, &head, body, None)
            .map_err(|(_, e)| e)
            .unwrap();
        let response = poll_fn(|cx| exchange.poll_head(cx)).await.unwrap();
        while let Some(frame) = poll_fn(|cx| exchange.poll_body(cx)).await {
            frame.unwrap();
        }
        wire = exchange
            .into_reusable()
            .expect("reusable after a whole answer");
        fields.push(
            response
                .headers()
                .iter()
                .map(|(name, value)| format!("{name}={}", value.to_str().unwrap()))
                .collect::<Vec<_>>(),
        );
    }
    server.await.unwrap();
    assert_eq!(fields[0], ["content-type=a", "x-ab=1", "content-length=0"]);
    assert_eq!(fields[1], ["content-type=b", "x-ac=2", "content-length=0"]);
    assert_eq!(
        fields[2],
        [
            "content-type=c",
            "x-ab=3",
            "content-length=0",
            "x-more=4",
            "x-most=5"
        ]
    );
    assert_eq!(fields[3], ["content-length=0"]);
}

/// The forwarding fields as the wire writes them into the head (the
/// client's own lines left out, `X-Forwarded-For` joined) are what
/// `Forwarding::apply` would put in the map, for every mix of what the
/// client sent and what the proxy knows: an `http1` upstream gets the same
/// fields as every other way up.
#[tokio::test]
async fn the_head_carries_the_forwarding_fields_the_map_would_hold() {
    use crate::upstream::Forwarding;

    let clients: [&[(&str, &[u8])]; 6] = [
        &[],
        &[("accept", b"*/*")],
        &[("x-forwarded-for", b"10.0.0.1"), ("accept", b"*/*")],
        &[
            ("x-forwarded-for", b"10.0.0.1"),
            ("x-forwarded-for", b"caf\xc3\xa9"),
            ("x-forwarded-for", b"10.0.0.2"),
        ],
        &[("x-forwarded-for", b"\xff")],
        &[
            ("x-forwarded-host", b"evil.example"),
            ("x-forwarded-proto", b"gopher"),
            ("x-forwarded-host", b"more.example"),
        ],
    ];
    // Heads are only written into the connection's buffer, never sent.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    for client in clients {
        for peer in [None, Some("192.0.2.7")] {
            for host in [None, Some("app.example.com")] {
                let (mut head, ()) = Request::get("/")
                    .header("host", "app.example.com")
                    .body(())
                    .unwrap()
                    .into_parts();
                for (name, value) in client {
                    head.headers
                        .append(*name, HeaderValue::from_bytes(value).unwrap());
                }
                let forwarding = Forwarding {
                    peer: peer.map(HeaderValue::from_static),
                    scheme: "http",
                    host: host.map(HeaderValue::from_static),
                };
                let mut applied = head.headers.clone();
                forwarding.apply(&mut applied);

                let client_side = TcpStream::connect(addr).await.unwrap();
                let wire = Box::new(Wire::new(UpstreamStream::Plain(client_side), 1024));
                let Ok(exchange) = Exchange::start(wire, &head, Body::empty(), Some(&forwarding))
                else {
                    panic!("the head could not be written");
                };
                let mut fields = [httparse::EMPTY_HEADER; 16];
                let mut parsed = httparse::Request::new(&mut fields);
                assert!(parsed.parse(&exchange.wire.out).unwrap().is_complete());
                let mut written = HeaderMap::new();
                for field in parsed.headers.iter() {
                    written.append(
                        http::HeaderName::from_bytes(field.name.as_bytes()).unwrap(),
                        HeaderValue::from_bytes(field.value).unwrap(),
                    );
                }
                let context = format!("client {client:?}, peer {peer:?}, host {host:?}");
                for name in applied.keys().chain(written.keys()) {
                    let lines = |map: &HeaderMap| -> Vec<Vec<u8>> {
                        map.get_all(name)
                            .iter()
                            .map(|v| v.as_bytes().to_vec())
                            .collect()
                    };
                    assert_eq!(lines(&written), lines(&applied), "{name}: {context}");
                }
            }
        }
    }
}
