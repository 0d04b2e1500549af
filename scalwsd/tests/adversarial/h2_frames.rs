//! HTTP/2 frames built by hand against the `scalwsd` binary: the floods of
//! the last years' HTTP/2 advisories (rapid reset, CONTINUATION, HPACK
//! expansion, PING, SETTINGS and empty DATA), a reader that opens no flow
//! control window, and fields an HTTP/2 client may not send (connection-
//! specific ones, CR, LF or NUL in a value, upper case in a name) that the
//! HTTP/1.1 upstream must never see. Each flood is bounded in count and
//! time; the process's resident memory and CPU time are read from `/proc`
//! before and after.

use std::time::Duration;

use super::h2raw::*;
use super::support::process::{Scalwsd, free_addr};
use super::{RawUpstream, still_serves};

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

async fn gateway(upstream: &RawUpstream, limits: &str) -> (Scalwsd, std::net::SocketAddr) {
    let http = free_addr();
    let yaml = format!(
        r#"
limits: {{ {limits} }}
listeners: [{{ name: http, address: "{http}" }}]
upstreams:
  app: {{ addresses: ["{}"], request_timeout: 5s }}
applications:
  - name: site
    domains: ["*"]
    routes:
      - {{ path: /still, respond: {{ body: alive }} }}
      - {{ path: /, proxy: app }}
"#,
        upstream.addr
    );
    let server = Scalwsd::start(tempfile::tempdir().unwrap(), &yaml, http, None, 1).await;
    (server, http)
}

/// An ordinary HTTP/2 request on a new connection is answered 200.
async fn h2_still_serves(addr: std::net::SocketAddr) {
    let mut h2 = H2Raw::connect(addr, &[]).await;
    h2.write(&get(1, "/still", "ok.test")).await.unwrap();
    let frames = h2
        .until(Duration::from_secs(5), |f| {
            f.kind == HEADERS && f.stream == 1
        })
        .await;
    let status = frames.iter().find_map(Frame::status);
    assert_eq!(status, Some(200), "after the attack: {frames:?}");
    still_serves(addr).await;
}

/// CVE-2023-44487: streams opened and reset at once, many thousands on one
/// connection. The connection is sent GOAWAY long before the last, and
/// only a bounded share of them reach the upstream.
#[tokio::test]
async fn rapid_reset_is_answered_with_goaway() {
    let upstream = RawUpstream::start(OK).await;
    let (server, http) = gateway(&upstream, "").await;
    let before = server.usage();
    let mut h2 = H2Raw::connect(http, &[]).await;
    let (batches, per_batch) = (50u32, 200u32);
    let mut written = 0;
    for batch in 0..batches {
        let mut bytes = Vec::new();
        for i in 0..per_batch {
            let id = 1 + 2 * (batch * per_batch + i);
            bytes.extend(get(id, "/p", "a.test"));
            bytes.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
        }
        if h2.write(&bytes).await.is_err() {
            break;
        }
        written += per_batch;
    }
    assert!(
        h2.goes_away(Duration::from_secs(10)).await,
        "no GOAWAY after {written} reset streams"
    );
    let forwarded = upstream.heads();
    eprintln!("rapid reset: {written} streams written, {forwarded} forwarded");
    assert!(
        forwarded < 1000,
        "{forwarded} of {written} reset streams reached the upstream"
    );
    before.assert_bounded(server.usage(), 64, Duration::from_secs(20), "rapid reset");
    h2_still_serves(http).await;
}

/// CVE-2024-27316 and its kin: a HEADERS frame without END_HEADERS, then
/// CONTINUATION frames that never end. The head is refused at
/// `max_header_bytes`, well before what was sent, and nothing is forwarded.
#[tokio::test]
async fn an_endless_continuation_is_cut() {
    let upstream = RawUpstream::start(OK).await;
    let (server, http) = gateway(&upstream, "max_header_bytes: 16KiB").await;
    let before = server.usage();
    let mut h2 = H2Raw::connect(http, &[]).await;
    h2.write(&frame(HEADERS, 0, 1, &request("GET", "/p", "a.test", &[])))
        .await
        .unwrap();
    let mut block = Vec::new();
    literal(&mut block, b"x-filler", &[b'a'; 4000]);
    let continuation = frame(CONTINUATION, 0, 1, &block);
    // 64 MiB at most, 4 KB a frame.
    let mut sent = 0usize;
    for _ in 0..16_384 {
        // A server that stops reading without closing would block the write.
        match tokio::time::timeout(Duration::from_secs(5), h2.write(&continuation)).await {
            Ok(Ok(())) => sent += continuation.len(),
            _ => break,
        }
    }
    eprintln!("CONTINUATION: {sent} bytes written");
    assert!(sent < 8 << 20, "{sent} bytes of CONTINUATION were read");
    assert!(h2.goes_away(Duration::from_secs(10)).await);
    assert_eq!(upstream.heads(), 0, "a head was forwarded");
    before.assert_bounded(server.usage(), 64, Duration::from_secs(20), "CONTINUATION");
    h2_still_serves(http).await;
}

