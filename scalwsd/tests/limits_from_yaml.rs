//! The `limits:` block of the file reaches the server: each limit as a user
//! sets it in YAML and sees it enforced over a real socket.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::time::Duration;

use test_support::{closed_within, raw_exchange};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const YAML: &str = r#"
limits:
  max_header_bytes: 8KiB
  max_headers: 20
  max_request_body: 1KiB
  header_read_timeout: 300ms
  keepalive_timeout: 2s
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - { name: a, domains: ["*"], routes: [{ path: /, respond: { body: ok } }] }
"#;

#[tokio::test]
async fn limits_set_in_yaml_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(YAML, dir.path());
    let addr = running.addr("http");
    let wait = Duration::from_secs(5);

    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(9 * 1024)
    );
    assert!(
        raw_exchange(addr, big.as_bytes(), wait)
            .await
            .starts_with("HTTP/1.1 431")
    );

    let mut many = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..21 {
        many.push_str(&format!("X-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    assert!(
        raw_exchange(addr, many.as_bytes(), wait)
            .await
            .starts_with("HTTP/1.1 431")
    );

    let body = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n";
    assert!(
        raw_exchange(addr, body.as_bytes(), wait)
            .await
            .starts_with("HTTP/1.1 413")
    );

    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let started = std::time::Instant::now();
    assert!(closed_within(&mut slow, wait).await);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_millis(1900),
        "{waited:?}"
    );
}
