//! The `redirect` action (Gateway API `HTTPRequestRedirectFilter`).

use std::borrow::Cow;
use std::fmt::Write;

use http::request::Parts;
use http::uri::Authority;
use http::{HeaderValue, Response, StatusCode, Version, header};
use scalws_core::error::error_response;
use scalws_core::{Body, ConnInfo, Scheme};
use scalws_router::{normalize_host, normalize_path};

use crate::route::{InvalidHostName, PathModifier};

/// Answers with a redirect: `Location: scheme://host[:port]path[?query]`, an
/// empty body. Each part not given comes from the request:
///
/// - scheme: the request's;
/// - host: the request's, without its port;
/// - port: when the scheme is given, its well-known port; when neither is, the
///   port of the listener the request came on. The port is left out when it is
///   the scheme's well-known one (80 for http, 443 for https);
/// - path: the request's, or as a [`PathModifier`] says; the query is kept.
///
/// The status is 302 unless set.
#[derive(Clone, Debug)]
pub struct Redirect {
    scheme: Option<Scheme>,
    host: Option<Box<str>>,
    port: Option<u16>,
    path: Option<PathModifier>,
    /// Filled in when the route is added to an application.
    matched_prefix: Box<str>,
    status: StatusCode,
}

/// A redirect status other than 301, 302, 303, 307 or 308.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid redirect status {0} (expected 301, 302, 303, 307 or 308)")]
pub struct NotARedirectStatus(pub u16);

impl Default for Redirect {
    fn default() -> Self {
        Self::new()
    }
}

impl Redirect {
    /// A 302 to the request's own URL, until parts are set.
    pub fn new() -> Self {
        Self {
            scheme: None,
            host: None,
            port: None,
            path: None,
            matched_prefix: "".into(),
            status: StatusCode::FOUND,
        }
    }

    /// The scheme of the new URL.
    pub fn scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = Some(scheme);
        self
    }

    /// The host of the new URL: a name or an IP address, without a port.
    pub fn host(mut self, host: &str) -> Result<Self, InvalidHostName> {
        let invalid = || InvalidHostName {
            host: host.to_owned(),
        };
        let authority = Authority::try_from(host).map_err(|_| invalid())?;
        if authority.port().is_some() || authority.as_str().contains('@') {
            return Err(invalid());
        }
        let normal = normalize_host(host).map_err(|_| invalid())?;
        self.host = Some(normal.into());
        Ok(self)
    }

    /// The port of the new URL.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Changes the path of the new URL.
    pub fn path(mut self, path: PathModifier) -> Self {
        self.path = Some(path);
        self
    }

    /// The status: 301, 302, 303, 307 or 308.
    pub fn status(mut self, status: StatusCode) -> Result<Self, NotARedirectStatus> {
        match status.as_u16() {
            301 | 302 | 303 | 307 | 308 => {
                self.status = status;
                Ok(self)
            }
            other => Err(NotARedirectStatus(other)),
        }
    }

    pub(crate) fn needs_prefix(&self) -> bool {
        self.path.as_ref().is_some_and(PathModifier::needs_prefix)
    }

    /// The prefix a [`PathModifier::ReplacePrefixMatch`] replaces, for a
    /// redirect used alone; an application sets it from the route's path.
    pub fn matched_prefix(mut self, prefix: &str) -> Self {
        self.bind_prefix(crate::route::matched_prefix(prefix));
        self
    }

    pub(crate) fn bind_prefix(&mut self, matched: Box<str>) {
        self.matched_prefix = matched;
    }

    /// The redirect for a routed request.
    pub fn response(&self, parts: &Parts) -> Response<Body> {
        match self.location(parts) {
            Ok(location) => redirect_response(self.status, location),
            Err(status) => error_response(status),
        }
    }

    fn location(&self, parts: &Parts) -> Result<HeaderValue, StatusCode> {
        let conn = parts.extensions.get::<ConnInfo>();
        let scheme = self
            .scheme
            .unwrap_or_else(|| conn.map_or(Scheme::Http, ConnInfo::scheme));
        let raw_host = request_host(parts);
        let host = match &self.host {
            Some(host) => Cow::Borrowed(&**host),
            None => raw_host
                .and_then(|raw| normalize_host(raw).ok())
                .ok_or(StatusCode::BAD_REQUEST)?,
        };
        let port = match (self.port, self.scheme) {
            (Some(port), _) => Some(port),
            (None, Some(_)) => None,
            // The listener's port; without a connection, the one the client wrote.
            (None, None) => conn
                .map(|c| c.local().port())
                .or_else(|| raw_host.and_then(|raw| Authority::try_from(raw).ok()?.port_u16())),
        };
        let path = match &self.path {
            None => Cow::Borrowed(parts.uri.path()),
            Some(modifier) => {
                let path = normalize_path(parts.uri.path()).map_err(|_| StatusCode::BAD_REQUEST)?;
                Cow::Owned(modifier.apply(&path, &self.matched_prefix).into_owned())
            }
        };
        let location = url(scheme, &host, port, &path, parts.uri.query());
        HeaderValue::try_from(location).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// `scheme://host[:port]path[?query]`, the port left out when it is the scheme's default.
pub(crate) fn url(
    scheme: Scheme,
    host: &str,
    port: Option<u16>,
    path: &str,
    query: Option<&str>,
) -> String {
    let default = match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    };
    let scheme = scheme.as_str();
    let mut url = String::with_capacity(scheme.len() + host.len() + path.len() + 16);
    url.push_str(scheme);
    url.push_str("://");
    url.push_str(host);
    if let Some(port) = port.filter(|p| *p != default) {
        let _ = write!(url, ":{port}");
    }
    url.push_str(path);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

/// `status`, `Location`, and an empty body.
pub(crate) fn redirect_response(status: StatusCode, location: HeaderValue) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, location);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

/// [`request_host`] as a header value, without its checks (the request was
/// routed already): the target's authority when it has one, else `Host`.
/// What is forwarded as `Host` and named in `X-Forwarded-Host`.
pub(crate) fn routed_host_value(parts: &Parts) -> Option<HeaderValue> {
    match parts.uri.authority() {
        Some(authority) => HeaderValue::from_str(authority.as_str()).ok(),
        None => parts.headers.get(header::HOST).cloned(),
    }
}

/// Whether a `host` field names the host of `authority`: compared as
/// routing compares them (case, a trailing dot and the port set aside),
/// since routing, forwarding and the cache key all use the authority.
#[cold]
#[inline(never)]
fn same_host(host: &HeaderValue, authority: &str) -> bool {
    let Ok(host) = host.to_str() else {
        return false;
    };
    match (normalize_host(host), normalize_host(authority)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The host a request is for: the target's authority (`:authority` of
/// HTTP/2 and HTTP/3, an absolute-form HTTP/1.1 target, whose `Host` is then
/// ignored: RFC 9112 3.2.2), else `Host`. `None`, answered 400, for a request
/// with two `Host` fields (RFC 9112 3.2), or an HTTP/2 or HTTP/3 request
/// whose `host` names another authority than `:authority` (RFC 9113 8.3.1,
/// RFC 9114 4.3.1): routing by one and forwarding the other would let a
/// client poison what is cached for the first.
pub(crate) fn request_host(parts: &Parts) -> Option<&str> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return None;
    }
    match parts.uri.authority() {
        Some(authority) => {
            let authority = authority.as_str();
            if parts.version >= Version::HTTP_2 && host.is_some_and(|h| !same_host(h, authority)) {
                return None;
            }
            Some(authority)
        }
        None => host?.to_str().ok(),
    }
}
