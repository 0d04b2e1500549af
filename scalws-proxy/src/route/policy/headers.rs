//! Gateway API header modifiers (`HTTPHeaderFilter`) for requests and responses.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Changes headers in the Gateway API order: `set`, then `add`, then `remove`.
/// Names are case-insensitive (a [`HeaderName`] is lower-case).
#[derive(Clone, Debug, Default)]
pub struct HeaderModifier {
    set: Vec<(HeaderName, HeaderValue)>,
    add: Vec<(HeaderName, HeaderValue)>,
    remove: Vec<HeaderName>,
}

impl HeaderModifier {
    /// A modifier that changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces every value of `name` with `value`.
    pub fn set(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.set.push((name, value));
        self
    }

    /// Appends `value` to the value of `name`, joined with `","` into one line
    /// (as the Gateway API's `add` says: `foo` + `bar` is `foo,bar`);
    /// inserts it when `name` is absent.
    pub fn add(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.add.push((name, value));
        self
    }

    /// Removes every value of `name`.
    pub fn remove(mut self, name: HeaderName) -> Self {
        self.remove.push(name);
        self
    }

    /// True when the modifier changes nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }

    /// Applies the changes to `headers`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.add {
            if *name == header::SET_COOKIE {
                // Set-Cookie cannot be joined into one line (RFC 6265 3): one line each.
                headers.append(name.clone(), value.clone());
                continue;
            }
            let separator: &[u8] = if *name == header::COOKIE { b"; " } else { b"," };
            let joined = joined_with(headers, name, value, separator);
            headers.insert(name.clone(), joined);
        }
        for name in &self.remove {
            headers.remove(name);
        }
    }
}

/// Every value of `name` and then `value`, as one line joined by `separator`
/// (`","` for list headers, `"; "` for Cookie).
fn joined_with(
    headers: &HeaderMap,
    name: &HeaderName,
    value: &HeaderValue,
    separator: &[u8],
) -> HeaderValue {
    let mut values = headers.get_all(name).iter().peekable();
    if values.peek().is_none() {
        return value.clone();
    }
    let mut line = Vec::new();
    for existing in values {
        line.extend_from_slice(existing.as_bytes());
        line.extend_from_slice(separator);
    }
    line.extend_from_slice(value.as_bytes());
    // Valid values joined by "," are a valid value; the fallback keeps the new one alone.
    HeaderValue::from_bytes(&line).unwrap_or_else(|_| value.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn name(n: &str) -> HeaderName {
        HeaderName::from_bytes(n.as_bytes()).unwrap()
    }

    fn value(v: &'static str) -> HeaderValue {
        HeaderValue::from_static(v)
    }

    #[test]
    fn add_keeps_set_cookie_lines_apart_and_joins_cookie_with_semicolons() {
        let mut headers = HeaderMap::new();
        headers.insert(header::SET_COOKIE, value("a=1"));
        headers.insert(header::COOKIE, value("x=1"));
        HeaderModifier::new()
            .add(header::SET_COOKIE, value("b=2"))
            .add(header::COOKIE, value("y=2"))
            .apply(&mut headers);
        let cookies: Vec<_> = headers.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert_eq!(headers[header::COOKIE], "x=1; y=2");
    }

    #[test]
    fn set_add_remove_in_gateway_api_order() {
        let mut headers = HeaderMap::new();
        headers.append("x-set", value("old1"));
        headers.append("x-set", value("old2"));
        headers.append("x-add", value("a"));
        headers.append("x-add", value("b"));
        headers.insert("x-gone", value("1"));
        HeaderModifier::new()
            .set(name("X-Set"), value("new"))
            .add(name("X-ADD"), value("c"))
            .add(name("x-fresh"), value("1"))
            .remove(name("X-Gone"))
            .set(name("x-both"), value("set"))
            .remove(name("x-both"))
            .apply(&mut headers);
        assert_eq!(headers.get_all("x-set").iter().collect::<Vec<_>>(), ["new"]);
        assert_eq!(
            headers.get_all("x-add").iter().collect::<Vec<_>>(),
            ["a,b,c"]
        );
        assert_eq!(headers["x-fresh"], "1");
        assert!(headers.get("x-gone").is_none());
        assert!(headers.get("x-both").is_none());
    }
}
