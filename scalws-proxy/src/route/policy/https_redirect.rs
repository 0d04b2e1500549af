//! `https_redirect`: a request on a plain-HTTP connection for an application or
//! route that has it gets `308` to the same URL on the https listener.

use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};
use scalws_core::{Body, ConnInfo, Scheme};
use scalws_router::{normalize_host, normalize_path};

use super::layers::RequestPolicy;
use crate::action::{ActionFuture, redirect_response, request_host, url};
use crate::application::Application;

/// The `https_redirect` policy as a [`RequestPolicy`] (for a
/// [`PolicyLayer`](super::PolicyLayer)): a request on a plain-HTTP
/// connection (or without [`ConnInfo`]) gets `308` to the same URL with
/// `https`, on `port` (left out when it is 443). A request without a valid
/// host gets 400.
#[derive(Clone, Copy, Debug)]
pub struct HttpsRedirect {
    port: u16,
}

impl HttpsRedirect {
    /// Redirects to the https listener on `port`.
    pub fn to_port(port: u16) -> Self {
        Self { port }
    }
}

impl RequestPolicy for HttpsRedirect {
    fn apply(&self, parts: &mut Parts) -> Result<(), Response<Body>> {
        if on_https(parts) {
            return Ok(());
        }
        let host = request_host(parts).and_then(|raw| normalize_host(raw).ok());
        let Some(host) = host else {
            return Err(scalws_core::error::error_response(StatusCode::BAD_REQUEST));
        };
        match to_https(parts, &host, self.port) {
            Some(response) => Err(response),
            None => Ok(()),
        }
    }
}

fn on_https(parts: &Parts) -> bool {
    parts
        .extensions
        .get::<ConnInfo>()
        .is_some_and(|conn| conn.scheme() == Scheme::Https)
}

/// The redirect for `parts`, if it needs one. Called only for applications whose
/// `redirect_check` is set, so everything else pays that one flag test.
///
/// `host` is the request's host, normalised (no port); `https_port` is left out
/// of `Location` when it is 443. A request without [`ConnInfo`] counts as plain HTTP.
#[cold]
#[inline(never)]
pub(crate) fn https_redirect(
    application: &Application,
    https_port: u16,
    parts: &Parts,
    host: &str,
) -> Option<ActionFuture> {
    if on_https(parts) {
        return None;
    }
    if !application.https_redirect {
        // Only some routes redirect: find this request's. The gateway routes it
        // again when it does not redirect; only such applications pay for that.
        let path = normalize_path(parts.uri.path()).ok()?;
        let matched = application
            .routes
            .route(&parts.method, &path, parts.uri.query(), &parts.headers)
            .ok()?;
        if !matched.target.redirects_to_https() {
            return None;
        }
    }
    to_https(parts, host, https_port).map(ActionFuture::ready)
}

/// 308 to `https://host[:port]` and the request's path and query; `None`
/// for a request without a path (`OPTIONS *` and the like).
fn to_https(parts: &Parts, host: &str, port: u16) -> Option<Response<Body>> {
    let path = parts.uri.path();
    if !path.starts_with('/') {
        return None;
    }
    let location = url(Scheme::Https, host, Some(port), path, parts.uri.query());
    let location = HeaderValue::try_from(location).ok()?;
    Some(redirect_response(StatusCode::PERMANENT_REDIRECT, location))
}
