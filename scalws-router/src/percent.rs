//! Percent-escape helpers shared by path normalisation and query matching.

/// The value of one ASCII hex digit.
#[inline]
pub(crate) fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte encoded by `%XY` at `bytes[i]` (which must be `%`), if well formed.
#[inline]
pub(crate) fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    let hi = hex_value(*bytes.get(i + 1)?)?;
    let lo = hex_value(*bytes.get(i + 2)?)?;
    Some(hi << 4 | lo)
}

/// RFC 3986 section 2.3 unreserved characters: `ALPHA DIGIT - . _ ~`.
#[inline]
pub(crate) fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}
