//! Domain patterns as written in an application's `domains` list.

use std::fmt;
use std::str::FromStr;

/// A parsed domain pattern from config.
///
/// Names are stored lower-case and without a trailing dot, the form
/// [`normalize_host`](crate::normalize_host) gives request hosts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// An exact name: `example.com`, or a bracketed IPv6 literal: `[::1]`.
    Exact(Box<str>),
    /// `*.suffix`: exactly one label before the suffix. Holds the suffix without `*.`.
    OneLabel(Box<str>),
    /// `**.suffix`: one or more labels before the suffix. Holds the suffix without `**.`.
    AnyLabels(Box<str>),
    /// `*`: every host.
    CatchAll,
}

/// A domain pattern that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid domain \"{pattern}\": {reason}")]
pub struct InvalidHostPattern {
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

// === impl HostPattern ===

impl HostPattern {
    /// Parses a configured domain: `example.com`, `*.example.com`, `**.example.com` or `*`.
    ///
    /// The name is lower-cased and one trailing dot removed. Rejected: an empty name,
    /// spaces or other characters outside `a-z 0-9 - _ .`, a port, empty labels, a `*`
    /// that is not a whole leading label (`a*.com`, `*.*.com`, `foo.*`), and a wildcard
    /// without a suffix (`*.`, `**.`).
    pub fn parse(s: &str) -> Result<HostPattern, InvalidHostPattern> {
        let err = |reason| InvalidHostPattern {
            pattern: s.to_owned(),
            reason,
        };
        let lower = s.to_ascii_lowercase();
        match lower.as_str() {
            "" => return Err(err("empty domain")),
            "*" => return Ok(HostPattern::CatchAll),
            "*." | "**." | "**" => return Err(err("a wildcard needs a suffix")),
            _ => {}
        }
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        if name.is_empty() {
            return Err(err("empty domain"));
        }
        if name.starts_with('[') {
            return check_ipv6(name)
                .map(|()| HostPattern::Exact(name.into()))
                .map_err(err);
        }
        let (suffix, make): (&str, fn(Box<str>) -> HostPattern) =
            if let Some(rest) = name.strip_prefix("**.") {
                (rest, HostPattern::AnyLabels)
            } else if let Some(rest) = name.strip_prefix("*.") {
                (rest, HostPattern::OneLabel)
            } else {
                (name, HostPattern::Exact)
            };
        check_name(suffix).map_err(err)?;
        Ok(make(suffix.into()))
    }
}

/// Checks a lower-cased name without wildcard: labels of `a-z 0-9 - _`.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a wildcard needs a suffix");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label");
        }
        for b in label.bytes() {
            match b {
                b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => {}
                b'*' => return Err("\"*\" must be a whole label at the start"),
                b':' => return Err("a domain must not include a port"),
                b' ' | b'\t' => return Err("spaces are not allowed"),
                _ => return Err("invalid character (use a-z, 0-9, '-', '_' and '.')"),
            }
        }
    }
    Ok(())
}

/// Checks a bracketed IPv6 literal such as `[::1]`.
fn check_ipv6(name: &str) -> Result<(), &'static str> {
    let inner = name
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or("a domain must not include a port")?;
    if inner.is_empty() || !inner.bytes().all(is_ipv6_byte) {
        return Err("invalid IPv6 literal");
    }
    Ok(())
}

pub(super) fn is_ipv6_byte(b: u8) -> bool {
    b.is_ascii_hexdigit() || b == b':' || b == b'.'
}

impl FromStr for HostPattern {
    type Err = InvalidHostPattern;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HostPattern::parse(s)
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::OneLabel(suffix) => write!(f, "*.{suffix}"),
            HostPattern::AnyLabels(suffix) => write!(f, "**.{suffix}"),
            HostPattern::CatchAll => f.write_str("*"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn reason(s: &str) -> &'static str {
        HostPattern::parse(s).unwrap_err().reason
    }

    #[test]
    fn parses_each_kind() {
        assert_eq!(
            HostPattern::parse("Example.COM").unwrap(),
            HostPattern::Exact("example.com".into())
        );
        assert_eq!(
            HostPattern::parse("*.example.com").unwrap(),
            HostPattern::OneLabel("example.com".into())
        );
        assert_eq!(
            HostPattern::parse("**.example.org").unwrap(),
            HostPattern::AnyLabels("example.org".into())
        );
        assert_eq!(HostPattern::parse("*").unwrap(), HostPattern::CatchAll);
        assert_eq!(
            HostPattern::parse("[::1]").unwrap(),
            HostPattern::Exact("[::1]".into())
        );
        assert_eq!(
            "my_host-1".parse::<HostPattern>().unwrap(),
            HostPattern::Exact("my_host-1".into())
        );
    }

    #[test]
    fn removes_one_trailing_dot() {
        assert_eq!(
            HostPattern::parse("example.com.").unwrap(),
            HostPattern::Exact("example.com".into())
        );
        assert_eq!(
            HostPattern::parse("*.example.com.").unwrap(),
            HostPattern::OneLabel("example.com".into())
        );
        assert_eq!(reason("example.com.."), "empty label");
    }

    #[test]
    fn displays_as_written_in_config() {
        for s in [
            "example.com",
            "*.example.com",
            "**.example.org",
            "*",
            "[::1]",
        ] {
            assert_eq!(HostPattern::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            HostPattern::parse("*.EXAMPLE.com.").unwrap().to_string(),
            "*.example.com"
        );
    }

    #[test]
    fn rejects_bad_patterns_with_a_reason() {
        assert_eq!(reason(""), "empty domain");
        assert_eq!(reason("."), "empty domain");
        assert_eq!(reason("*."), "a wildcard needs a suffix");
        assert_eq!(reason("**."), "a wildcard needs a suffix");
        assert_eq!(reason("**"), "a wildcard needs a suffix");
        assert_eq!(reason("a*.com"), "\"*\" must be a whole label at the start");
        assert_eq!(
            reason("*.*.com"),
            "\"*\" must be a whole label at the start"
        );
        assert_eq!(reason("foo.*"), "\"*\" must be a whole label at the start");
        assert_eq!(
            reason("***.com"),
            "\"*\" must be a whole label at the start"
        );
        assert_eq!(
            reason("example.com:8080"),
            "a domain must not include a port"
        );
        assert_eq!(reason("[::1]:8080"), "a domain must not include a port");
        assert_eq!(reason("[]"), "invalid IPv6 literal");
        assert_eq!(reason("exa mple.com"), "spaces are not allowed");
        assert_eq!(reason(" example.com"), "spaces are not allowed");
        assert_eq!(reason("a..b"), "empty label");
        assert_eq!(reason(".example.com"), "empty label");
        assert_eq!(
            reason("exa$mple.com"),
            "invalid character (use a-z, 0-9, '-', '_' and '.')"
        );
        assert_eq!(
            reason("bücher.de"),
            "invalid character (use a-z, 0-9, '-', '_' and '.')"
        );
    }

    #[test]
    fn error_text_names_the_pattern() {
        let err = HostPattern::parse("a*.com").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid domain \"a*.com\": \"*\" must be a whole label at the start"
        );
    }
}
