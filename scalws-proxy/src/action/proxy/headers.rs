//! Header hygiene between client and upstream: hop-by-hop headers removed both
//! ways (RFC 9110 7.6.1). The forwarding fields added on the way up are
//! [`Forwarding`](crate::upstream::Forwarding)'s.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
static PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
static HTTP2_SETTINGS: HeaderName = HeaderName::from_static("http2-settings");

/// Headers that describe one connection, never the message. `HTTP2-Settings`
/// belongs to the `Upgrade: h2c` handshake (RFC 7540 3.2.1), which is never
/// passed on, whether or not `Connection` names it.
fn fixed_hop_by_hop() -> [&'static HeaderName; 8] {
    [
        &header::CONNECTION,
        &KEEP_ALIVE,
        &PROXY_CONNECTION,
        &header::TE,
        &header::TRAILER,
        &header::TRANSFER_ENCODING,
        &header::UPGRADE,
        &HTTP2_SETTINGS,
    ]
}

// Where `fixed_hop_by_hop` has the names that ask for more than their removal.
const CONNECTION_AT: usize = 0;
const TE_AT: usize = 3;
const TRANSFER_ENCODING_AT: usize = 5;

/// Removes hop-by-hop headers, including every header `Connection` names.
/// `keep_te_trailers` keeps `TE: trailers` (end-to-end meaning for gRPC over HTTP/2).
/// Returns whether the message had any: when not, nothing was removed.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap, keep_te_trailers: bool) -> bool {
    // Most messages carry none of them: one walk over the names instead of
    // a lookup per hop-by-hop name.
    let fixed = fixed_hop_by_hop();
    if !headers.keys().any(|name| fixed.contains(&name)) {
        return false;
    }
    // A second walk says which are here (a response from an HTTP/1.1
    // upstream carries `Connection` alone): only those are removed, not all
    // eight (a removal hashes the name and probes the map; eight of them
    // were a tenth of a proxied request's instructions).
    let mut present = 0u8;
    for name in headers.keys() {
        if let Some(i) = fixed.iter().position(|hop| *hop == name) {
            present |= 1 << i;
        }
    }
    let has = |at: usize| present & (1 << at) != 0;
    if has(CONNECTION_AT) {
        remove_connection_listed(headers);
    }
    // Framed by its chunks: a Content-Length beside Transfer-Encoding is
    // wrong and goes (RFC 9112 6.3); the next hop frames the body itself.
    if has(TRANSFER_ENCODING_AT) {
        headers.remove(header::CONTENT_LENGTH);
    }
    let te_trailers = keep_te_trailers
        && has(TE_AT)
        && headers
            .get(header::TE)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    for (i, name) in fixed.into_iter().enumerate() {
        if present & (1 << i) != 0 {
            headers.remove(name);
        }
    }
    if te_trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    true
}

/// Removes the headers `Connection` names. A name is looked up as the text
/// it is (`HeaderMap` parses a `&str` key on the stack): no `HeaderName`
/// is made, so an option that names no header (`keep-alive`, `close`) costs
/// no allocation. A token that is not a valid name matches nothing.
fn remove_connection_listed(headers: &mut HeaderMap) {
    // The values are shared bytes: cloned, they free the map for removals.
    let mut values = headers.get_all(header::CONNECTION).iter();
    let first = values.next().cloned();
    let more: Vec<HeaderValue> = values.cloned().collect();
    for value in first.iter().chain(&more) {
        let Ok(value) = value.to_str() else { continue };
        for token in value.split(',') {
            let token = token.trim();
            if !token.is_empty() {
                headers.remove(token);
            }
        }
    }
}

