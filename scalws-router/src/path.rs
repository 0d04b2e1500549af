//! Request path normalisation (SPEC section 4), applied before route matching.

use std::borrow::Cow;

use crate::percent::{escape_at, is_unreserved};

#[cfg(test)]
mod tests;

/// A request path that cannot be routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadPath {
    /// A `..` segment climbs above the root (`/../x`).
    #[error("path escapes the root")]
    EscapesRoot,
    /// The path does not start with `/`, or holds a `%` not followed by two hex digits.
    #[error("invalid path")]
    Invalid,
}

/// Normalises a request path (without its query) for [`RouteTable::route`](crate::RouteTable::route).
///
/// Percent-escapes of unreserved characters (`ALPHA DIGIT - . _ ~`) are decoded; every
/// other escape (`%2F`, `%00`, `%25`) stays as written. Then dot segments are removed
/// (RFC 3986 section 5.2.4), so `%2e%2e` acts as `..`. Nothing else changes: `//` stays.
///
/// Borrows from `path` when there is nothing to do, the common case.
pub fn normalize_path(path: &str) -> Result<Cow<'_, str>, BadPath> {
    if !path.starts_with('/') {
        return Err(BadPath::Invalid);
    }
    if is_plain(path.as_bytes()) {
        return Ok(Cow::Borrowed(path));
    }
    let decoded = match scan_escapes(path.as_bytes())? {
        Escapes::None => Cow::Borrowed(path),
        Escapes::Unreserved => Cow::Owned(decode_unreserved(path)),
    };
    if has_dot_segment(&decoded) {
        return remove_dot_segments(&decoded).map(Cow::Owned);
    }
    Ok(decoded)
}

/// The common path: no `%` and no segment that starts with a dot, so
/// nothing to decode or remove: one pass that looks further only at the
/// two bytes that matter (a table says which), instead of the two passes
/// below.
#[inline]
fn is_plain(bytes: &[u8]) -> bool {
    // `bytes[0]` is the leading `/`.
    for at in 1..bytes.len() {
        let b = bytes[at];
        if NOTABLE[usize::from(b)] && (b == b'%' || bytes[at - 1] == b'/') {
            return false;
        }
    }
    true
}

/// `%` and `.`.
static NOTABLE: [bool; 256] = {
    let mut notable = [false; 256];
    notable[b'%' as usize] = true;
    notable[b'.' as usize] = true;
    notable
};

enum Escapes {
    /// No escape decodes to an unreserved character.
    None,
    /// At least one does.
    Unreserved,
}

#[inline]
fn scan_escapes(bytes: &[u8]) -> Result<Escapes, BadPath> {
    let mut found = Escapes::None;
    let mut i = 0;
    while let Some(offset) = bytes[i..].iter().position(|&b| b == b'%') {
        i += offset;
        let byte = escape_at(bytes, i).ok_or(BadPath::Invalid)?;
        if is_unreserved(byte) {
            found = Escapes::Unreserved;
        }
        i += 3;
    }
    Ok(found)
}

/// Decodes escapes of unreserved characters; `path`'s escapes are known to be well formed.
#[cold]
#[inline(never)]
fn decode_unreserved(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut rest = 0;
    let mut i = 0;
    while let Some(offset) = bytes[i..].iter().position(|&b| b == b'%') {
        i += offset;
        if let Some(byte) = escape_at(bytes, i).filter(|&b| is_unreserved(b)) {
            out.push_str(&path[rest..i]);
            out.push(char::from(byte));
            rest = i + 3;
        }
        i += 3;
    }
    out.push_str(&path[rest..]);
    out
}

/// Whether a `/`-separated segment is `.` or `..`: one pass over the bytes
/// (a `split('/')` costs several times as much on every request).
#[inline]
fn has_dot_segment(path: &str) -> bool {
    let bytes = path.as_bytes();
    let ends_segment = |at: usize| bytes.get(at).is_none_or(|&b| b == b'/');
    bytes.iter().enumerate().any(|(i, &b)| {
        b == b'.'
            && (i == 0 || bytes[i - 1] == b'/')
            && (ends_segment(i + 1) || (bytes[i + 1] == b'.' && ends_segment(i + 2)))
    })
}

/// RFC 3986 section 5.2.4 for an absolute path, refusing to climb above the root.
#[cold]
#[inline(never)]
fn remove_dot_segments(path: &str) -> Result<String, BadPath> {
    let mut segments = path[1..].split('/').peekable();
    // Never empty at the end: the last segment is either kept or, when a dot, becomes "".
    let mut out: Vec<&str> = Vec::new();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            "." => {}
            ".." => {
                out.pop().ok_or(BadPath::EscapesRoot)?;
            }
            _ => {
                out.push(segment);
                continue;
            }
        }
        // A final dot segment leaves a directory: `/a/b/..` is `/a/`.
        if last {
            out.push("");
        }
    }
    let mut normal = String::with_capacity(path.len());
    for segment in out {
        normal.push('/');
        normal.push_str(segment);
    }
    Ok(normal)
}
