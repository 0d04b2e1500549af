//! Upstreams that misbehave, on raw sockets: refused, silent, garbage, a
//! head too large, a body cut short, and kept connections the upstream
//! closes after each answer without saying so. Each is the upstream's fault (502 or 504, or a client response
//! cut off rather than ended early) and never takes the gateway down.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{WAIT, proxy_config, still_serves, support};

/// An upstream that answers every connection's first request with
/// `answer` and then closes (or, with `hold`, keeps it silent for 5 s).
async fn upstream(answer: &'static [u8], hold: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(answer).await;
                if hold {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            });
        }
    });
    addr
}

async fn get(addr: SocketAddr) -> String {
    // Longer than the upstream's request_timeout (2 s), with room to spare.
    test_support::raw_exchange(
        addr,
        b"GET /p HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
        WAIT * 2,
    )
    .await
}

#[tokio::test]
async fn a_misbehaving_upstream_is_the_upstreams_fault() {
    let big_head: &'static [u8] = {
        let mut head = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
        head.extend(std::iter::repeat_n(b'a', 1 << 20));
        head.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\nok");
        head.leak()
    };
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, SocketAddr, &str)> = vec![
        ("refused", test_support::upstream::refused_addr(), "502"),
        ("silent", upstream(b"", true).await, "504"),
        (
            "garbage",
            upstream(b"HELLO THERE\r\n\r\n", false).await,
            "502",
        ),
        ("closed at once", upstream(b"", false).await, "502"),
        ("a 1 MiB head", upstream(big_head, false).await, "502"),
        (
            "an unknown status line",
            upstream(b"HTTP/1.1 2000 OK\r\n\r\n", false).await,
            "502",
        ),
    ];
    for (what, addr, expected) in cases {
        let running = support::start(&proxy_config(addr, false), dir.path());
        let reply = get(running.addr("http")).await;
        assert_eq!(reply.get(9..12), Some(expected), "{what}: {reply}");
        still_serves(running.addr("http")).await;
    }

    // A body cut short: the client's response is cut off too, never ended
    // early as if complete.
    let short = upstream(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b",
        false,
    )
    .await;
    let running = support::start(&proxy_config(short, false), dir.path());
    let reply = get(running.addr("http")).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    // Framed by the upstream's length, so the client knows it was cut short
    // (re-framed as chunks and ended, it would take it for a whole body).
    assert!(
        head.to_ascii_lowercase().contains("content-length: 100"),
        "{reply}"
    );
    assert_eq!(body, "only ten b", "{reply}");
    still_serves(running.addr("http")).await;

    // An upstream that closes every connection after one answer, without
    // saying so: a kept connection it closed is noticed, and the next GET
    // goes on a new one (hyper's retry of a request not yet written).
    let closing = upstream(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false).await;
    let running = support::start(&proxy_config(closing, false), dir.path());
    for i in 0..5 {
        let reply = get(running.addr("http")).await;
        assert!(
            reply.starts_with("HTTP/1.1 200") && reply.ends_with("ok"),
            "request {i}: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
