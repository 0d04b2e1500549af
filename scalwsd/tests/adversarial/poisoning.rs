//! Cache poisoning: an attacker's request must never choose what the cache
//! serves to the next ordinary request. For each case the attacker goes
//! first and the upstream answers it with a marked body; the ordinary
//! request after it must not get that body, and goes to the upstream.

use super::{RawUpstream, WAIT, proxy_config, still_serves, support};
use test_support::raw_exchange;

/// Sends the attacker's request then an ordinary one for the same URL;
/// returns the ordinary reply and how many heads the upstream received.
async fn attack_then_ordinary(answer: &'static [u8], attack: &str) -> (String, usize) {
    let upstream = RawUpstream::start(answer).await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, true), dir.path());
    let addr = running.addr("http");
    let first = raw_exchange(addr, attack.as_bytes(), WAIT).await;
    assert!(first.starts_with("HTTP/1.1 "), "{attack:?}: {first}");
    let ordinary = raw_exchange(
        addr,
        b"GET /p HTTP/1.1\r\nHost: c.test\r\nConnection: close\r\n\r\n",
        WAIT,
    )
    .await;
    still_serves(addr).await;
    (ordinary, upstream.heads())
}

const ATTACK: &str = "GET /p HTTP/1.1\r\nHost: c.test\r\nConnection: close\r\n\r\n";

#[tokio::test]
async fn what_must_not_be_stored_is_not_served_to_the_next_client() {
    let cases: [(&str, &'static [u8], &str); 6] = [
        (
            "private",
            b"HTTP/1.1 200 OK\r\nCache-Control: private, max-age=60\r\nContent-Length: 6\r\n\r\npoison",
            ATTACK,
        ),
        (
            "no-store",
            b"HTTP/1.1 200 OK\r\nCache-Control: no-store, max-age=60\r\nContent-Length: 6\r\n\r\npoison",
            ATTACK,
        ),
        (
            "Set-Cookie",
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nSet-Cookie: session=attacker\r\nContent-Length: 6\r\n\r\npoison",
            ATTACK,
        ),
        (
            "Vary: *",
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nVary: *\r\nContent-Length: 6\r\n\r\npoison",
            ATTACK,
        ),
        (
            "a 5xx",
            b"HTTP/1.1 500 Internal Server Error\r\nCache-Control: max-age=60\r\nContent-Length: 6\r\n\r\npoison",
            ATTACK,
        ),
        (
            "an answer to Authorization",
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 6\r\n\r\npoison",
            "GET /p HTTP/1.1\r\nHost: c.test\r\nAuthorization: Bearer attacker\r\nConnection: close\r\n\r\n",
        ),
    ];
    // The control: the same answer without the poison is stored and served.
    let (stored, heads) = attack_then_ordinary(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 6\r\n\r\nstored",
        ATTACK,
    )
    .await;
    assert_eq!(
        heads, 1,
        "the control was not served from the cache:\n{stored}"
    );
    for (case, answer, attack) in cases {
        let (ordinary, heads) = attack_then_ordinary(answer, attack).await;
        assert_eq!(
            heads, 2,
            "{case}: the ordinary request was answered from the cache:\n{ordinary}"
        );
    }
}

/// A header outside the key cannot pick the stored response: the gateway
/// sets `X-Forwarded-Host` itself, and a `Vary`ing response is stored per
/// value, so the attacker's variant is not served for another value.
#[tokio::test]
async fn unkeyed_and_varied_headers_do_not_choose_the_response() {
    let upstream = RawUpstream::start(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nVary: Accept-Language\r\nContent-Length: 6\r\n\r\nvaried",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&proxy_config(upstream.addr, true), dir.path());
    let addr = running.addr("http");
    let attack = "GET /p HTTP/1.1\r\nHost: c.test\r\nX-Forwarded-Host: evil.test\r\nAccept-Language: xx-evil\r\nConnection: close\r\n\r\n";
    let reply = raw_exchange(addr, attack.as_bytes(), WAIT).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let seen = upstream.seen().to_ascii_lowercase();
    assert!(seen.contains("\r\nx-forwarded-host: c.test\r\n"), "{seen}");
    assert!(!seen.contains("evil.test"), "{seen}");
    // Another language: not the attacker's variant.
    let other = raw_exchange(
        addr,
        b"GET /p HTTP/1.1\r\nHost: c.test\r\nAccept-Language: en\r\nConnection: close\r\n\r\n",
        WAIT,
    )
    .await;
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
    assert_eq!(
        upstream.heads(),
        2,
        "the en request got the xx-evil variant"
    );
    // The same language again: a hit.
    let again = raw_exchange(
        addr,
        b"GET /p HTTP/1.1\r\nHost: c.test\r\nAccept-Language: en\r\nConnection: close\r\n\r\n",
        WAIT,
    )
    .await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    assert_eq!(upstream.heads(), 2, "the cache stores at all");
}
