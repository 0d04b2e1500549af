//! The host a request is routed by is the host it is forwarded and cached
//! by: two `Host` fields, an absolute-form target with another `Host`, and an
//! HTTP/2 `host` field beside another `:authority`.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use test_support::{raw_exchange, read_whole};

use super::{RawUpstream, WAIT, proxy_config, still_serves, support};

/// A cacheable answer; the upstream's log says which Host it was sent.
const CACHEABLE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nCache-Control: max-age=60\r\n\r\norigin";

#[tokio::test]
async fn two_host_fields_are_400() {
    let upstream = RawUpstream::start(CACHEABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, false), dir.path());
    let addr = running.addr("http");
    for heads in [
        "GET /p HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
        "GET /p HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n",
        "GET /p HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\nhost: a.test\r\n\r\n",
    ] {
        let reply = raw_exchange(addr, heads.as_bytes(), WAIT).await;
        assert!(reply.starts_with("HTTP/1.1 400"), "{heads:?}: {reply}");
    }
    assert_eq!(upstream.heads(), 0, "nothing reaches the upstream");
    still_serves(addr).await;
}

/// RFC 9112 3.2.2: an absolute-form target's authority wins, and the
/// upstream gets it as Host; the cache keeps it under that host, so an
/// ordinary request for it gets what its own host would have got.
#[tokio::test]
async fn an_absolute_target_is_forwarded_with_its_own_host() {
    let upstream = RawUpstream::start(CACHEABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, true), dir.path());
    let addr = running.addr("http");
    let reply = raw_exchange(
        addr,
        b"GET http://c.test/p HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
        WAIT,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let seen = upstream.seen().to_ascii_lowercase();
    assert!(seen.contains("\r\nhost: c.test\r\n"), "{seen}");
    assert!(!seen.contains("evil.test"), "{seen}");
    // The ordinary request is a hit of what c.test itself was sent.
    let reply = raw_exchange(
        addr,
        b"GET /p HTTP/1.1\r\nHost: c.test\r\nConnection: close\r\n\r\n",
        WAIT,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert_eq!(upstream.heads(), 1, "served from the cache: {reply}");
}

/// RFC 9113 8.3.1: an HTTP/2 `host` naming another authority than
/// `:authority` is malformed: 400, and nothing is forwarded or cached.
#[tokio::test]
async fn an_h2_host_field_unlike_the_authority_is_400() {
    let upstream = RawUpstream::start(CACHEABLE).await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, true), dir.path());
    let addr = running.addr("http");
    let mut h2 = test_support::h2_connection(addr).await;
    let poisoned = Request::get("http://c.test/p")
        .header("host", "evil.test")
        .body(Full::<Bytes>::default())
        .unwrap();
    let reply = read_whole(h2.send_request(poisoned).await.unwrap()).await;
    assert_eq!(reply.status, 400);
    assert_eq!(upstream.heads(), 0);
    // The same value (any case) is fine.
    let same = Request::get("http://c.test/p")
        .header("host", "C.test")
        .body(Full::<Bytes>::default())
        .unwrap();
    let reply = read_whole(h2.send_request(same).await.unwrap()).await;
    assert_eq!(reply.status, 200);
    let seen = upstream.seen().to_ascii_lowercase();
    assert!(seen.contains("\r\nhost: c.test\r\n"), "{seen}");
    still_serves(addr).await;
}
