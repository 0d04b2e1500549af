//! WebSocket from HTTP/2 clients (RFC 8441): an extended CONNECT with
//! `:protocol websocket` is turned, at the edge, into the HTTP/1.1 upgrade
//! every WebSocket server speaks (RFC 6455 4.1): `GET`, `Connection:
//! upgrade`, `Upgrade: websocket` and a fresh `Sec-WebSocket-Key`. Routes,
//! policies and the proxy then see an ordinary WebSocket request, and the
//! proxy's tunnel carries the stream. The upstream's `101` goes back to the
//! HTTP/2 client as the `200` RFC 8441 5 asks for, once its
//! `Sec-WebSocket-Accept` is checked against the key sent.

use std::hash::{BuildHasher, Hasher, RandomState};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode, header};
use sha1::{Digest, Sha1};

/// What RFC 6455 4.2.2 appends to the key before hashing it.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// An HTTP/2 CONNECT, seen before routing.
pub(crate) enum Connect {
    /// An ordinary CONNECT (no `:protocol`): left to the routes.
    Plain,
    /// `:protocol websocket`, rewritten as an upgrade with this key.
    WebSocket(HeaderValue),
    /// Another `:protocol`: answered 501 Not Implemented.
    Unsupported,
}

/// Rewrites an extended CONNECT for `websocket` as an HTTP/1.1 upgrade
/// request (in place); says what the CONNECT was.
#[cold]
#[inline(never)]
pub(crate) fn from_extended_connect(parts: &mut Parts) -> Connect {
    let Some(protocol) = parts.extensions.remove::<hyper::ext::Protocol>() else {
        return Connect::Plain;
    };
    if !protocol.as_str().eq_ignore_ascii_case("websocket") {
        return Connect::Unsupported;
    }
    let key = new_key();
    parts.method = Method::GET;
    let headers = &mut parts.headers;
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_KEY, key.clone());
    headers
        .entry(header::SEC_WEBSOCKET_VERSION)
        .or_insert(HeaderValue::from_static("13"));
    Connect::WebSocket(key)
}

/// The upstream's answer, for the HTTP/2 client: a `101` whose accept
/// matches `key` becomes `200` (the stream is the tunnel); a `101` that
/// does not is a `502`, and the tunnel never opens. Anything else is
/// passed on: the upstream refused the WebSocket.
#[cold]
#[inline(never)]
pub(crate) fn to_extended_connect<B>(response: &mut Response<B>, key: &HeaderValue) {
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return;
    }
    let headers = response.headers_mut();
    let accepted = headers
        .get(header::SEC_WEBSOCKET_ACCEPT)
        .is_some_and(|value| value.as_bytes() == accept(key.as_bytes()).as_bytes());
    headers.remove(header::SEC_WEBSOCKET_ACCEPT);
    headers.remove(header::UPGRADE);
    headers.remove(header::CONNECTION);
    if accepted {
        *response.status_mut() = StatusCode::OK;
    } else {
        tracing::warn!("upstream's Sec-WebSocket-Accept does not match the key sent; answered 502");
        *response.status_mut() = StatusCode::BAD_GATEWAY;
    }
}

/// Sixteen unpredictable bytes, base64 (RFC 6455 4.1): a nonce, not a
/// secret; std's per-call random hasher keys are enough.
fn new_key() -> HeaderValue {
    let mut bytes = [0u8; 16];
    for half in bytes.chunks_mut(8) {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u8(0);
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    HeaderValue::from_str(&STANDARD.encode(bytes))
        .unwrap_or(HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA=="))
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
    fn keys_are_sixteen_bytes_and_differ() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert_eq!(STANDARD.decode(a.as_bytes()).unwrap().len(), 16);
    }

    fn connect(protocol: Option<&'static str>) -> Parts {
        let mut request = http::Request::connect("http://a.test/chat")
            .header("sec-websocket-protocol", "chat")
            .body(())
            .unwrap();
        if let Some(protocol) = protocol {
            request
                .extensions_mut()
                .insert(hyper::ext::Protocol::from_static(protocol));
        }
        request.into_parts().0
    }

    #[test]
    fn an_extended_connect_becomes_an_upgrade() {
        let mut parts = connect(Some("websocket"));
        let Connect::WebSocket(key) = from_extended_connect(&mut parts) else {
            panic!("not a WebSocket");
        };
        assert_eq!(parts.method, Method::GET);
        assert_eq!(parts.headers["connection"], "upgrade");
        assert_eq!(parts.headers["upgrade"], "websocket");
        assert_eq!(parts.headers["sec-websocket-key"], key);
        assert_eq!(parts.headers["sec-websocket-version"], "13");
        assert_eq!(parts.headers["sec-websocket-protocol"], "chat");

        let mut response = Response::new(());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_ACCEPT,
            HeaderValue::from_str(&accept(key.as_bytes())).unwrap(),
        );
        response
            .headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        to_extended_connect(&mut response, &key);
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().is_empty());

        let mut wrong = Response::new(());
        *wrong.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        to_extended_connect(&mut wrong, &key);
        assert_eq!(wrong.status(), StatusCode::BAD_GATEWAY);

        let mut refused = Response::new(());
        *refused.status_mut() = StatusCode::FORBIDDEN;
        to_extended_connect(&mut refused, &key);
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn other_connects() {
        assert!(matches!(
            from_extended_connect(&mut connect(None)),
            Connect::Plain
        ));
        assert!(matches!(
            from_extended_connect(&mut connect(Some("webtransport"))),
            Connect::Unsupported
        ));
    }
}
