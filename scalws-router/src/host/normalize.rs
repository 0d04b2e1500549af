//! The request's host, in the form domain patterns are stored in.

use std::borrow::Cow;

use super::pattern::is_ipv6_byte;

/// The request's `Host` or `:authority` is empty or not a valid host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid Host")]
pub struct InvalidHost;

/// Normalises a `Host` header or `:authority` for [`HostTable::get`](crate::HostTable::get).
///
/// Lower-cases, removes the port (`[v6]:port` keeps the bracketed literal as the host)
/// and one trailing dot. Borrows from `raw` unless it holds upper-case letters.
///
/// Errors: an empty host, a byte outside `a-z 0-9 - _ .` (after lower-casing; an IPv6
/// literal in brackets holds hex digits, `:` and `.`), an empty label (`a..b`), or a
/// port that is not all digits.
pub fn normalize_host(raw: &str) -> Result<Cow<'_, str>, InvalidHost> {
    if raw.starts_with('[') {
        let (host, port) = split_bracketed(raw)?;
        check_port(port)?;
        return ipv6_literal(host);
    }
    // One pass over the name up to the port's `:`, checking its bytes and
    // labels as it goes; each byte's class comes from a table (one load
    // instead of a chain of range tests).
    let bytes = raw.as_bytes();
    let mut end = bytes.len();
    let mut upper = false;
    let mut label_start = true;
    for (at, &b) in bytes.iter().enumerate() {
        match CLASS[usize::from(b)] {
            NAME => label_start = false,
            UPPER => (upper, label_start) = (true, false),
            DOT if !label_start => label_start = true,
            COLON => {
                check_port(&raw[at + 1..])?;
                end = at;
                break;
            }
            _ => return Err(InvalidHost),
        }
    }
    let mut host = &raw[..end];
    // `label_start` still set: an empty host, or one ending in a dot, which
    // goes (one: `a..` was refused above, as the dot after a dot).
    if label_start {
        host = match host.strip_suffix('.') {
            Some(name) if !name.is_empty() => name,
            _ => return Err(InvalidHost),
        };
    }
    if upper {
        return Ok(Cow::Owned(lowercase(host)));
    }
    Ok(Cow::Borrowed(host))
}

/// The class of each byte of a host name: [`NAME`] (`a-z 0-9 - _`),
/// [`UPPER`] (`A-Z`), [`DOT`], [`COLON`] (the port's), or [`INVALID`].
static CLASS: [u8; 256] = {
    let mut class = [INVALID; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        class[b] = match byte {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => NAME,
            b'A'..=b'Z' => UPPER,
            b'.' => DOT,
            b':' => COLON,
            _ => INVALID,
        };
        b += 1;
    }
    class
};
const INVALID: u8 = 0;
const NAME: u8 = 1;
const UPPER: u8 = 2;
const DOT: u8 = 3;
const COLON: u8 = 4;

/// A port is digits, or nothing (`host:`).
#[inline]
fn check_port(port: &str) -> Result<(), InvalidHost> {
    if port.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(InvalidHost)
    }
}

/// Splits `[v6][:port]`; the port is `""` when absent.
#[cold]
#[inline(never)]
fn split_bracketed(raw: &str) -> Result<(&str, &str), InvalidHost> {
    let end = raw.find(']').ok_or(InvalidHost)? + 1;
    let (host, rest) = raw.split_at(end);
    match rest.strip_prefix(':') {
        Some(port) => Ok((host, port)),
        None if rest.is_empty() => Ok((host, "")),
        None => Err(InvalidHost),
    }
}

#[cold]
#[inline(never)]
fn ipv6_literal(host: &str) -> Result<Cow<'_, str>, InvalidHost> {
    let inner = &host[1..host.len() - 1];
    if inner.is_empty() || !inner.bytes().all(is_ipv6_byte) {
        return Err(InvalidHost);
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        return Ok(Cow::Owned(lowercase(host)));
    }
    Ok(Cow::Borrowed(host))
}

