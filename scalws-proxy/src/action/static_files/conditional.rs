//! Conditional requests (RFC 9110 section 13): `If-None-Match`, `If-Modified-Since`,
//! `If-Range`.

use http::header::{IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE};
use http::{HeaderMap, HeaderValue};

use super::representation::Representation;

/// Whether a GET or HEAD gets 304: `If-None-Match` (weak comparison, `*`) when present,
/// else `If-Modified-Since` at or after the file's mtime, to the second.
#[inline]
pub(super) fn not_modified(headers: &HeaderMap, file: &Representation) -> bool {
    let mut tags = headers.get_all(IF_NONE_MATCH).iter().peekable();
    if tags.peek().is_some() {
        return tags.any(|list| list_matches_weak(list, &file.etag));
    }
    headers
        .get(IF_MODIFIED_SINCE)
        .and_then(http_date_secs)
        .is_some_and(|since| file.mtime_secs <= since)
}

/// Whether a `Range` may be honoured: no `If-Range`, or one naming this version by its
/// strong ETag or its exact Last-Modified date.
#[inline]
pub(super) fn range_allowed(headers: &HeaderMap, file: &Representation) -> bool {
    let Some(value) = headers.get(IF_RANGE) else {
        return true;
    };
    let bytes = value.as_bytes();
    if bytes.starts_with(b"\"") {
        return bytes == file.etag.as_bytes();
    }
    if bytes.starts_with(b"W/") {
        return false;
    }
    http_date_secs(value) == Some(file.mtime_secs)
}

fn list_matches_weak(list: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(list) = list.to_str() else {
        return false;
    };
    list.split(',').map(str::trim).any(|tag| {
        tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).as_bytes() == etag.as_bytes()
    })
}

fn http_date_secs(value: &HeaderValue) -> Option<u64> {
    let date = httpdate::parse_http_date(value.to_str().ok()?).ok()?;
    Some(date.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn file() -> Representation {
        Representation::new(
            Path::new("a.txt"),
            3,
            UNIX_EPOCH + Duration::new(1_600_000_000, 500),
        )
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    http::HeaderName::from_static(k),
                    HeaderValue::from_static(v),
                )
            })
            .collect()
    }

    #[test]
    fn if_none_match() {
        let f = file();
        let etag = f.etag.to_str().unwrap_or_default().to_owned();
        let mut h = HeaderMap::new();
        h.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("x")),
        );
        assert!(not_modified(&h, &f));
        let listed = format!("\"other\", W/{etag}");
        h.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(&listed).unwrap_or(HeaderValue::from_static("x")),
        );
        assert!(not_modified(&h, &f));
        assert!(not_modified(&headers(&[("if-none-match", "*")]), &f));
        assert!(!not_modified(
            &headers(&[("if-none-match", "\"other\"")]),
            &f
        ));
        // If-None-Match wins over If-Modified-Since.
        let h = headers(&[
            ("if-none-match", "\"other\""),
            ("if-modified-since", "Fri, 01 Jan 2100 00:00:00 GMT"),
        ]);
        assert!(!not_modified(&h, &f));
    }

    #[test]
    fn if_modified_since() {
        let f = file(); // Sun, 13 Sep 2020 12:26:40 GMT
        assert!(not_modified(
            &headers(&[("if-modified-since", "Sun, 13 Sep 2020 12:26:40 GMT")]),
            &f
        ));
        assert!(not_modified(
            &headers(&[("if-modified-since", "Sun, 13 Sep 2020 12:26:41 GMT")]),
            &f
        ));
        assert!(!not_modified(
            &headers(&[("if-modified-since", "Sun, 13 Sep 2020 12:26:39 GMT")]),
            &f
        ));
        assert!(!not_modified(
            &headers(&[("if-modified-since", "garbage")]),
            &f
        ));
        assert!(!not_modified(&HeaderMap::new(), &f));
    }

    #[test]
    fn if_range() {
        let f = file();
        assert!(range_allowed(&HeaderMap::new(), &f));
        let mut h = HeaderMap::new();
        h.insert(IF_RANGE, f.etag.clone());
        assert!(range_allowed(&h, &f));
        assert!(!range_allowed(&headers(&[("if-range", "\"other\"")]), &f));
        assert!(!range_allowed(
            &headers(&[("if-range", "W/\"60000000-1f4-3\"")]),
            &f
        ));
        assert!(range_allowed(
            &headers(&[("if-range", "Sun, 13 Sep 2020 12:26:40 GMT")]),
            &f
        ));
        assert!(!range_allowed(
            &headers(&[("if-range", "Sun, 13 Sep 2020 12:26:41 GMT")]),
            &f
        ));
    }
}
