//! The primary cache key: scheme + host + path-and-query, as one string
//! `scheme://host/path?query`.
//!
//! The host is taken as the router takes it (the URI authority, which HTTP/2
//! and absolute-form HTTP/1.1 carry, else `Host`), so the key names the same
//! application the request was routed to. It is normalised (lower case, no
//! port, no trailing dot) and must be a plain host name or an IP literal: a
//! request whose host has any other character is not cached at all, so no
//! crafted `Host` can make two different URLs share one key. GET and HEAD
//! share keys; only GET responses are stored.

use http::Request;
use http::header::HOST;
use scalws_core::{ConnInfo, Scheme};

/// The key of `request`, or `None` when the request cannot be keyed safely
/// (no host, an invalid host, a target that is not origin-form).
#[inline]
pub(crate) fn primary_key<B>(request: &Request<B>) -> Option<String> {
    let scheme = request
        .extensions()
        .get::<ConnInfo>()
        .map_or(Scheme::Http, ConnInfo::scheme)
        .as_str();
    let host = match request.uri().authority() {
        Some(authority) => authority.as_str(),
        None => request.headers().get(HOST)?.to_str().ok()?,
    };
    let path_and_query = request.uri().path_and_query().map_or("/", |p| p.as_str());
    url_key(scheme, host, path_and_query)
}

/// The key of `scheme://host/path?query`; `host` may carry a port.
pub(crate) fn url_key(scheme: &str, host: &str, path_and_query: &str) -> Option<String> {
    let host = normalize_host(host)?;
    if !path_and_query.starts_with('/') {
        return None;
    }
    let mut key = String::with_capacity(scheme.len() + 3 + host.len() + path_and_query.len());
    key.push_str(scheme);
    key.push_str("://");
    let host_start = key.len();
    key.push_str(host);
    key[host_start..].make_ascii_lowercase();
    key.push_str(path_and_query);
    Some(key)
}

/// The host and path-and-query of a key made by [`url_key`].
pub(crate) fn host_and_path(key: &str) -> (&str, &str) {
    let rest = key.split_once("://").map_or(key, |(_, rest)| rest);
    // A valid host has no '/', and a path starts with one.
    rest.split_at(rest.find('/').unwrap_or(rest.len()))
}

/// `host` without port and trailing dot, if it is a valid host name or IP
/// literal (still in its original case).
pub(crate) fn normalize_host(raw: &str) -> Option<&str> {
    if let Some(v6) = raw.strip_prefix('[') {
        let end = v6.find(']')?;
        let port = &v6[end + 1..];
        if !(port.is_empty() || valid_port(port.strip_prefix(':')?)) {
            return None;
        }
        let literal = &v6[..end];
        let ok = !literal.is_empty()
            && literal
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        return ok.then(|| &raw[..end + 2]);
    }
    let host = match raw.rsplit_once(':') {
        Some((host, port)) if valid_port(port) => host,
        Some(_) => return None,
        None => raw,
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    let mut label_start = true;
    for b in host.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => label_start = false,
            b'.' if !label_start => label_start = true,
            _ => return None,
        }
    }
    (!label_start).then_some(host)
}

fn valid_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str, path: &str) -> Option<String> {
        url_key("http", host, path)
    }

    #[test]
    fn hosts_normalise() {
        assert_eq!(
            key("Example.COM.:8080", "/a?b").as_deref(),
            Some("http://example.com/a?b")
        );
        assert_eq!(key("[::1]:80", "/").as_deref(), Some("http://[::1]/"));
        assert_eq!(
            key("127.0.0.1", "/x").as_deref(),
            Some("http://127.0.0.1/x")
        );
    }

    #[test]
    fn crafted_hosts_are_not_keyed() {
        for bad in [
            "a/b", "a b", "", ".", "a..b", "a:b", "a@b", "[::1", "[zz]", "a?b",
        ] {
            assert_eq!(key(bad, "/"), None, "{bad}");
        }
        assert_eq!(key("a", "*"), None);
    }

    #[test]
    fn authority_wins_over_host_header() {
        let request = Request::get("http://b.example/p")
            .header(HOST, "a.example")
            .body(())
            .expect("request");
        assert_eq!(primary_key(&request).as_deref(), Some("http://b.example/p"));
        let request = Request::get("/p")
            .header(HOST, "A.example:81")
            .body(())
            .expect("request");
        assert_eq!(primary_key(&request).as_deref(), Some("http://a.example/p"));
    }

    #[test]
    fn splits_back() {
        assert_eq!(
            host_and_path("https://a.example/x/y?z"),
            ("a.example", "/x/y?z")
        );
    }
}