/// A 4,000-byte field put in the HPACK table once, then named 4,000 times
/// by one-byte references: 4 KB on the wire, 16 MB decoded. Refused at
/// `max_header_bytes` (431 or a reset), never forwarded.
#[tokio::test]
async fn an_hpack_bomb_is_refused() {
    let upstream = RawUpstream::start(OK).await;
    let (server, http) = gateway(&upstream, "max_header_bytes: 32KiB").await;
    let before = server.usage();
    for round in 0..20 {
        let mut h2 = H2Raw::connect(http, &[]).await;
        let mut block = request("GET", "/p", "a.test", &[]);
        indexed_literal(&mut block, b"x-bomb", &[b'b'; 4000]);
        for _ in 0..4000 {
            indexed(&mut block, 62);
        }
        // In frames of 16 KiB, the default maximum frame size.
        let chunks: Vec<&[u8]> = block.chunks(16 * 1024).collect();
        let mut bytes = Vec::new();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let (kind, flags) = match (i, last) {
                (0, true) => (HEADERS, END_HEADERS | END_STREAM),
                (0, false) => (HEADERS, END_STREAM),
                (_, true) => (CONTINUATION, END_HEADERS),
                (_, false) => (CONTINUATION, 0),
            };
            bytes.extend(frame(kind, flags, 1, chunk));
        }
        h2.write(&bytes).await.unwrap();
        let frames = h2
            .until(Duration::from_secs(5), |f| {
                f.stream == 1 && (f.kind == HEADERS || f.kind == RST_STREAM) || f.kind == GOAWAY
            })
            .await;
        let refused = frames
            .iter()
            .any(|f| f.status() == Some(431) || f.kind == RST_STREAM || f.kind == GOAWAY);
        assert!(refused, "round {round}: {frames:?}");
    }
    assert_eq!(upstream.heads(), 0, "a bomb was forwarded");
    before.assert_bounded(server.usage(), 64, Duration::from_secs(20), "HPACK bomb");
    h2_still_serves(http).await;
}

/// PING and SETTINGS each demand an answer; a client that sends a flood of
/// them and reads none must not make the server queue answers without end.
/// Empty DATA frames cost the server work and send it nothing.
#[tokio::test]
async fn ping_settings_and_empty_data_floods_are_bounded() {
    let upstream = RawUpstream::start(OK).await;
    let (server, http) = gateway(&upstream, "").await;
    let before = server.usage();
    let ping = frame(PING, 0, 0, &[7; 8]);
    let settings = frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]);
    for (what, unit) in [("PING", &ping), ("SETTINGS", &settings)] {
        let mut h2 = H2Raw::connect(http, &[]).await;
        let batch: Vec<u8> = unit.repeat(1000);
        // 200,000 frames, or fewer once the server stops reading or closes.
        let mut written = 0;
        for _ in 0..200 {
            match tokio::time::timeout(Duration::from_secs(2), h2.write(&batch)).await {
                Ok(Ok(())) => written += 1000,
                _ => break,
            }
        }
        eprintln!("{what}: {written} frames written");
        drop(h2);
        before.assert_bounded(server.usage(), 64, Duration::from_secs(20), what);
    }
    // A POST whose body is 100,000 empty DATA frames, then a real end.
    let mut h2 = H2Raw::connect(http, &[]).await;
    h2.write(&frame(
        HEADERS,
        END_HEADERS,
        1,
        &request("POST", "/p", "a.test", &[]),
    ))
    .await
    .unwrap();
    let empty = frame(DATA, 0, 1, &[]).repeat(1000);
    for _ in 0..100 {
        if h2.write(&empty).await.is_err() {
            break;
        }
    }
    let _ = h2.write(&frame(DATA, END_STREAM, 1, b"end")).await;
    let _ = h2.until(Duration::from_secs(5), |f| f.stream == 1).await;
    before.assert_bounded(server.usage(), 64, Duration::from_secs(20), "empty DATA");
    h2_still_serves(http).await;
}

