//! Gateway API path modifiers: replace the whole path, or the prefix a route matched.

use std::borrow::Cow;

use http::uri::PathAndQuery;

/// How a `rewrite` or `redirect` changes the request path (Gateway API
/// `HTTPPathModifier`). The query is never touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathModifier {
    /// `ReplaceFullPath`: the path becomes this one.
    ReplaceFullPath(Box<str>),
    /// `ReplacePrefixMatch`: the prefix the route matched becomes this one, on a
    /// `prefix` route only. A trailing `/` is ignored; `""` and `"/"` remove the
    /// prefix: with the prefix `/foo`, `/foo/bar` becomes `/xyz/bar` (`/xyz`) or
    /// `/bar` (`""`), `/foo` becomes `/xyz` or `/`, and `/foo/` keeps its slash.
    ReplacePrefixMatch(Box<str>),
}

/// A path modifier whose path cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid path \"{path}\": {reason}")]
pub struct InvalidPathModifier {
    /// The path as given.
    pub path: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl PathModifier {
    /// `ReplaceFullPath`: `path` must start with `/` and hold only characters a
    /// request path may hold (no `?` or `#`).
    pub fn full(path: &str) -> Result<Self, InvalidPathModifier> {
        if !path.starts_with('/') {
            return Err(invalid(path, "must start with \"/\""));
        }
        check_chars(path)?;
        Ok(Self::ReplaceFullPath(path.into()))
    }

    /// `ReplacePrefixMatch`: `replacement` is empty or starts with `/`.
    pub fn prefix(replacement: &str) -> Result<Self, InvalidPathModifier> {
        if !(replacement.is_empty() || replacement.starts_with('/')) {
            return Err(invalid(replacement, "must be empty or start with \"/\""));
        }
        check_chars(replacement)?;
        Ok(Self::ReplacePrefixMatch(
            replacement.trim_end_matches('/').into(),
        ))
    }

    /// Whether this modifier needs the route's matched prefix.
    pub(crate) fn needs_prefix(&self) -> bool {
        matches!(self, Self::ReplacePrefixMatch(_))
    }

    /// The new path for the normalised request `path`; `matched` is the route's
    /// prefix as the router compares it, without a trailing `/` (`""` for `/`).
    pub(crate) fn apply<'a>(&'a self, path: &'a str, matched: &str) -> Cow<'a, str> {
        match self {
            Self::ReplaceFullPath(full) => Cow::Borrowed(full),
            Self::ReplacePrefixMatch(replacement) => {
                // The router matched whole segments of this very path, so the strip
                // succeeds; the fallback keeps a stray caller's path whole.
                let rest = path.strip_prefix(matched).unwrap_or(path);
                match (replacement.is_empty(), rest.is_empty()) {
                    (true, true) => Cow::Borrowed("/"),
                    (true, false) => Cow::Borrowed(rest),
                    (false, _) => Cow::Owned(format!("{replacement}{rest}")),
                }
            }
        }
    }
}

/// The prefix a `prefix` route matches, in the form [`PathModifier::apply`] takes:
/// normalised like request paths, without a trailing `/` (`""` for the root).
pub(crate) fn matched_prefix(prefix: &str) -> Box<str> {
    let normal = scalws_router::normalize_path(prefix).unwrap_or(Cow::Borrowed(prefix));
    normal.trim_end_matches('/').into()
}

fn check_chars(path: &str) -> Result<(), InvalidPathModifier> {
    if path.contains(['?', '#']) {
        return Err(invalid(path, "must not hold \"?\" or \"#\""));
    }
    if !path.is_empty() && PathAndQuery::try_from(path).is_err() {
        return Err(invalid(path, "holds a character a path may not hold"));
    }
    Ok(())
}

fn invalid(path: &str, reason: &'static str) -> InvalidPathModifier {
    InvalidPathModifier {
        path: path.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn gateway_api_prefix_table() {
        // (request path, route prefix, replacement, result): the HTTPPathModifier table.
        let table = [
            ("/foo/bar", "/foo", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo", "/xyz/", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz/", "/xyz/bar"),
            ("/foo", "/foo", "/xyz", "/xyz"),
            ("/foo/", "/foo", "/xyz", "/xyz/"),
            ("/foo/bar", "/foo", "", "/bar"),
            ("/foo/", "/foo", "", "/"),
            ("/foo", "/foo", "", "/"),
            ("/foo/", "/foo", "/", "/"),
            ("/foo", "/foo", "/", "/"),
            ("/foo/bar", "/", "/xyz", "/xyz/foo/bar"),
            // The root prefix is empty: the request's slash is kept, as for `/foo/`.
            ("/", "/", "/xyz", "/xyz/"),
        ];
        for (path, prefix, replacement, want) in table {
            let modifier = PathModifier::prefix(replacement).unwrap();
            let got = modifier.apply(path, &matched_prefix(prefix));
            assert_eq!(got, want, "{path} with {prefix} -> {replacement}");
        }
    }

    #[test]
    fn full_replacement_ignores_the_path() {
        let modifier = PathModifier::full("/new").unwrap();
        assert_eq!(modifier.apply("/old/x", "/old"), "/new");
    }

    #[test]
    fn bad_paths_are_refused() {
        assert!(PathModifier::full("new").is_err());
        assert!(PathModifier::full("/a?b").is_err());
        assert!(PathModifier::full("/a b").is_err());
        assert!(PathModifier::prefix("x").is_err());
        assert!(PathModifier::prefix("").is_ok());
    }
}
