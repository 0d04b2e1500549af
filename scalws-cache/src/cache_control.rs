//! `Cache-Control` directives (RFC 9111 5.2), of requests and of responses.
//!
//! Parsing tolerates what real servers send: names in any case, quoted
//! arguments with commas inside, several header lines. An argument that is not
//! a valid number counts as `0` (stale) for the freshness directives, which is
//! the conservative reading (RFC 9111 4.2.1). A directive given twice keeps the
//! smaller value.

use http::HeaderMap;
use http::header::CACHE_CONTROL;

/// The largest delta-seconds we keep (2^31, RFC 9111 1.2.2).
const MAX_DELTA: u64 = 1 << 31;

/// The response directives a shared cache acts on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResponseDirectives {
    pub(crate) no_store: bool,
    /// `no-cache`, with or without field names (treated alike: revalidate each use).
    pub(crate) no_cache: bool,
    /// `private`, with or without field names (treated alike: not stored).
    pub(crate) private: bool,
    pub(crate) public: bool,
    /// `must-revalidate` or `proxy-revalidate`: never served stale.
    pub(crate) must_revalidate: bool,
    pub(crate) max_age: Option<u64>,
    pub(crate) s_maxage: Option<u64>,
    pub(crate) stale_while_revalidate: Option<u64>,
    pub(crate) stale_if_error: Option<u64>,
}

impl ResponseDirectives {
    /// The directives of every `Cache-Control` line of `headers`.
    pub(crate) fn parse(headers: &HeaderMap) -> Self {
        let mut d = Self::default();
        for_each_directive(headers, |name, value| match name {
            "no-store" => d.no_store = true,
            "no-cache" => d.no_cache = true,
            "private" => d.private = true,
            "public" => d.public = true,
            "must-revalidate" | "proxy-revalidate" => d.must_revalidate = true,
            "max-age" => keep_min(&mut d.max_age, seconds(value)),
            "s-maxage" => keep_min(&mut d.s_maxage, seconds(value)),
            "stale-while-revalidate" => keep_min(&mut d.stale_while_revalidate, seconds(value)),
            "stale-if-error" => keep_min(&mut d.stale_if_error, seconds(value)),
            _ => {}
        });
        d
    }
}

/// The request directives a shared cache acts on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RequestDirectives {
    pub(crate) no_store: bool,
    pub(crate) no_cache: bool,
    pub(crate) only_if_cached: bool,
    pub(crate) max_age: Option<u64>,
    /// `max-stale` without a value accepts any staleness (`u64::MAX`).
    pub(crate) max_stale: Option<u64>,
    pub(crate) min_fresh: Option<u64>,
    pub(crate) stale_if_error: Option<u64>,
}

impl RequestDirectives {
    /// The directives of the request, or none when it has no `Cache-Control`
    /// (the common case: one failed lookup).
    #[inline]
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        if headers.contains_key(CACHE_CONTROL) {
            Self::parse(headers)
        } else {
            Self::default()
        }
    }

    #[cold]
    #[inline(never)]
    fn parse(headers: &HeaderMap) -> Self {
        let mut d = Self::default();
        for_each_directive(headers, |name, value| match name {
            "no-store" => d.no_store = true,
            "no-cache" => d.no_cache = true,
            "only-if-cached" => d.only_if_cached = true,
            "max-age" => keep_min(&mut d.max_age, seconds(value)),
            "max-stale" => {
                let stale = value.map_or(u64::MAX, |v| seconds(Some(v)));
                keep_min(&mut d.max_stale, stale);
            }
            "min-fresh" => keep_min(&mut d.min_fresh, seconds(value)),
            "stale-if-error" => keep_min(&mut d.stale_if_error, seconds(value)),
            _ => {}
        });
        d
    }
}

fn keep_min(slot: &mut Option<u64>, value: u64) {
    *slot = Some(slot.map_or(value, |old| old.min(value)));
}

/// Delta-seconds; missing or invalid is `0`, huge is capped.
fn seconds(value: Option<&str>) -> u64 {
    let Some(value) = value else { return 0 };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    value.parse::<u64>().map_or(MAX_DELTA, |n| n.min(MAX_DELTA))
}

/// Calls `f(name, argument)` for every directive, the name lower-cased and
/// the argument unquoted.
fn for_each_directive(headers: &HeaderMap, mut f: impl FnMut(&str, Option<&str>)) {
    let mut name = String::new();
    for line in headers.get_all(CACHE_CONTROL) {
        let Ok(line) = line.to_str() else { continue };
        let mut rest = line;
        while !rest.is_empty() {
            let (directive, tail) = split_directive(rest);
            rest = tail;
            let (raw_name, value) = match directive.split_once('=') {
                Some((n, v)) => (n.trim(), Some(unquote(v.trim()))),
                None => (directive.trim(), None),
            };
            if raw_name.is_empty() {
                continue;
            }
            name.clear();
            name.extend(raw_name.chars().map(|c| c.to_ascii_lowercase()));
            f(&name, value);
        }
    }
}

/// The text up to the next comma that is not inside quotes, and what follows it.
fn split_directive(s: &str) -> (&str, &str) {
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => return (&s[..i], &s[i + 1..]),
            _ => {}
        }
    }
    (s, "")
}

fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(CACHE_CONTROL, l.parse().expect("valid header"));
        }
        h
    }

    #[test]
    fn response_directives_across_lines_and_cases() {
        let d = ResponseDirectives::parse(&headers(&[
            "Public, MAX-AGE=60",
            "s-maxage=\"30\", no-cache=\"set-cookie, x-a\", stale-while-revalidate=5",
        ]));
        assert!(d.public && d.no_cache && !d.private && !d.no_store);
        assert_eq!(d.max_age, Some(60));
        assert_eq!(d.s_maxage, Some(30));
        assert_eq!(d.stale_while_revalidate, Some(5));
    }

    #[test]
    fn invalid_and_duplicate_ages_are_conservative() {
        let d = ResponseDirectives::parse(&headers(&["max-age=abc"]));
        assert_eq!(d.max_age, Some(0));
        let d = ResponseDirectives::parse(&headers(&["max-age=60, max-age=10"]));
        assert_eq!(d.max_age, Some(10));
        let d = ResponseDirectives::parse(&headers(&["max-age=99999999999999999999999"]));
        assert_eq!(d.max_age, Some(MAX_DELTA));
    }

    #[test]
    fn request_directives() {
        assert_eq!(
            RequestDirectives::of(&HeaderMap::new()),
            RequestDirectives::default()
        );
        let d = RequestDirectives::of(&headers(&["no-cache, max-stale, only-if-cached"]));
        assert!(d.no_cache && d.only_if_cached);
        assert_eq!(d.max_stale, Some(u64::MAX));
        let d = RequestDirectives::of(&headers(&["max-age=0"]));
        assert_eq!(d.max_age, Some(0));
    }
}
