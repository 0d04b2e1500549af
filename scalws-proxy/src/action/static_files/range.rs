//! One `Range: bytes=...` (RFC 9110 section 14.2). Several ranges, or a header this
//! does not understand, are ignored and the whole file is served.

use http::HeaderMap;
use http::header::RANGE;

/// What a request's `Range` header asks of a file of a given length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ByteRange {
    /// No usable range: 200 with the whole file.
    Whole,
    /// Bytes `start..=end`, within the file: 206.
    Part {
        /// First byte.
        start: u64,
        /// Last byte, inclusive.
        end: u64,
    },
    /// A well-formed range the file cannot satisfy: 416.
    Unsatisfiable,
}

impl ByteRange {
    /// Reads the `Range` header of `headers` against a file of `len` bytes.
    pub(super) fn from_headers(headers: &HeaderMap, len: u64) -> Self {
        let mut values = headers.get_all(RANGE).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => value.to_str().map_or(Self::Whole, |v| Self::parse(v, len)),
            _ => Self::Whole,
        }
    }

    fn parse(value: &str, len: u64) -> Self {
        let value = value.trim();
        let Some(spec) = value
            .get(..6)
            .filter(|unit| unit.eq_ignore_ascii_case("bytes="))
            .and_then(|_| value.get(6..))
        else {
            return Self::Whole;
        };
        let Some((first, last)) = spec.split_once('-') else {
            return Self::Whole;
        };
        let (first, last) = (first.trim(), last.trim());
        if first.is_empty() {
            // `-n`: the last n bytes.
            let Some(n) = number(last) else {
                return Self::Whole;
            };
            if n == 0 {
                return Self::Unsatisfiable;
            }
            if len == 0 {
                // Satisfiable by RFC 9110, but no Content-Range can describe it.
                return Self::Whole;
            }
            return Self::Part {
                start: len.saturating_sub(n),
                end: len - 1,
            };
        }
        let Some(start) = number(first) else {
            return Self::Whole;
        };
        let end = if last.is_empty() {
            None
        } else {
            match number(last) {
                Some(end) if end >= start => Some(end),
                _ => return Self::Whole,
            }
        };
        if start >= len {
            return Self::Unsatisfiable;
        }
        let last_byte = len - 1;
        Self::Part {
            start,
            end: end.map_or(last_byte, |end| end.min(last_byte)),
        }
    }
}

/// Digits only (no sign, no spaces), fitting a u64.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ByteRange::{Part, Unsatisfiable, Whole};

    fn parse(v: &str, len: u64) -> ByteRange {
        ByteRange::parse(v, len)
    }

    #[test]
    fn single_ranges() {
        assert_eq!(parse("bytes=0-4", 10), Part { start: 0, end: 4 });
        assert_eq!(parse("bytes=5-", 10), Part { start: 5, end: 9 });
        assert_eq!(parse("bytes=-3", 10), Part { start: 7, end: 9 });
        assert_eq!(parse("bytes=-30", 10), Part { start: 0, end: 9 });
        assert_eq!(parse("bytes=2-100", 10), Part { start: 2, end: 9 });
        assert_eq!(parse("Bytes= 9-9 ", 10), Part { start: 9, end: 9 });
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(parse("bytes=10-", 10), Unsatisfiable);
        assert_eq!(parse("bytes=10-20", 10), Unsatisfiable);
        assert_eq!(parse("bytes=-0", 10), Unsatisfiable);
        assert_eq!(parse("bytes=0-", 0), Unsatisfiable);
    }

    #[test]
    fn ignored() {
        for v in [
            "bytes=0-1,3-4",
            "bytes=",
            "bytes=-",
            "bytes=a-b",
            "bytes=5-2",
            "bytes=+1-2",
            "items=0-1",
            "bytes 0-1",
            "bytes=0-1-2",
            "bytes=99999999999999999999999-",
        ] {
            assert_eq!(parse(v, 10), Whole, "{v}");
        }
        assert_eq!(parse("bytes=-5", 0), Whole);
    }

    #[test]
    fn several_range_headers_are_ignored() {
        let mut h = HeaderMap::new();
        h.append(RANGE, http::HeaderValue::from_static("bytes=0-1"));
        assert_eq!(ByteRange::from_headers(&h, 10), Part { start: 0, end: 1 });
        h.append(RANGE, http::HeaderValue::from_static("bytes=2-3"));
        assert_eq!(ByteRange::from_headers(&h, 10), Whole);
    }
}
