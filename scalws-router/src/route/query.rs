//! Query conditions: `key=value` pairs compared after form-style percent-decoding.

use crate::percent::escape_at;

/// Whether the raw query string holds `key=value` (after decoding) among its pairs.
pub(super) fn has_pair(query: &str, key: &str, value: &str) -> bool {
    query.split('&').any(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        decodes_to(k, key) && decodes_to(v, value)
    })
}

/// Compares the decoded form of `raw` with `want`, without allocating.
fn decodes_to(raw: &str, want: &str) -> bool {
    // Decoding never lengthens: a cheap reject for most mismatches.
    if raw.len() < want.len() {
        return false;
    }
    Decoded {
        raw: raw.as_bytes(),
        at: 0,
    }
    .eq(want.bytes())
}

/// The bytes of a query component with `+` as space and `%XY` decoded; a `%` not
/// followed by two hex digits stands for itself, as HTML forms decode it.
struct Decoded<'a> {
    raw: &'a [u8],
    at: usize,
}

impl Iterator for Decoded<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        let b = *self.raw.get(self.at)?;
        let (byte, width) = match b {
            b'+' => (b' ', 1),
            b'%' => escape_at(self.raw, self.at).map_or((b'%', 1), |byte| (byte, 3)),
            _ => (b, 1),
        };
        self.at += width;
        Some(byte)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent_and_plus() {
        assert!(has_pair("version=2", "version", "2"));
        assert!(has_pair("q=a+b", "q", "a b"));
        assert!(has_pair("q=a%20b", "q", "a b"));
        assert!(has_pair("na%6De=caf%C3%A9", "name", "café"));
        assert!(has_pair("q=100%", "q", "100%"));
        assert!(has_pair("q=%zz", "q", "%zz"));
        assert!(has_pair("q=a%2Bb", "q", "a+b"));
        assert!(!has_pair("q=a%2Bb", "q", "a b"));
    }

    #[test]
    fn any_of_several_values_and_bare_keys() {
        assert!(has_pair("v=1&v=2", "v", "2"));
        assert!(has_pair("a&b=1", "a", ""));
        assert!(has_pair("a=&b=1", "a", ""));
        assert!(has_pair("&&b=1&", "b", "1"));
        assert!(!has_pair("v=1&v=2", "v", "3"));
        assert!(!has_pair("version=22", "version", "2"));
        assert!(!has_pair("version=", "version", "2"));
        assert!(!has_pair("Version=2", "version", "2"));
        assert!(!has_pair("", "version", "2"));
    }
}
