//! Only WebSocket upgrades are tunnelled: `Upgrade: h2c` (with its
//! `HTTP2-Settings`) is never forwarded, so an upstream that would switch
//! cannot take the client's HTTP/2 preface past the routes.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{RawUpstream, WAIT, proxy_config, still_serves, support};

const H2C: &[u8] = b"GET /x HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n";

/// The HTTP/2 connection preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[tokio::test]
async fn h2c_upgrade_headers_never_reach_the_upstream() {
    let upstream = RawUpstream::start(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, false), dir.path());
    let addr = running.addr("http");
    let mut client = TcpStream::connect(addr).await.unwrap();
    client.write_all(H2C).await.unwrap();
    let reply = read_head(&mut client).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let seen = upstream.seen().to_ascii_lowercase();
    assert!(seen.starts_with("get /x http/1.1\r\n"), "{seen}");
    assert!(!seen.contains("upgrade"), "{seen}");
    assert!(!seen.contains("http2-settings"), "{seen}");
    still_serves(addr).await;
}

/// An upstream that switches to h2c anyway is answered 502 and nothing the
/// client sends next reaches it.
#[tokio::test]
async fn an_unasked_switch_is_502_and_tunnels_nothing() {
    let upstream = RawUpstream::start(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, false), dir.path());
    let addr = running.addr("http");
    let mut client = TcpStream::connect(addr).await.unwrap();
    client.write_all(H2C).await.unwrap();
    let reply = read_head(&mut client).await;
    assert!(reply.starts_with("HTTP/1.1 502"), "{reply}");
    // The client's HTTP/2 preface goes to the gateway, never the upstream.
    let _ = client.write_all(PREFACE).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !upstream.seen().contains("PRI * HTTP/2.0"),
        "{}",
        upstream.seen()
    );
    assert_eq!(upstream.heads(), 1);
    still_serves(addr).await;
}

/// Reads until a response head has arrived (or `WAIT`).
async fn read_head(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WAIT, async {
        let mut buf = [0u8; 4096];
        while super::find(&out, b"\r\n\r\n").is_none() {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&out).into_owned()
}
