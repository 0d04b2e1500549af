//! HTTP/1 request smuggling: whatever framing a client tries, the gateway
//! and the upstream agree on where each request ends. The upstream never
//! receives a head with both `Content-Length` and `Transfer-Encoding`, nor
//! a request the gateway did not route, and ambiguous framing is refused.

use super::{RawUpstream, WAIT, proxy_config, still_serves, support};
use test_support::raw_exchange;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// Sends `bytes` on one connection; returns the gateway's answer and what
/// the upstream received.
async fn exchange(bytes: &str) -> (String, String) {
    let upstream = RawUpstream::start(OK).await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, false), dir.path());
    let addr = running.addr("http");
    let reply = raw_exchange(addr, bytes.as_bytes(), WAIT).await;
    still_serves(addr).await;
    (reply, upstream.seen())
}

fn statuses(reply: &str) -> Vec<&str> {
    reply
        .match_indices("HTTP/1.")
        .filter_map(|(i, _)| reply.get(i + 9..i + 12))
        .collect()
}

/// No head the upstream received frames its body twice over.
fn assert_unambiguous(seen: &str) {
    for head in seen.to_ascii_lowercase().split("\r\n\r\n") {
        assert!(
            !(head.contains("\r\ncontent-length:") && head.contains("\r\ntransfer-encoding:")),
            "the upstream got a doubly framed head:\n{seen}"
        );
    }
}

#[tokio::test]
async fn ambiguous_or_malformed_framing_is_400_and_nothing_is_forwarded() {
    for attack in [
        // Two lengths, or one that is not a number.
        "POST /a HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "POST /a HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5, 6\r\n\r\nhello!",
        "POST /a HTTP/1.1\r\nHost: a.test\r\nContent-Length: +5\r\n\r\nhello",
        "POST /a HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0x5\r\n\r\nhello",
        // A space before the colon; obs-fold; a bare LF or CR inside the head.
        "POST /a HTTP/1.1\r\nHost: a.test\r\nContent-Length : 5\r\n\r\nhello",
        "GET /a HTTP/1.1\r\nHost: a.test\r\nX-Folded: one\r\n two\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: a.test\r\nX-A: 1\rX-B: 2\r\n\r\n",
        // A transfer coding other than chunked, last.
        "POST /a HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip\r\n\r\nhello",
        "POST /a HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
    ] {
        let (reply, seen) = exchange(attack).await;
        assert_eq!(statuses(&reply), ["400"], "{attack:?}:\n{reply}");
        assert_eq!(seen, "", "{attack:?}: forwarded");
    }
}

/// `Content-Length` with `Transfer-Encoding: chunked`: either refused, or
/// framed by the chunks and the connection closed after (RFC 9112 6.3);
/// never forwarded with both, and the bytes after the chunked body never
/// reach the upstream as part of that request.
#[tokio::test]
async fn length_and_chunks_never_desynchronise_the_upstream() {
    let attack = "POST /a HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let (reply, seen) = exchange(attack).await;
    assert_unambiguous(&seen);
    let answered = statuses(&reply);
    assert!(
        answered == ["400"] || answered.first() == Some(&"200"),
        "{reply}"
    );
    if answered == ["400"] {
        assert_eq!(seen, "", "refused, yet forwarded");
    }
}

/// Pipelined requests and a body left unread are each their own request
/// upstream, framed as the gateway read them.
#[tokio::test]
async fn pipelined_requests_stay_apart() {
    let attack = "POST /one HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhelloGET /two HTTP/1.1\r\nHost: a.test\r\n\r\nGET /three HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
    let (reply, seen) = exchange(attack).await;
    assert_eq!(statuses(&reply), ["200", "200", "200"], "{reply}");
    // In order, each once: the body "hello" ends exactly where /two begins.
    let at = |line: &str| {
        assert_eq!(seen.matches(line).count(), 1, "{line}: {seen}");
        seen.find(line).unwrap()
    };
    let (one, two, three) = (
        at("POST /one HTTP/1.1\r\n"),
        at("GET /two HTTP/1.1\r\n"),
        at("GET /three HTTP/1.1\r\n"),
    );
    assert!(one < two && two < three, "{seen}");
    assert!(seen[..two].ends_with("\r\n\r\nhello"), "{seen}");
    assert_unambiguous(&seen);
}

/// An HTTP/1.0 request with a body declared by length is forwarded with
/// exactly that body; one without a length has none.
#[tokio::test]
async fn http10_bodies_are_framed_by_their_length() {
    let (reply, seen) =
        exchange("POST /a HTTP/1.0\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello").await;
    assert_eq!(statuses(&reply), ["200"], "{reply}");
    let lower = seen.to_ascii_lowercase();
    assert!(
        lower.contains("content-length: 5\r\n") && seen.ends_with("\r\n\r\nhello"),
        "{seen}"
    );
    assert_unambiguous(&seen);
}
