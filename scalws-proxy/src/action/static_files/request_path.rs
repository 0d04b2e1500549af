//! From a request path to the cache key and file-system path under the root.
//!
//! The router has already decoded unreserved escapes and removed dot segments, but
//! `serve` is also reachable directly (embedders, the `tower::Service` impl), so
//! nothing here relies on that: every check is made on the fully decoded segment.

use std::borrow::Cow;

use http::StatusCode;
use percent_encoding::percent_decode_str;

/// A route prefix, normalised at build: `""` (nothing to strip) or `/a/b`.
#[derive(Debug)]
pub(super) struct Prefix(Box<str>);

impl Prefix {
    pub(super) fn new(prefix: &str) -> Self {
        let trimmed = prefix.trim_end_matches('/');
        if trimmed.is_empty() {
            Self("".into())
        } else if trimmed.starts_with('/') {
            Self(trimmed.into())
        } else {
            Self(format!("/{trimmed}").into())
        }
    }

    /// `path` without the prefix, segment-wise: `/static` strips `/static/a` to `/a`
    /// and `/static` to `""`, but not `/statics`.
    #[inline]
    pub(super) fn strip<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix(&*self.0)?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }
}

/// The path relative to the root (`a/b.css`, `""` for the root itself), decoded.
///
/// Empty segments are dropped. A decoded segment holding NUL is 400; one holding `/`,
/// `.` or `..`, a dotfile not named in `allowed` (`.well-known`, say), or not UTF-8
/// is 404.
#[inline]
pub(super) fn relative<'a>(
    rest: &'a str,
    allowed: &[Box<str>],
) -> Result<Cow<'a, str>, StatusCode> {
    let trimmed = rest.trim_start_matches('/');
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    // Common case: nothing to decode or drop, so the key borrows from the request.
    match scan(trimmed) {
        Scan::Plain { dotted } => {
            if dotted && trimmed.split('/').any(|seg| hidden(seg, allowed)) {
                return Err(StatusCode::NOT_FOUND);
            }
            Ok(Cow::Borrowed(trimmed))
        }
        Scan::Decode => decode(trimmed, allowed).map(Cow::Owned),
    }
}

/// What one pass over a trimmed path finds.
enum Scan {
    /// No escape, NUL or empty segment; `dotted` when a segment starts with `.`.
    Plain { dotted: bool },
    /// Something to decode or drop.
    Decode,
}

#[inline]
fn scan(path: &str) -> Scan {
    let bytes = path.as_bytes();
    let mut dotted = bytes.first() == Some(&b'.');
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'%' | 0 => return Scan::Decode,
            b'/' => match bytes.get(i + 1) {
                Some(b'/') => return Scan::Decode,
                Some(b'.') => dotted = true,
                _ => {}
            },
            _ => {}
        }
    }
    Scan::Plain { dotted }
}

/// A segment never served: `.`, `..`, and dotfiles other than the allowed ones.
#[inline]
fn hidden(segment: &str, allowed: &[Box<str>]) -> bool {
    segment.starts_with('.')
        && (segment == "." || segment == ".." || !allowed.iter().any(|name| **name == *segment))
}