/// The upgrade a client asks for (`Connection: upgrade` + `Upgrade`), when it
/// is one that is tunnelled: WebSocket only. Any other (`h2c`, whose HTTP/2
/// preface would reach the upstream past every route, or a protocol of the
/// client's choosing) is not: its headers are removed as hop-by-hop and the
/// request goes on as an ordinary one.
pub(crate) fn requested_upgrade(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut upgrades = headers.get_all(header::UPGRADE).iter();
    let upgrade = upgrades.next()?;
    let websocket = upgrades.next().is_none()
        && upgrade
            .to_str()
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("websocket"));
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    (websocket && connection_upgrade).then(|| upgrade.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        headers
    }

    #[test]
    fn only_websocket_is_an_upgrade() {
        let upgrade = |pairs: &[(&str, &str)]| requested_upgrade(&map(pairs));
        let asked = upgrade(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket"),
        ]);
        assert_eq!(asked.unwrap(), "WebSocket");
        assert!(upgrade(&[("connection", "upgrade"), ("upgrade", "h2c")]).is_none());
        assert!(upgrade(&[("connection", "upgrade"), ("upgrade", "websocket, h2c")]).is_none());
        let twice = [
            ("connection", "upgrade"),
            ("upgrade", "websocket"),
            ("upgrade", "h2c"),
        ];
        assert!(upgrade(&twice).is_none());
        assert!(
            upgrade(&[("upgrade", "websocket")]).is_none(),
            "without Connection: upgrade"
        );
    }

    #[test]
    fn h2c_settings_and_a_length_beside_chunks_go() {
        let mut headers = map(&[
            ("http2-settings", "AAMAAABkAAQAAP__"),
            ("content-length", "47"),
            ("transfer-encoding", "chunked"),
            ("x-kept", "1"),
        ]);
        remove_hop_by_hop(&mut headers, false);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key("x-kept"));
        let mut plain = map(&[("content-length", "5")]);
        remove_hop_by_hop(&mut plain, false);
        assert_eq!(plain.get("content-length").unwrap(), "5");
    }

    #[test]
    fn hop_by_hop_and_connection_listed_headers_go() {
        let mut headers = map(&[
            ("connection", "keep-alive, X-Secret"),
            ("connection", "x-other, , not a name, close"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("te", "gzip"),
            ("trailer", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-secret", "1"),
            ("x-other", "2"),
            ("x-kept", "3"),
        ]);
        remove_hop_by_hop(&mut headers, true);
        let names: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-kept"]);
    }

    #[test]
    fn the_fixed_names_are_where_their_indices_say() {
        let fixed = fixed_hop_by_hop();
        assert_eq!(fixed[CONNECTION_AT], header::CONNECTION);
        assert_eq!(fixed[TE_AT], header::TE);
        assert_eq!(fixed[TRANSFER_ENCODING_AT], header::TRANSFER_ENCODING);
    }

    #[test]
    fn only_the_hop_by_hop_headers_present_go() {
        // An upstream's usual answer: `Connection` alone, naming no header.
        let mut headers = map(&[
            ("connection", "keep-alive"),
            ("content-length", "2"),
            ("cache-control", "max-age=60"),
        ]);
        assert!(remove_hop_by_hop(&mut headers, false));
        let mut names: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["cache-control", "content-length"]);
        assert!(
            !remove_hop_by_hop(&mut headers, false),
            "nothing left to remove"
        );
        // A name listed by `Connection` goes even when it is a fixed one.
        let mut listed = map(&[("connection", "Upgrade, TE"), ("te", "trailers")]);
        assert!(remove_hop_by_hop(&mut listed, true));
        assert!(listed.is_empty(), "{listed:?}");
    }

    #[test]
    fn te_trailers_survives_when_asked() {
        let mut headers = map(&[("te", "trailers")]);
        remove_hop_by_hop(&mut headers, true);
        assert_eq!(headers["te"], "trailers");
        remove_hop_by_hop(&mut headers, false);
        assert!(headers.get("te").is_none());
    }

    #[test]
    fn upgrade_needs_both_headers() {
        assert!(requested_upgrade(&map(&[("upgrade", "websocket")])).is_none());
        assert_eq!(
            requested_upgrade(&map(&[
                ("connection", "keep-alive, Upgrade"),
                ("upgrade", "websocket")
            ]))
            .unwrap(),
            "websocket"
        );
    }
}
