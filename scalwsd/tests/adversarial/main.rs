//! The adversarial suite: a gateway loaded from YAML and served on loopback,
//! driven with raw bytes the way an attacker would, against upstreams that
//! record every byte they receive. Each case asserts the answer, what the
//! upstream saw (or that it saw nothing), and that the gateway still serves.
#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod client_faults;
mod floods;
mod framing;
mod fuzz_corpora;
mod h2_frames;
mod h2raw;
mod h3_frames;
mod hosts;
mod limits;
mod poisoning;
mod slow_clients;
mod smuggling;
mod tls;
mod traversal;
mod upgrades;
mod upstream_faults;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a raw exchange waits for the gateway to answer and close.
pub const WAIT: Duration = Duration::from_secs(3);

/// An upstream on a raw socket: every byte each connection sends is kept,
/// and each request head (up to a blank line) is answered with `answer`.
pub struct RawUpstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<u8>>>,
    heads: Arc<Mutex<usize>>,
}

impl RawUpstream {
    pub async fn start(answer: &'static [u8]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(0));
        let (all, count) = (seen.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, answer, all.clone(), count.clone()));
            }
        });
        Self { addr, seen, heads }
    }

    /// Everything received so far, on every connection, as text.
    pub fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }

    /// Request heads received so far.
    pub fn heads(&self) -> usize {
        *self.heads.lock().unwrap()
    }
}

async fn serve(
    mut stream: TcpStream,
    answer: &'static [u8],
    seen: Arc<Mutex<Vec<u8>>>,
    heads: Arc<Mutex<usize>>,
) {
    let mut pending = Vec::new();
    let mut buf = [0u8; 16384];
    // Bounded: a connection idle for 5 s is done.
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await
    {
        if n == 0 {
            return;
        }
        seen.lock().unwrap().extend_from_slice(&buf[..n]);
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = find(&pending, b"\r\n\r\n") {
            pending.drain(..end + 4);
            *heads.lock().unwrap() += 1;
            if stream.write_all(answer).await.is_err() {
                return;
            }
        }
    }
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A gateway proxying every host to `upstream` (with a cache when `cache`).
pub fn proxy_config(upstream: SocketAddr, cache: bool) -> String {
    let cache = if cache { "cache: {}" } else { "" };
    format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app: {{ addresses: ["{upstream}"], request_timeout: 2s }}
applications:
  - name: site
    domains: ["*"]
    {cache}
    routes:
      - {{ path: /still, respond: {{ body: alive }} }}
      - {{ path: /, proxy: app }}
"#
    )
}

/// The gateway answers an ordinary request after whatever came before (a
/// fixed-response route: the upstream may be the broken one).
pub async fn still_serves(addr: SocketAddr) {
    let reply = test_support::raw_exchange(
        addr,
        b"GET /still HTTP/1.1\r\nHost: ok.test\r\nConnection: close\r\n\r\n",
        WAIT,
    )
    .await;
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "after the attack: {reply}"
    );
    assert!(reply.ends_with("alive"), "after the attack: {reply}");
}
