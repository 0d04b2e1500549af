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

    /// The map's way; the wire's, and that both agree, is tested with the
    /// wire (`the_head_carries_the_forwarding_fields_the_map_would_hold`).
    #[test]
    fn forwarding_fields_append_and_set() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "2.2.2.2"),
            ("x-forwarded-for", "3.3.3.3"),
            ("x-forwarded-proto", "https"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        Forwarding {
            peer: Some(HeaderValue::from_static("127.0.0.1")),
            scheme: "http",
            host: Some(HeaderValue::from_static("example.com")),
        }
        .apply(&mut headers);
        assert_eq!(
            headers["x-forwarded-for"],
            "1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1"
        );
        assert_eq!(headers.get_all("x-forwarded-for").iter().count(), 1);
        assert_eq!(headers["x-forwarded-proto"], "http");
        assert_eq!(headers["x-forwarded-host"], "example.com");
    }
}