#[cold]
#[inline(never)]
fn decode(path: &str, allowed: &[Box<str>]) -> Result<String, StatusCode> {
    let mut out = String::with_capacity(path.len());
    for raw in path.split('/').filter(|seg| !seg.is_empty()) {
        let bytes: Cow<'_, [u8]> = percent_decode_str(raw).into();
        if bytes.contains(&0) {
            return Err(StatusCode::BAD_REQUEST);
        }
        if bytes.contains(&b'/') {
            return Err(StatusCode::NOT_FOUND);
        }
        let seg = std::str::from_utf8(&bytes).map_err(|_| StatusCode::NOT_FOUND)?;
        if hidden(seg, allowed) {
            return Err(StatusCode::NOT_FOUND);
        }
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(seg);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(path: &str) -> Result<String, StatusCode> {
        relative(path, &[]).map(Cow::into_owned)
    }

    #[test]
    fn prefix_strips_whole_segments() {
        let p = Prefix::new("/static/");
        assert_eq!(p.strip("/static/a.css"), Some("/a.css"));
        assert_eq!(p.strip("/static"), Some(""));
        assert_eq!(p.strip("/statics/a.css"), None);
        assert_eq!(Prefix::new("/").strip("/a"), Some("/a"));
        assert_eq!(Prefix::new("").strip("/a"), Some("/a"));
        assert_eq!(Prefix::new("static").strip("/static/a"), Some("/a"));
    }

    #[test]
    fn only_the_allowed_dotfiles_are_served() {
        let allowed: &[Box<str>] = &[".well-known".into()];
        assert_eq!(
            rel_with("/.well-known/acme-challenge/t", allowed).as_deref(),
            Ok(".well-known/acme-challenge/t")
        );
        assert_eq!(
            rel_with("/%2ewell-known/security.txt", allowed).as_deref(),
            Ok(".well-known/security.txt")
        );
        for refused in [
            "/.env",
            "/.git/config",
            "/a/.well-knownx/b",
            "/.well-known/../.env",
            "/%2e%2e/x",
        ] {
            assert_eq!(
                rel_with(refused, allowed),
                Err(StatusCode::NOT_FOUND),
                "{refused}"
            );
        }
        assert_eq!(rel_with("/.well-known/x", &[]), Err(StatusCode::NOT_FOUND));
    }

    fn rel_with(path: &str, allowed: &[Box<str>]) -> Result<String, StatusCode> {
        relative(path, allowed).map(Cow::into_owned)
    }

    /// The one-pass scan against what it replaced (`any` for `%` and NUL,
    /// `contains("//")`, then a split looking for hidden segments), over
    /// every path of these bytes up to 7 long.
    #[test]
    fn the_one_pass_scan_agrees_with_the_searches_it_replaced() {
        let allowed: &[Box<str>] = &[".ok".into()];
        let mut paths = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..7 {
            last = last
                .iter()
                .flat_map(|p| ["/", ".", "a", "%", "k", "o"].map(|b| format!("{p}{b}")))
                .collect();
            paths.extend(last.iter().cloned());
        }
        for path in paths {
            let trimmed = path.trim_start_matches('/');
            let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
            let before = if !trimmed.bytes().any(|b| b == b'%' || b == 0) && !trimmed.contains("//")
            {
                if trimmed.split('/').any(|seg| hidden(seg, allowed)) {
                    Err(StatusCode::NOT_FOUND)
                } else {
                    Ok(Cow::Borrowed(trimmed))
                }
            } else {
                decode(trimmed, allowed).map(Cow::Owned)
            };
            let now = relative(&path, allowed);
            assert_eq!(now, before, "{path:?}");
            assert_eq!(
                matches!(now, Ok(Cow::Borrowed(_))),
                matches!(before, Ok(Cow::Borrowed(_))),
                "{path:?}"
            );
        }
    }

    #[test]
    fn plain_paths_borrow() {
        assert!(matches!(
            relative("/a/b.css", &[]),
            Ok(Cow::Borrowed("a/b.css"))
        ));
        assert!(matches!(relative("/dir/", &[]), Ok(Cow::Borrowed("dir"))));
        assert!(matches!(relative("", &[]), Ok(Cow::Borrowed(""))));
        assert!(matches!(relative("/", &[]), Ok(Cow::Borrowed(""))));
    }

    #[test]
    fn segments_are_decoded_once() {
        assert_eq!(rel("/a%20b/c%C3%A9").as_deref(), Ok("a b/cé"));
        assert_eq!(rel("/%252e%252e/x").as_deref(), Ok("%2e%2e/x"));
        assert_eq!(rel("//a///b//").as_deref(), Ok("a/b"));
    }

    #[test]
    fn bad_segments_are_rejected() {
        for path in [
            "/..",
            "/.",
            "/a/../b",
            "/%2e%2e/x",
            "/%2E%2e",
            "/%2e",
            "/..%2fx",
            "/a%2Fb",
            "/.git/config",
            "/a/.env",
            "/%2egit",
            "/%ff",
            "/a%C3",
        ] {
            assert_eq!(rel(path), Err(StatusCode::NOT_FOUND), "{path}");
        }
        for path in ["/%00", "/a%00b", "/a\0b"] {
            assert_eq!(rel(path), Err(StatusCode::BAD_REQUEST), "{path}");
        }
    }
}
