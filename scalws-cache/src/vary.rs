//! `Vary` (RFC 9111 4.1): the secondary key of a stored response.
//!
//! A stored response remembers, for each header its `Vary` names, the
//! normalised value the request that produced it carried (or that it carried
//! none). A later request can use it only if its own normalised values are the
//! same. Normalising: several lines are joined with `,`, values are trimmed
//! and runs of whitespace become one space; `Accept-Encoding` is compared as a
//! sorted, lower-cased list of its codings (so `gzip, br` and `br,gzip` share
//! an entry).

use http::header::{ACCEPT_ENCODING, VARY};
use http::{HeaderMap, HeaderName};

/// The secondary key of a stored response: empty when it does not vary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SecondaryKey {
    fields: Box<[(HeaderName, Option<Box<str>>)]>,
}

/// The response said `Vary: *` (or named something that is not a header):
/// it can never be matched, so it is not stored.
#[derive(Debug)]
pub(crate) struct VariesOnAnything;

impl SecondaryKey {
    /// The key of a response with `response` headers, from the `request`
    /// headers that produced it.
    pub(crate) fn new(response: &HeaderMap, request: &HeaderMap) -> Result<Self, VariesOnAnything> {
        if !response.contains_key(VARY) {
            return Ok(Self::default());
        }
        let mut fields: Vec<(HeaderName, Option<Box<str>>)> = Vec::new();
        for line in response.get_all(VARY) {
            let line = line.to_str().map_err(|_| VariesOnAnything)?;
            for name in line.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if name == "*" {
                    return Err(VariesOnAnything);
                }
                // HeaderName lower-cases.
                let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| VariesOnAnything)?;
                if fields.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                let value = normalize(&name, request).map(String::into_boxed_str);
                fields.push((name, value));
            }
        }
        Ok(Self {
            fields: fields.into_boxed_slice(),
        })
    }

    /// Whether `request` selects this stored response.
    #[inline]
    pub(crate) fn matches(&self, request: &HeaderMap) -> bool {
        self.fields.is_empty() || self.matches_fields(request)
    }

    fn matches_fields(&self, request: &HeaderMap) -> bool {
        self.fields
            .iter()
            .all(|(name, stored)| normalize(name, request).as_deref() == stored.as_deref())
    }

    /// Bytes this key holds, for the cache's weigher.
    pub(crate) fn weight(&self) -> usize {
        self.fields
            .iter()
            .map(|(n, v)| n.as_str().len() + v.as_ref().map_or(0, |v| v.len()) + 16)
            .sum()
    }
}

/// The normalised value of header `name` in `request`, `None` if absent.
fn normalize(name: &HeaderName, request: &HeaderMap) -> Option<String> {
    let mut values = request.get_all(name).iter().peekable();
    values.peek()?;
    let mut joined = String::new();
    for value in values {
        if !joined.is_empty() {
            joined.push(',');
        }
        // Opaque bytes compare as they are (lossily shown, exactly compared).
        joined.push_str(&String::from_utf8_lossy(value.as_bytes()));
    }
    if *name == ACCEPT_ENCODING {
        let mut codings: Vec<String> = joined
            .split(',')
            .map(|c| {
                c.chars()
                    .filter(|c| !c.is_whitespace())
                    .map(|c| c.to_ascii_lowercase())
                    .collect()
            })
            .filter(|c: &String| !c.is_empty())
            .collect();
        codings.sort_unstable();
        codings.dedup();
        return Some(codings.join(","));
    }
    Some(collapse_whitespace(&joined))
}

fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        h
    }

    #[test]
    fn accept_encoding_order_and_case_do_not_matter() {
        let response = map(&[("vary", "Accept-Encoding")]);
        let key = SecondaryKey::new(&response, &map(&[("accept-encoding", "gzip, br")]))
            .expect("storable");
        assert!(key.matches(&map(&[("accept-encoding", "BR,gzip")])));
        assert!(key.matches(&map(&[
            ("accept-encoding", "br"),
            ("accept-encoding", "gzip")
        ])));
        assert!(!key.matches(&map(&[("accept-encoding", "gzip")])));
        assert!(!key.matches(&HeaderMap::new()));
    }

    #[test]
    fn whitespace_collapses_and_absence_is_a_value() {
        let response = map(&[("vary", "x-a, X-B")]);
        let key = SecondaryKey::new(&response, &map(&[("x-a", "  one   two ")])).expect("ok");
        assert!(key.matches(&map(&[("x-a", "one two")])));
        assert!(!key.matches(&map(&[("x-a", "one two"), ("x-b", "")])));
    }

    #[test]
    fn star_is_not_storable() {
        assert!(SecondaryKey::new(&map(&[("vary", "accept, *")]), &HeaderMap::new()).is_err());
    }

    #[test]
    fn no_vary_matches_everything() {
        let key = SecondaryKey::new(&HeaderMap::new(), &HeaderMap::new()).expect("ok");
        assert!(key.matches(&map(&[("accept", "x")])));
    }
}