/// A client that opens no flow-control window (initial window 0) and asks
/// for a large response: the server sends no DATA, buffers a bounded
/// amount, and once the response has waited `send_timeout` with nothing
/// written (checked at least every `header_read_timeout`) sends GOAWAY and
/// closes the connection a grace period later. Before, a client that kept
/// the connection alive (a PING now and then) held the stream, and the
/// upstream connection behind it, for as long as it liked.
#[tokio::test]
async fn a_zero_window_reader_is_cut() {
    let body = vec![b'z'; 8 << 20];
    let mut answer =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    answer.extend(body);
    let upstream = RawUpstream::start(answer.leak()).await;
    let (server, http) = gateway(&upstream, "send_timeout: 1s, header_read_timeout: 1s").await;
    let before = server.usage();
    let mut h2 = H2Raw::connect(http, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]).await;
    h2.write(&get(1, "/big", "a.test")).await.unwrap();
    let frames = h2
        .until(Duration::from_secs(8), |f| {
            f.kind == GOAWAY || (f.stream == 1 && f.kind == RST_STREAM)
        })
        .await;
    let data: usize = frames
        .iter()
        .filter(|f| f.kind == DATA)
        .map(|f| f.payload.len())
        .sum();
    assert_eq!(data, 0, "DATA past a zero window");
    // GOAWAY first; then, the stream still stuck, the connection is closed.
    let _ = h2.until(Duration::from_secs(5), |_| false).await;
    assert!(
        h2.closed || frames.iter().any(|f| f.stream == 1 && f.kind == RST_STREAM),
        "a zero-window reader held its stream: {:?}",
        frames.iter().map(|f| f.kind).collect::<Vec<_>>()
    );
    before.assert_bounded(server.usage(), 64, Duration::from_secs(20), "zero window");
    h2_still_serves(http).await;
}

/// Fields RFC 9113 8.2 makes a request malformed: each gets a stream reset
/// (or 400) and nothing of it reaches the HTTP/1.1 upstream, where a
/// `Transfer-Encoding` or a CR LF in a value would be a smuggled request.
#[tokio::test]
async fn fields_an_h2_client_may_not_send_are_never_forwarded() {
    let upstream = RawUpstream::start(OK).await;
    let (_server, http) = gateway(&upstream, "").await;
    let cases: &[(&[u8], &[u8])] = &[
        (b"connection", b"close"),
        (b"transfer-encoding", b"chunked"),
        (b"keep-alive", b"timeout=5"),
        (b"proxy-connection", b"keep-alive"),
        (b"upgrade", b"websocket"),
        (b"te", b"gzip"),
        (b"x-smuggle", b"a\r\nx-injected: 1"),
        (b"x-smuggle", b"a\nx-injected: 1"),
        (b"x-smuggle", b"a\rx-injected: 1"),
        (b"x-smuggle", b"a\0x-injected"),
        (b"x-injected:", b"1"),
        (b"X-Injected", b"1"),
        (b"x-injected\r\nx", b"1"),
        (b"", b"x-injected"),
    ];
    let mut h2 = H2Raw::connect(http, &[]).await;
    let mut id = 1;
    for (name, value) in cases {
        let block = request("GET", "/p", "a.test", &[(name, value)]);
        if h2
            .write(&frame(HEADERS, END_HEADERS | END_STREAM, id, &block))
            .await
            .is_err()
        {
            // The server may close the connection instead: go on on a new one.
            h2 = H2Raw::connect(http, &[]).await;
            h2.write(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &block))
                .await
                .unwrap();
            id = 1;
        }
        let frames = h2
            .until(Duration::from_secs(5), |f| {
                f.stream == id || f.kind == GOAWAY
            })
            .await;
        let answer = frames.iter().find(|f| f.stream == id || f.kind == GOAWAY);
        let refused = answer
            .is_some_and(|f| f.kind == RST_STREAM || f.kind == GOAWAY || f.status() == Some(400))
            || answer.is_none();
        assert!(
            refused,
            "{:?}: {:?} was answered {:?}",
            String::from_utf8_lossy(name),
            String::from_utf8_lossy(value),
            answer
        );
        if answer.is_none_or(|f| f.kind == GOAWAY) {
            h2 = H2Raw::connect(http, &[]).await;
            id = 1;
        } else {
            id += 2;
        }
    }
    let seen = upstream.seen();
    assert_eq!(upstream.heads(), 0, "forwarded:\n{seen}");
    // `te: trailers` is the one `te` allowed, and is not forwarded either.
    h2.write(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        id,
        &request("GET", "/p", "a.test", &[(b"te", b"trailers")]),
    ))
    .await
    .unwrap();
    let frames = h2.until(Duration::from_secs(5), |f| f.stream == id).await;
    assert_eq!(frames.iter().find_map(Frame::status), Some(200));
    h2_still_serves(http).await;
}

