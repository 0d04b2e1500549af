//! HTTP/3 built by hand on QUIC streams (RFC 9114 frames, RFC 9204 field
//! lines) against the binary: a field section past `max_header_bytes`, a
//! reference to a QPACK dynamic table the server never allowed (h3 0.0.8
//! does not check an encoded Required Insert Count against a zero capacity,
//! RFC 9204 4.5.1.1, but a field line that names a dynamic entry fails),
//! `:protocol` where RFC 8441 forbids it, and floods
//! of streams opened and reset at once or never given a head (ended at
//! `header_read_timeout`). Each is
//! refused without forwarding anything, and the process's resident memory
//! and CPU time, read from `/proc`, stay bounded.

use std::time::Duration;

use test_support::tls::{TestCa, quic_connection};

use super::support::process::{Scalwsd, free_addr};
use super::{RawUpstream, still_serves};

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// A QUIC variable-length integer (RFC 9000 16).
fn varint(out: &mut Vec<u8>, value: u64) {
    match value {
        0..=63 => out.push(value as u8),
        64..=16383 => out.extend_from_slice(&(0x4000 | value as u16).to_be_bytes()),
        16384..=1_073_741_823 => out.extend_from_slice(&(0x8000_0000 | value as u32).to_be_bytes()),
        _ => out.extend_from_slice(&(0xc000_0000_0000_0000 | value).to_be_bytes()),
    }
}

/// An HPACK-style integer with an `n`-bit prefix (RFC 7541 5.1, as QPACK uses it).
fn prefixed(out: &mut Vec<u8>, high: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// A literal field line with a literal name (RFC 9204 4.5.6), no Huffman.
fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    prefixed(out, 0x20, 3, name.len());
    out.extend_from_slice(name);
    prefixed(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// A HEADERS frame: `prefix` (the encoded field section prefix), then the
/// request's pseudo-fields and `fields` as literals.
fn headers(prefix: [u8; 2], fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    headers_then(prefix, fields, &[])
}

/// [`headers`], then `tail`: field lines as raw bytes.
fn headers_then(prefix: [u8; 2], fields: &[(&[u8], &[u8])], tail: &[u8]) -> Vec<u8> {
    let mut block = prefix.to_vec();
    literal(&mut block, b":method", b"GET");
    literal(&mut block, b":scheme", b"https");
    literal(&mut block, b":authority", b"a.test");
    literal(&mut block, b":path", b"/p");
    for (name, value) in fields {
        literal(&mut block, name, value);
    }
    block.extend_from_slice(tail);
    let mut frame = Vec::new();
    varint(&mut frame, 0x01);
    varint(&mut frame, block.len() as u64);
    frame.extend(block);
    frame
}

/// No dynamic-table state: Required Insert Count 0, Base 0.
const STATIC_ONLY: [u8; 2] = [0x00, 0x00];

async fn gateway(
    upstream: &RawUpstream,
    dir: &tempfile::TempDir,
) -> (Scalwsd, std::net::SocketAddr, std::net::SocketAddr) {
    let (http, quic) = (free_addr(), free_addr());
    let yaml = format!(
        r#"
limits: {{ max_header_bytes: 16KiB, header_read_timeout: 1s, h2_max_concurrent_streams: 32 }}
listeners:
  - {{ name: http, address: "{http}" }}
  - {{ name: quic, address: "{quic}", protocol: http3, tls: {{ certificates: [ {{ cert: {dir}/a.pem, key: {dir}/a.key }} ] }} }}
upstreams:
  app: {{ addresses: ["{}"] }}
applications:
  - name: site
    domains: ["*"]
    routes:
      - {{ path: /still, respond: {{ body: alive }} }}
      - {{ path: /, proxy: app }}
"#,
        upstream.addr,
        dir = dir.path().display()
    );
    let server = Scalwsd::start(tempfile::tempdir().unwrap(), &yaml, http, None, 1).await;
    (server, http, quic)
}

/// Opens the client's control stream (a SETTINGS frame, nothing set).
async fn control(quic: &quinn::Connection) -> quinn::SendStream {
    let mut stream = quic.open_uni().await.unwrap();
    stream.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
    stream
}

/// Sends `frame` on a new request stream and reads the answer: `Some(200)`
/// when the response's field section starts with the static `:status 200`,
/// `Some(0)` for another answer, `None` when the stream or connection was
/// reset or closed first.
async fn exchange(quic: &quinn::Connection, frame: &[u8]) -> Option<u16> {
    let (mut send, mut recv) = quic.open_bi().await.ok()?;
    send.write_all(frame).await.ok()?;
    send.finish().ok()?;
    let answer = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 20)).await;
    let bytes = answer.ok()?.ok()?;
    // Frame type, length, then the 2-byte section prefix and the first field line.
    (bytes.len() > 4 && bytes[0] == 0x01).then(|| if bytes.get(4) == Some(&0xd9) { 200 } else { 0 })
}

