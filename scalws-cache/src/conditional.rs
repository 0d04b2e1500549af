//! Conditional requests: the client's own (`If-None-Match`,
//! `If-Modified-Since`, answered with a 304 from a stored 200, RFC 9110 13.1
//! and RFC 9111 4.3.2), and the cache's (the validators of a stored response,
//! sent to the origin to revalidate it, RFC 9111 4.3.1).

use http::header::{
    ETAG, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED,
};
use http::{HeaderMap, StatusCode};

use crate::entry::Entry;

/// Whether the request carries a condition the cache evaluates.
#[inline]
pub(crate) fn has_conditions(request: &HeaderMap) -> bool {
    request.contains_key(IF_NONE_MATCH) || request.contains_key(IF_MODIFIED_SINCE)
}

/// Whether the request's conditions say the client's copy of stored 200
/// `entry` is current.
#[cold]
pub(crate) fn not_modified(entry: &Entry, request: &HeaderMap) -> bool {
    if entry.status != StatusCode::OK {
        return false;
    }
    if request.contains_key(IF_NONE_MATCH) {
        let Some(etag) = entry.headers.get(ETAG).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        return request
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .any(|tag| tag == "*" || weak_eq(tag, etag));
    }
    let since = request
        .get(IF_MODIFIED_SINCE)
        .and_then(|v| httpdate::parse_http_date(v.to_str().ok()?).ok());
    let modified = entry
        .headers
        .get(LAST_MODIFIED)
        .and_then(|v| httpdate::parse_http_date(v.to_str().ok()?).ok());
    matches!((since, modified), (Some(since), Some(modified)) if modified <= since)
}

/// Weak comparison of entity tags (RFC 9110 8.8.3.2).
fn weak_eq(a: &str, b: &str) -> bool {
    a.strip_prefix("W/").unwrap_or(a) == b.strip_prefix("W/").unwrap_or(b)
}

/// Turns the client's request into a revalidation of `entry`: the client's
/// own conditions are removed (the cache evaluates them on the answer) and
/// the entry's validators added. Returns whether it had any.
pub(crate) fn make_conditional(request: &mut HeaderMap, entry: &Entry) -> bool {
    for name in [
        IF_NONE_MATCH,
        IF_MODIFIED_SINCE,
        IF_MATCH,
        IF_UNMODIFIED_SINCE,
        IF_RANGE,
    ] {
        request.remove(name);
    }
    let mut any = false;
    if let Some(etag) = entry.headers.get(ETAG) {
        request.insert(IF_NONE_MATCH, etag.clone());
        any = true;
    }
    if let Some(modified) = entry.headers.get(LAST_MODIFIED) {
        request.insert(IF_MODIFIED_SINCE, modified.clone());
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_comparison() {
        assert!(weak_eq("W/\"a\"", "\"a\""));
        assert!(!weak_eq("\"a\"", "\"b\""));
    }
}
