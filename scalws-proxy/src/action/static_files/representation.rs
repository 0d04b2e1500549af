//! What a served file's headers say about it, computed once per file version.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use http::header::{ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_TYPE, ETAG, LAST_MODIFIED};
use http::{HeaderMap, HeaderValue};

/// A file version's header values, precomputed so a cached hit formats nothing.
#[derive(Debug)]
pub(super) struct Representation {
    pub(super) len: u64,
    pub(super) mtime: SystemTime,
    /// `mtime` in whole seconds since the epoch, the precision of HTTP dates.
    pub(super) mtime_secs: u64,
    pub(super) content_type: HeaderValue,
    /// Strong: `"<mtime secs hex>-<mtime nanos hex>-<len hex>"`.
    pub(super) etag: HeaderValue,
    pub(super) last_modified: Option<HeaderValue>,
    /// The headers of a whole 200 answer, in the order they are sent:
    /// cloning the map costs a third of inserting its five headers anew.
    pub(super) whole: HeaderMap,
}

impl Representation {
    /// `name` gives the Content-Type by its extension.
    pub(super) fn new(name: &Path, len: u64, mtime: SystemTime) -> Self {
        let since_epoch = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
        let (secs, nanos) = (since_epoch.as_secs(), since_epoch.subsec_nanos());
        let etag = HeaderValue::from_str(&format!("\"{secs:x}-{nanos:x}-{len:x}\""))
            .unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
        let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(mtime)).ok();
        let mut file = Self {
            len,
            mtime,
            mtime_secs: secs,
            content_type: content_type(name),
            etag,
            last_modified,
            whole: HeaderMap::new(),
        };
        let mut whole = HeaderMap::with_capacity(5);
        file.representation_headers(&mut whole);
        whole.insert(CONTENT_LENGTH, HeaderValue::from(len));
        file.whole = whole;
        file
    }

    /// Content-Type, Accept-Ranges, ETag and Last-Modified: what every
    /// answer for this version carries (200, 206, 304).
    pub(super) fn representation_headers(&self, headers: &mut HeaderMap) {
        headers.insert(CONTENT_TYPE, self.content_type.clone());
        headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        headers.insert(ETAG, self.etag.clone());
        if let Some(last_modified) = &self.last_modified {
            headers.insert(LAST_MODIFIED, last_modified.clone());
        }
    }
}

/// The Content-Type for a file name: mime_guess's first guess, `; charset=utf-8` on
/// text types, `application/octet-stream` when unknown.
pub(super) fn content_type(name: &Path) -> HeaderValue {
    const OCTET_STREAM: HeaderValue = HeaderValue::from_static("application/octet-stream");
    let Some(mime) = mime_guess::from_path(name).first_raw() else {
        return OCTET_STREAM;
    };
    let text = mime.starts_with("text/")
        || matches!(
            mime,
            "application/javascript" | "application/json" | "image/svg+xml"
        );
    let value = if text {
        HeaderValue::from_str(&format!("{mime}; charset=utf-8"))
    } else {
        HeaderValue::from_str(mime)
    };
    value.unwrap_or(OCTET_STREAM)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn content_types() {
        let ct = |name: &str| content_type(Path::new(name));
        assert_eq!(ct("a.css"), "text/css; charset=utf-8");
        assert_eq!(ct("a.html"), "text/html; charset=utf-8");
        assert_eq!(ct("a.json"), "application/json; charset=utf-8");
        assert_eq!(ct("a.svg"), "image/svg+xml; charset=utf-8");
        assert_eq!(ct("a.png"), "image/png");
        assert_eq!(ct("a.unknownext"), "application/octet-stream");
        assert_eq!(ct("noext"), "application/octet-stream");
        assert!(
            ct("a.js")
                .to_str()
                .is_ok_and(|v| v.ends_with("javascript; charset=utf-8"))
        );
    }

    #[test]
    fn validators() {
        let mtime = UNIX_EPOCH + Duration::new(0x6000_0000, 0x1f);
        let r = Representation::new(Path::new("a.txt"), 0x2a, mtime);
        assert_eq!(r.etag, "\"60000000-1f-2a\"");
        assert_eq!(r.whole[http::header::CONTENT_LENGTH], "42");
        assert_eq!(r.mtime_secs, 0x6000_0000);
        assert_eq!(
            r.last_modified.as_ref().and_then(|v| v.to_str().ok()),
            Some("Thu, 14 Jan 2021 08:25:36 GMT")
        );
    }
}
