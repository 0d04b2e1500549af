//! The proxy's side of a WebSocket from an HTTP/2 or HTTP/3 client (RFC 8441,
//! RFC 9220): the edge made up its `Sec-WebSocket-Key` (see `scalws_core`'s
//! server), so the
//! client cannot check the upstream's `Sec-WebSocket-Accept`; the proxy does
//! (RFC 6455 4.1, the client's duty), before it opens the tunnel.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Version, header};
use sha1::{Digest, Sha1};

/// What RFC 6455 4.2.2 appends to the key before hashing it.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The key to check the answer against: that of an upgrade from an HTTP/2
/// or HTTP/3 client, which only the edge's rewrite makes (such a client
/// cannot send `Connection` or `Upgrade` itself: hyper and the HTTP/3 edge
/// refuse them as malformed).
pub(super) fn key_to_check(parts: &Parts) -> Option<HeaderValue> {
    matches!(parts.version, Version::HTTP_2 | Version::HTTP_3)
        .then(|| parts.headers.get(header::SEC_WEBSOCKET_KEY).cloned())
        .flatten()
}

/// Whether a `101`'s headers accept `key` (always, with no key to check).
pub(super) fn accepted(key: Option<&HeaderValue>, response: &HeaderMap) -> bool {
    let Some(key) = key else {
        return true;
    };
    response
        .get(header::SEC_WEBSOCKET_ACCEPT)
        .is_some_and(|value| value.as_bytes() == accept(key.as_bytes()).as_bytes())
}

/// `Sec-WebSocket-Accept` for `key` (RFC 6455 4.2.2).
fn accept(key: &[u8]) -> String {
    let mut sha1 = Sha1::new();
    sha1.update(key);
    sha1.update(GUID);
    STANDARD.encode(sha1.finalize())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_accept_of_rfc_6455s_example() {
        // RFC 6455 1.3.
        assert_eq!(
            accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn only_the_right_accept_passes() {
        let key = HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ==");
        let mut headers = HeaderMap::new();
        assert!(!accepted(Some(&key), &headers));
        headers.insert(
            header::SEC_WEBSOCKET_ACCEPT,
            HeaderValue::from_static("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        );
        assert!(accepted(Some(&key), &headers));
        let other = HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA==");
        assert!(!accepted(Some(&other), &headers));
        assert!(accepted(None, &HeaderMap::new()));
    }
}
