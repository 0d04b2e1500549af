//! The primary cache key: scheme + host + path-and-query, as one string
//! `scheme://host/path?query`, after the layer's partition if it has one
//! (`len#partition`).
//!
//! The host is taken as the router takes it (the URI authority, which HTTP/2
//! and absolute-form HTTP/1.1 carry, else `Host`; but the client's own in
//! `OriginalHost` once a `rewrite.host` replaced it), so the key names the same
//! application the request was routed to. It is normalised (lower case, no
//! port, no trailing dot) and must be a plain host name or an IP literal: a
//! request whose host has any other character is not cached at all, so no
//! crafted `Host` can make two different URLs share one key. GET and HEAD
//! share keys; only GET responses are stored.

use http::Request;
use http::header::HOST;
use scalws_core::{ConnInfo, OriginalHost, Scheme};

/// The key of `request` in `partition` (empty: the default one), or `None`
/// when the request cannot be keyed safely (no host, an invalid host, a
/// target that is not origin-form).
#[inline]
pub(crate) fn primary_key<B>(request: &Request<B>, partition: &str) -> Option<String> {
    let scheme = request
        .extensions()
        .get::<ConnInfo>()
        .map_or(Scheme::Http, ConnInfo::scheme)
        .as_str();
    // The host the request was routed by: a `rewrite.host` keeps it here.
    let host = match request.extensions().get::<OriginalHost>() {
        Some(OriginalHost(original)) => original.to_str().ok()?,
        None => match request.uri().authority() {
            Some(authority) => authority.as_str(),
            None => request.headers().get(HOST)?.to_str().ok()?,
        },
    };
    let path_and_query = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let url = url_key(scheme, host, path_and_query)?;
    Some(partitioned(partition, url))
}

/// `url` (a key made by [`url_key`]) in `partition`: `len#partition` before
/// it, or nothing for the default (empty) partition. A URL key starts with
/// its scheme (a letter), a partitioned one with a digit, so no two
/// (partition, URL) pairs share a key.
pub(crate) fn partitioned(partition: &str, url: String) -> String {
    if partition.is_empty() {
        return url;
    }
    let len = partition.len().to_string();
    let mut key = String::with_capacity(len.len() + 1 + partition.len() + url.len());
    key.push_str(&len);
    key.push('#');
    key.push_str(partition);
    key.push_str(&url);
    key
}

/// The URL part of a key made by [`partitioned`] (without its partition).
pub(crate) fn url_part(key: &str) -> &str {
    if !key.starts_with(|c: char| c.is_ascii_digit()) {
        return key;
    }
    let Some((len, rest)) = key.split_once('#') else {
        return key;
    };
    len.parse::<usize>()
        .ok()
        .and_then(|len| rest.get(len..))
        .unwrap_or(key)
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
/// (in any partition).
pub(crate) fn host_and_path(key: &str) -> (&str, &str) {
    let rest = url_part(key);
    let rest = rest.split_once("://").map_or(key, |(_, rest)| rest);
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
        assert_eq!(
            primary_key(&request, "").as_deref(),
            Some("http://b.example/p")
        );
        let request = Request::get("/p")
            .header(HOST, "A.example:81")
            .body(())
            .expect("request");
        assert_eq!(
            primary_key(&request, "").as_deref(),
            Some("http://a.example/p")
        );
    }

    #[test]
    fn the_original_host_wins_over_a_rewritten_one() {
        let mut request = Request::get("/p")
            .header(HOST, "backend.internal")
            .body(())
            .expect("request");
        request
            .extensions_mut()
            .insert(OriginalHost(http::HeaderValue::from_static(
                "Client.example:443",
            )));
        assert_eq!(
            primary_key(&request, "").as_deref(),
            Some("http://client.example/p")
        );
        *request.uri_mut() = "http://backend.internal/p".parse().expect("uri");
        assert_eq!(
            primary_key(&request, "").as_deref(),
            Some("http://client.example/p")
        );
    }

    #[test]
    fn partitions_never_share_keys() {
        let request = Request::get("http://a.example/p")
            .body(())
            .expect("request");
        let a = primary_key(&request, "canary").expect("key");
        let b = primary_key(&request, "main").expect("key");
        let plain = primary_key(&request, "").expect("key");
        assert!(a != b && a != plain && b != plain);
        for key in [&a, &b, &plain] {
            assert_eq!(url_part(key), "http://a.example/p");
            assert_eq!(host_and_path(key), ("a.example", "/p"));
        }
        // A partition that looks like a URL cannot be confused with one.
        let tricky = primary_key(&request, "http://a.example/p#").expect("key");
        assert_eq!(host_and_path(&tricky), ("a.example", "/p"));
    }

    #[test]
    fn splits_back() {
        assert_eq!(
            host_and_path("https://a.example/x/y?z"),
            ("a.example", "/x/y?z")
        );
    }
}
