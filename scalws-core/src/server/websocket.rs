//! WebSocket from HTTP/2 (RFC 8441) and HTTP/3 (RFC 9220) clients: an
//! extended CONNECT with `:protocol websocket` is turned, at the edge, into
//! the HTTP/1.1 upgrade
//! every WebSocket server speaks (RFC 6455 4.1): `GET`, `Connection:
//! upgrade`, `Upgrade: websocket` and a fresh `Sec-WebSocket-Key`. Routes,
//! policies and the proxy then see an ordinary WebSocket request, and the
//! proxy's tunnel carries the stream (the proxy checks the upstream's
//! `Sec-WebSocket-Accept` against the key, since the client never saw it).
//! The `101` that opens the tunnel goes back to the client as the `200`
//! RFC 8441 5 asks for.

use std::hash::{BuildHasher, Hasher, RandomState};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
#[cfg(feature = "http3")]
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};

use super::bodiless::Emptiable;

/// Rewrites an HTTP/2 extended CONNECT for `websocket` as an HTTP/1.1
/// upgrade request, in place. A CONNECT without `:protocol` is left to the
/// routes. `false` for another `:protocol`, which is answered 501 Not
/// Implemented.
#[cold]
#[inline(never)]
pub(crate) fn from_extended_connect<B>(request: &mut Request<B>) -> bool {
    match request.extensions_mut().remove::<hyper::ext::Protocol>() {
        Some(protocol) => {
            // A standard method: its clone allocates nothing.
            let mut method = request.method().clone();
            let upgraded = to_upgrade(&mut method, request.headers_mut(), protocol.as_str());
            *request.method_mut() = method;
            upgraded
        }
        None => true,
    }
}

/// [`from_extended_connect`] for HTTP/3 (RFC 9220), whose `:protocol` h3
/// parses into a type of its own.
#[cfg(feature = "http3")]
pub(crate) fn from_h3_extended_connect(parts: &mut Parts) -> bool {
    match parts.extensions.remove::<::h3::ext::Protocol>() {
        Some(protocol) => to_upgrade(&mut parts.method, &mut parts.headers, protocol.as_str()),
        None => true,
    }
}

/// The rewrite itself, for a request whose `:protocol` is `protocol`.
fn to_upgrade(method: &mut Method, headers: &mut HeaderMap, protocol: &str) -> bool {
    if !protocol.eq_ignore_ascii_case("websocket") {
        return false;
    }
    *method = Method::GET;
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_KEY, new_key());
    headers
        .entry(header::SEC_WEBSOCKET_VERSION)
        .or_insert(HeaderValue::from_static("13"));
    true
}

/// The answer to an HTTP/2 or HTTP/3 CONNECT: the `101` that opened a tunnel becomes
/// `200`, without the HTTP/1.1 upgrade's fields. Any other 2xx did not open
/// one (a fixed-response route, a cached page, an upstream that is no
/// WebSocket server), and a client takes every 2xx for an open tunnel
/// (RFC 8441 5): it becomes an empty 502. Other answers are passed on.
#[cold]
#[inline(never)]
pub(crate) fn to_extended_connect<B: Emptiable>(response: Response<B>) -> Response<B> {
    let status = response.status();
    if status != StatusCode::SWITCHING_PROTOCOLS && !status.is_success() {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    for name in [
        header::SEC_WEBSOCKET_ACCEPT,
        header::UPGRADE,
        header::CONNECTION,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
    ] {
        parts.headers.remove(name);
    }
    if status == StatusCode::SWITCHING_PROTOCOLS {
        parts.status = StatusCode::OK;
        return Response::from_parts(parts, body);
    }
    tracing::debug!(%status, "an extended CONNECT was answered without a switch; 502");
    parts.status = StatusCode::BAD_GATEWAY;
    parts.headers.clear();
    body.empty();
    Response::from_parts(parts, body)
}

/// Sixteen unpredictable bytes, base64 (RFC 6455 4.1): a nonce, not a
/// secret. std's `RandomState` (a random per-thread seed, advanced at each
/// call) is enough for that.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_are_sixteen_bytes_and_differ() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert_eq!(STANDARD.decode(a.as_bytes()).unwrap().len(), 16);
    }

    fn connect(protocol: Option<&'static str>) -> Request<()> {
        let mut request = http::Request::connect("http://a.test/chat")
            .header("sec-websocket-protocol", "chat")
            .body(())
            .unwrap();
        if let Some(protocol) = protocol {
            request
                .extensions_mut()
                .insert(hyper::ext::Protocol::from_static(protocol));
        }
        request
    }

    #[test]
    fn an_extended_connect_becomes_an_upgrade_and_its_101_a_200() {
        let mut request = connect(Some("websocket"));
        assert!(from_extended_connect(&mut request));
        assert_eq!(request.method(), Method::GET);
        assert_eq!(request.headers()["connection"], "upgrade");
        assert_eq!(request.headers()["upgrade"], "websocket");
        assert_eq!(request.headers()["sec-websocket-version"], "13");
        assert_eq!(request.headers()["sec-websocket-protocol"], "chat");
        assert!(request.headers().contains_key("sec-websocket-key"));
        assert!(request.extensions().get::<hyper::ext::Protocol>().is_none());

        let body =
            || http_body_util::Either::<crate::Body, crate::Body>::Left(crate::Body::from("x"));
        let mut response = Response::new(body());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        response
            .headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        let response = to_extended_connect(response);
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().is_empty());

        let mut refused = Response::new(body());
        *refused.status_mut() = StatusCode::FORBIDDEN;
        assert_eq!(to_extended_connect(refused).status(), StatusCode::FORBIDDEN);

        // A 200 that opened nothing: an empty 502, never a "tunnel".
        let mut page = Response::new(body());
        page.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("1"));
        let page = to_extended_connect(page);
        assert_eq!(page.status(), StatusCode::BAD_GATEWAY);
        assert!(page.headers().is_empty());
        assert_eq!(page.body().exact_size(), Some(0));
    }

    #[test]
    fn other_connects() {
        let mut plain = connect(None);
        assert!(from_extended_connect(&mut plain));
        assert_eq!(plain.method(), Method::CONNECT);
        assert!(!from_extended_connect(&mut connect(Some("webtransport"))));
    }
}
