//! The `rewrite` policy (Gateway API `HTTPURLRewriteFilter`): the path and the
//! host a route's action sees.

use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Uri};
use http::{HeaderValue, StatusCode, header};
use scalws_router::normalize_path;

use super::{InvalidHostName, PathModifier};

/// Rewrites a request before its route's action: the path (whole, or the
/// matched prefix) and the host (`Host`, and the URI authority when the request
/// has one, as HTTP/2 requests do). The query is kept.
#[derive(Clone, Debug, Default)]
pub struct Rewrite {
    path: Option<PathModifier>,
    host: Option<(HeaderValue, Authority)>,
    /// Filled in when the route is added to an application.
    matched_prefix: Box<str>,
}

impl Rewrite {
    /// A rewrite that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rewrites the path.
    pub fn path(mut self, path: PathModifier) -> Self {
        self.path = Some(path);
        self
    }

    /// Sets the host the action sees: `name` or `name:port`.
    pub fn host(mut self, host: &str) -> Result<Self, InvalidHostName> {
        let invalid = || InvalidHostName {
            host: host.to_owned(),
        };
        let authority = Authority::try_from(host).map_err(|_| invalid())?;
        if authority.as_str().contains('@') || authority.host().is_empty() {
            return Err(invalid());
        }
        let value = HeaderValue::from_str(host).map_err(|_| invalid())?;
        self.host = Some((value, authority));
        Ok(self)
    }

    /// Whether it changes the path (then a static route looks up the path it made).
    #[cfg(feature = "static-files")]
    pub(crate) fn rewrites_path(&self) -> bool {
        self.path.is_some()
    }

    pub(crate) fn needs_prefix(&self) -> bool {
        self.path.as_ref().is_some_and(PathModifier::needs_prefix)
    }

    /// The prefix a [`PathModifier::ReplacePrefixMatch`] replaces, for a
    /// rewrite used alone (as a [`PolicyLayer`](super::PolicyLayer)); a route
    /// sets it from its own path.
    pub fn matched_prefix(mut self, prefix: &str) -> Self {
        self.bind_prefix(super::matched_prefix(prefix));
        self
    }

    pub(crate) fn bind_prefix(&mut self, matched: Box<str>) {
        self.matched_prefix = matched;
    }

    /// Rewrites `parts` in place; the error is the status to answer instead.
    pub(crate) fn apply(&self, parts: &mut Parts) -> Result<(), StatusCode> {
        if let Some(modifier) = &self.path {
            let path = normalize_path(parts.uri.path()).map_err(|_| StatusCode::BAD_REQUEST)?;
            let path = modifier.apply(&path, &self.matched_prefix);
            let path_and_query = match parts.uri.query() {
                Some(query) => format!("{path}?{query}"),
                None => path.into_owned(),
            };
            let path_and_query = PathAndQuery::try_from(path_and_query)
                .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
            edit_uri(&mut parts.uri, |uri| {
                uri.path_and_query = Some(path_and_query)
            })?;
        }
        if let Some((value, authority)) = &self.host {
            // X-Forwarded-Host must still name the host the request was routed by.
            let original = crate::action::routed_host_value(parts);
            if let Some(original) = original {
                parts.extensions.insert(scalws_core::OriginalHost(original));
            }
            parts.headers.insert(header::HOST, value.clone());
            if parts.uri.authority().is_some() {
                edit_uri(&mut parts.uri, |uri| {
                    uri.authority = Some(authority.clone())
                })?;
            }
        }
        Ok(())
    }
}

fn edit_uri(uri: &mut Uri, edit: impl FnOnce(&mut http::uri::Parts)) -> Result<(), StatusCode> {
    let mut parts = std::mem::take(uri).into_parts();
    edit(&mut parts);
    *uri = Uri::from_parts(parts).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    Ok(())
}