/// A body longer than its `content-length` (RFC 9113 8.1.1): the stream is
/// reset, and the bytes past the declared length never reach the upstream,
/// where they would be the start of another request.
#[tokio::test]
async fn a_body_longer_than_its_content_length_is_not_forwarded() {
    let upstream = RawUpstream::start(OK).await;
    let (_server, http) = gateway(&upstream, "").await;
    let mut h2 = H2Raw::connect(http, &[]).await;
    let block = request("POST", "/p", "a.test", &[(b"content-length", b"5")]);
    let mut bytes = frame(HEADERS, END_HEADERS, 1, &block);
    bytes.extend(frame(
        DATA,
        END_STREAM,
        1,
        b"12345GET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n",
    ));
    h2.write(&bytes).await.unwrap();
    let frames = h2
        .until(Duration::from_secs(5), |f| {
            f.stream == 1 && f.kind == RST_STREAM || f.kind == GOAWAY
        })
        .await;
    assert!(
        frames
            .iter()
            .any(|f| f.kind == RST_STREAM || f.kind == GOAWAY),
        "{frames:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = upstream.seen();
    assert!(!seen.contains("smuggled"), "forwarded:\n{seen}");
    assert!(upstream.heads() <= 1, "forwarded:\n{seen}");
    h2_still_serves(http).await;
}

/// One stream with no window beside streams that move: the stalled stream
/// is the client's choice (a paused download, a stream it reads later), and
/// the connection is not closed while it writes for the others. Once
/// nothing moves for `send_timeout`, it is.
#[tokio::test]
async fn a_stalled_stream_beside_moving_ones_keeps_the_connection() {
    let body = vec![b'z'; 1 << 20];
    let mut answer =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    answer.extend(body);
    let upstream = RawUpstream::start(answer.leak()).await;
    let (_server, http) = gateway(&upstream, "send_timeout: 1s, header_read_timeout: 1s").await;
    let mut h2 = H2Raw::connect(http, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]).await;
    h2.write(&get(1, "/big", "a.test")).await.unwrap();
    // Eight small requests, 400 ms apart: 3.2 s, past send_timeout.
    for i in 0..8u32 {
        let id = 3 + 2 * i;
        let mut bytes = get(id, "/still", "ok.test");
        bytes.extend(frame(WINDOW_UPDATE, 0, id, &1000u32.to_be_bytes()));
        h2.write(&bytes).await.unwrap();
        let frames = h2
            .until(Duration::from_secs(5), |f| {
                f.stream == id && f.kind == DATA || f.kind == GOAWAY
            })
            .await;
        assert!(
            frames
                .iter()
                .any(|f| f.stream == id && f.payload == b"alive"),
            "request {i}: {:?}",
            frames
                .iter()
                .map(|f| (f.kind, f.stream))
                .collect::<Vec<_>>()
        );
        assert!(
            !frames.iter().any(|f| f.kind == GOAWAY),
            "GOAWAY while streams moved"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    // Then only the stalled stream: GOAWAY and the close follow.
    let _ = h2.until(Duration::from_secs(8), |_| false).await;
    assert!(
        h2.closed,
        "a connection with nothing moving but a stalled stream stayed open"
    );
}
