//! The `X-Forwarded-*` fields a proxy adds for its upstream. An `http1`
//! upstream's wire writes them as it writes the head (where most requests
//! come without them, three inserts into the header map, each of a name
//! hashed byte by byte, cost about 2 % of a proxied request); every other
//! way (`http2`, `https`, an upgrade, the embedder's upstream layers, a
//! balancer that hashes one of them) puts them in the map.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

pub(crate) static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(crate) static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// What the proxy tells its upstream about a request's client: its address
/// appended to `X-Forwarded-For`, `X-Forwarded-Proto` and
/// `X-Forwarded-Host` set, whatever the client sent in them.
#[derive(Clone, Debug)]
pub(crate) struct Forwarding {
    /// The client's IP; `None` (no `ConnInfo`: an embedder's own server)
    /// leaves `X-Forwarded-For` as it came.
    pub(crate) peer: Option<HeaderValue>,
    pub(crate) scheme: &'static str,
    /// `None` removes the client's `X-Forwarded-Host`.
    pub(crate) host: Option<HeaderValue>,
}

impl Forwarding {
    /// Puts the fields in `headers`: `X-Forwarded-For`'s lines become one,
    /// the client's values joined with ", " and the peer last.
    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        if let Some(peer) = &self.peer {
            // One lookup of the name: most requests come without it.
            match headers.entry(&X_FORWARDED_FOR) {
                header::Entry::Vacant(vacant) => {
                    vacant.insert(peer.clone());
                }
                header::Entry::Occupied(mut occupied) => {
                    let mut value = Vec::new();
                    joined(&mut value, occupied.iter());
                    value.extend_from_slice(peer.as_bytes());
                    if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(value)) {
                        // Every earlier line replaced by the one value. Not
                        // by `insert_mult`: http 1.5's panics when the name
                        // has three lines or more (it unlinks the extra
                        // values after taking the entry's links).
                        occupied.insert(value);
                    }
                }
            }
        }
        headers.insert(
            X_FORWARDED_PROTO.clone(),
            HeaderValue::from_static(self.scheme),
        );
        match &self.host {
            Some(host) => {
                headers.insert(X_FORWARDED_HOST.clone(), host.clone());
            }
            None => {
                headers.remove(&X_FORWARDED_HOST);
            }
        }
    }

    /// Whether `name` is one of the fields a `Forwarding` sets.
    pub(crate) fn sets(name: &HeaderName) -> bool {
        *name == X_FORWARDED_FOR || *name == X_FORWARDED_PROTO || *name == X_FORWARDED_HOST
    }

    /// Whether a field of the request's own is left out of the head, to be
    /// replaced by what [`Forwarding::write`] writes.
    #[inline]
    pub(crate) fn replaces(&self, name: &HeaderName) -> bool {
        *name == X_FORWARDED_PROTO
            || *name == X_FORWARDED_HOST
            || (*name == X_FORWARDED_FOR && self.peer.is_some())
    }

    /// Writes the fields as head lines, into a head whose own lines left out
    /// those [`Forwarding::replaces`]. `client_for`: the request came with
    /// `X-Forwarded-For` (in `headers`), whose values go first.
    pub(crate) fn write(&self, out: &mut Vec<u8>, headers: &HeaderMap, client_for: bool) {
        if let Some(peer) = &self.peer {
            out.extend_from_slice(b"x-forwarded-for: ");
            if client_for {
                joined(out, headers.get_all(&X_FORWARDED_FOR).iter());
            }
            out.extend_from_slice(peer.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"x-forwarded-proto: ");
        out.extend_from_slice(self.scheme.as_bytes());
        out.extend_from_slice(b"\r\n");
        if let Some(host) = &self.host {
            out.extend_from_slice(b"x-forwarded-host: ");
            out.extend_from_slice(host.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends the values of a list field (it may come as several lines) to
/// `out`, each followed by ", ", leaving out values that are not text.
fn joined<'a>(out: &mut Vec<u8>, values: impl Iterator<Item = &'a HeaderValue>) {
    for value in values.filter(|v| v.to_str().is_ok()) {
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b", ");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn map(pairs: &[(&'static str, &'static [u8])]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_bytes(value).unwrap());
        }
        headers
    }

    fn forwarding(peer: Option<&'static str>, host: Option<&'static str>) -> Forwarding {
        Forwarding {
            peer: peer.map(HeaderValue::from_static),
            scheme: "http",
            host: host.map(HeaderValue::from_static),
        }
    }

    /// The lines `write` adds after the request's own, as `apply` leaves
    /// the map: both ways give the upstream the same fields.
    fn written(forwarding: &Forwarding, headers: &HeaderMap) -> HeaderMap {
        let mut out = Vec::new();
        let mut client_for = false;
        for (name, value) in headers {
            if forwarding.replaces(name) {
                client_for |= *name == X_FORWARDED_FOR;
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        forwarding.write(&mut out, headers, client_for);
        out.extend_from_slice(b"\r\n");
        let mut parsed = [httparse::EMPTY_HEADER; 16];
        let (_, fields) = httparse::parse_headers(&out, &mut parsed).unwrap().unwrap();
        let mut map = HeaderMap::new();
        for field in fields {
            map.append(
                HeaderName::from_bytes(field.name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(field.value).unwrap(),
            );
        }
        map
    }

    fn lines(headers: &HeaderMap, name: &str) -> Vec<Vec<u8>> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn forwarding_fields_append_and_set() {
        let headers = map(&[
            ("x-forwarded-for", b"1.1.1.1"),
            ("x-forwarded-for", b"2.2.2.2"),
            ("x-forwarded-proto", b"https"),
        ]);
        let forwarding = forwarding(Some("127.0.0.1"), Some("example.com"));
        let mut applied = headers.clone();
        forwarding.apply(&mut applied);
        assert_eq!(applied["x-forwarded-for"], "1.1.1.1, 2.2.2.2, 127.0.0.1");
        assert_eq!(applied.get_all("x-forwarded-for").iter().count(), 1);
        assert_eq!(applied["x-forwarded-proto"], "http");
        assert_eq!(applied["x-forwarded-host"], "example.com");
        assert_eq!(written(&forwarding, &headers), applied);
    }

    /// The map and the wire agree on every mix of what the client sent and
    /// what the proxy knows.
    #[test]
    fn the_wire_writes_what_the_map_would_hold() {
        let clients: [&[(&'static str, &'static [u8])]; 6] = [
            &[],
            &[("accept", b"*/*")],
            &[("x-forwarded-for", b"10.0.0.1"), ("accept", b"*/*")],
            &[
                ("x-forwarded-for", b"10.0.0.1"),
                ("x-forwarded-for", b"caf\xc3\xa9"),
                ("x-forwarded-for", b"10.0.0.2"),
            ],
            &[("x-forwarded-for", b"\xff")],
            &[
                ("x-forwarded-host", b"evil.example"),
                ("x-forwarded-proto", b"gopher"),
                ("x-forwarded-host", b"more.example"),
            ],
        ];
        for client in clients {
            for peer in [None, Some("192.0.2.7")] {
                for host in [None, Some("app.example.com")] {
                    let headers = map(client);
                    let forwarding = forwarding(peer, host);
                    let mut applied = headers.clone();
                    forwarding.apply(&mut applied);
                    let written = written(&forwarding, &headers);
                    for name in [
                        "x-forwarded-for",
                        "x-forwarded-proto",
                        "x-forwarded-host",
                        "accept",
                    ] {
                        assert_eq!(
                            lines(&written, name),
                            lines(&applied, name),
                            "{name}: client {client:?}, peer {peer:?}, host {host:?}"
                        );
                    }
                    assert_eq!(written.len(), applied.len());
                }
            }
        }
    }
}