#[cold]
#[inline(never)]
fn lowercase(host: &str) -> String {
    host.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn norm(raw: &str) -> Result<Cow<'_, str>, InvalidHost> {
        normalize_host(raw)
    }

    #[test]
    fn normalises_port_case_and_trailing_dot() {
        assert_eq!(norm("example.com:8080").unwrap(), "example.com");
        assert_eq!(norm("example.com.").unwrap(), "example.com");
        assert_eq!(norm("Example.COM.:443").unwrap(), "example.com");
        assert_eq!(norm("WWW.Example.Com").unwrap(), "www.example.com");
        assert_eq!(norm("127.0.0.1:80").unwrap(), "127.0.0.1");
        assert_eq!(norm("my_host-1").unwrap(), "my_host-1");
        assert_eq!(norm("example.com:").unwrap(), "example.com");
        assert_eq!(norm("a.").unwrap(), "a");
        assert_eq!(norm("A.:1").unwrap(), "a");
        assert_eq!(norm("localhost:").unwrap(), "localhost");
        assert_eq!(norm("a.:").unwrap(), "a");
    }

    #[test]
    fn keeps_bracketed_ipv6_literal_as_host() {
        assert_eq!(norm("[::1]:8080").unwrap(), "[::1]");
        assert_eq!(norm("[::1]").unwrap(), "[::1]");
        assert_eq!(norm("[2001:DB8::1]:443").unwrap(), "[2001:db8::1]");
        assert_eq!(norm("[::ffff:1.2.3.4]").unwrap(), "[::ffff:1.2.3.4]");
    }

    #[test]
    fn borrows_when_already_normal() {
        for raw in [
            "example.com",
            "example.com:8080",
            "example.com.",
            "[::1]:80",
        ] {
            assert!(matches!(norm(raw).unwrap(), Cow::Borrowed(_)), "{raw}");
        }
        assert!(matches!(norm("Example.com").unwrap(), Cow::Owned(_)));
    }

    #[test]
    fn rejects_invalid_hosts() {
        for raw in [
            "",
            ":80",
            ".",
            "..",
            ".example.com",
            "a..b",
            "example.com..",
            "..:80",
            "host.:8.0",
            "host:abc",
            "host:80:80",
            "host:-1",
            "exa mple.com",
            "exa$mple.com",
            "bücher.de",
            "user@example.com",
            "[::1",
            "[]",
            "[::1]x",
            "[::1]:8x",
            "[::g]",
            "::1",
        ] {
            assert_eq!(norm(raw), Err(InvalidHost), "{raw:?}");
        }
    }

    /// The rules of [`normalize_host`] for a host without brackets, written
    /// plainly, one rule at a time.
    fn plainly(raw: &str) -> Result<String, InvalidHost> {
        let (host, port) = raw.split_once(':').unwrap_or((raw, ""));
        if !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidHost);
        }
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b);
        if host.split('.').any(str::is_empty) || !host.bytes().all(allowed) {
            return Err(InvalidHost);
        }
        Ok(host.to_owned())
    }

    /// Every string of up to five characters over an alphabet of each kind
    /// of byte gets the same answer from the one-pass normaliser as from
    /// the rules written plainly.
    #[test]
    fn agrees_with_the_rules_written_plainly() {
        const ALPHABET: [char; 9] = ['a', 'Z', '0', '-', '_', '.', ':', '$', 'ü'];
        let mut word = Vec::new();
        let mut checked = 0;
        for len in 0..=5 {
            let mut digits = vec![0; len];
            loop {
                word.clear();
                word.extend(digits.iter().map(|&d| ALPHABET[d]));
                let raw: String = word.iter().collect();
                let ours = norm(&raw).map(Cow::into_owned);
                assert_eq!(ours, plainly(&raw), "{raw:?}");
                checked += 1;
                // The next word: count in base ALPHABET.len().
                let Some(at) = digits.iter().rposition(|&d| d + 1 < ALPHABET.len()) else {
                    break;
                };
                digits[at] += 1;
                digits[at + 1..].fill(0);
            }
        }
        assert_eq!(checked, (0..=5).map(|n| 9usize.pow(n)).sum::<usize>());
    }

    #[test]
    fn error_text() {
        assert_eq!(InvalidHost.to_string(), "invalid Host");
    }
}
