//! `https_redirect`: a request on a plain-HTTP connection for an application or
//! route that has it gets `308` to the same URL on the https listener.

use http::request::Parts;
use http::{HeaderValue, StatusCode};
use scalws_core::{ConnInfo, Scheme};
use scalws_router::normalize_path;

use super::redirect::{redirect_response, url};
use crate::action::ActionFuture;
use crate::application::Application;

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
    let on_https = parts
        .extensions
        .get::<ConnInfo>()
        .is_some_and(|conn| conn.scheme() == Scheme::Https);
    if on_https {
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
    // `OPTIONS *` and the like have no path to redirect to.
    let path = parts.uri.path();
    if !path.starts_with('/') {
        return None;
    }
    let location = url(
        Scheme::Https,
        host,
        Some(https_port),
        path,
        parts.uri.query(),
    );
    let location = HeaderValue::try_from(location).ok()?;
    Some(ActionFuture::ready(redirect_response(
        StatusCode::PERMANENT_REDIRECT,
        location,
    )))
}