#[tokio::test]
async fn hand_built_http3_is_refused_and_bounded() {
    let upstream = RawUpstream::start(OK).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    let (server, http, addr) = gateway(&upstream, &dir).await;

    // An ordinary request works, so the refusals below are the server's.
    let quic = quic_connection(&ca, addr, "a.test").await;
    let _control = control(&quic).await;
    assert_eq!(exchange(&quic, &headers(STATIC_ONLY, &[])).await, Some(200));
    let forwarded = upstream.heads();

    // `:protocol` on a GET, and an extended CONNECT without `:scheme` and
    // `:path` (RFC 8441 4), which h3 passes: answered (400), never forwarded.
    let with_protocol = headers(STATIC_ONLY, &[(b":protocol", b"websocket")]);
    assert_eq!(exchange(&quic, &with_protocol).await, Some(0));
    let mut block = STATIC_ONLY.to_vec();
    literal(&mut block, b":method", b"CONNECT");
    literal(&mut block, b":protocol", b"websocket");
    literal(&mut block, b":authority", b"a.test");
    let mut bare_connect = Vec::new();
    varint(&mut bare_connect, 0x01);
    varint(&mut bare_connect, block.len() as u64);
    bare_connect.extend(block);
    assert_eq!(exchange(&quic, &bare_connect).await, Some(0));
    assert_eq!(
        upstream.heads(),
        forwarded,
        "a malformed request was forwarded"
    );

    let before = server.usage();
    // A field section of 40 KB, past max_header_bytes: refused.
    let big = vec![b'v'; 4000];
    let fields: Vec<(&[u8], &[u8])> = (0..10).map(|_| (&b"x-filler"[..], &big[..])).collect();
    for _ in 0..20 {
        let answer = exchange(&quic, &headers(STATIC_ONLY, &fields)).await;
        assert_ne!(answer, Some(200), "a 40 KB head was served");
    }
    // A field line naming dynamic-table entry 0 of a table this server gave
    // no capacity (and that no encoder stream filled): never served.
    for prefix in [[0x02, 0x00], [0x00, 0x00]] {
        let quic2 = quic_connection(&ca, addr, "a.test").await;
        let _control2 = control(&quic2).await;
        let answer = exchange(&quic2, &headers_then(prefix, &[], &[0x80])).await;
        assert_ne!(answer, Some(200), "a dynamic-table reference was served");
    }

    // 2,000 streams, each reset as soon as its head is written.
    let quic3 = quic_connection(&ca, addr, "a.test").await;
    let _control3 = control(&quic3).await;
    let head = headers(STATIC_ONLY, &[]);
    for _ in 0..2000 {
        let Ok(Ok((mut send, recv))) =
            tokio::time::timeout(Duration::from_secs(5), quic3.open_bi()).await
        else {
            break;
        };
        let _ = send.write_all(&head).await;
        let _ = send.reset(quinn::VarInt::from_u32(0x10c));
        drop(recv);
    }
    // As many streams as the connection may open (32), none sending a
    // head: each is ended at header_read_timeout, and their credit comes
    // back, so 32 more can open.
    let quic4 = quic_connection(&ca, addr, "a.test").await;
    let _control4 = control(&quic4).await;
    for round in 0..2 {
        let mut silent = Vec::new();
        for _ in 0..32 {
            let opened = tokio::time::timeout(Duration::from_secs(3), quic4.open_bi()).await;
            let (mut send, recv) = opened.expect("stream credit came back").unwrap();
            // A stream exists for the peer once a byte is sent: one byte of a frame type.
            let _ = send.write_all(&[0x01]).await;
            silent.push((send, recv));
        }
        let ends = silent.iter_mut().map(|(_, recv)| async move {
            tokio::time::timeout(Duration::from_secs(4), recv.read_to_end(1024))
                .await
                .is_ok()
        });
        let ended = futures_util::future::join_all(ends).await;
        let ended = ended.into_iter().filter(|&e| e).count();
        assert_eq!(
            ended, 32,
            "round {round}: only {ended} of 32 silent streams were ended"
        );
    }
    eprintln!(
        "h3: {} of 2,000 reset streams forwarded",
        upstream.heads() - forwarded
    );
    before.assert_bounded(server.usage(), 64, Duration::from_secs(20), "HTTP/3 floods");
    assert!(
        !upstream.seen().contains("x-filler"),
        "an oversized head was forwarded"
    );

    let fresh = quic_connection(&ca, addr, "a.test").await;
    let _control5 = control(&fresh).await;
    assert_eq!(
        exchange(&fresh, &headers(STATIC_ONLY, &[])).await,
        Some(200)
    );
    still_serves(http).await;
}
