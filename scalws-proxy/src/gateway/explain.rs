//! [`Gateway::explain`]: the decisions of `stack.rs` for one request, told
//! step by step, without answering it. What `scalwsd explain` prints. It
//! calls the same selection functions the stack calls, so what it says is
//! what a request gets; none of it is on the request path.

use http::request::Parts;
use http::{HeaderValue, StatusCode};
use scalws_core::ConnInfo;
use scalws_router::{Considered, HostEntry, normalize_host, normalize_path};

use super::Gateway;
use super::hosts::select_host;
use crate::action::request_host;
use crate::application::{Application, select_route};
use crate::route::Route;
use crate::route::policy::https_redirect;

/// What the gateway decides for one request.
#[derive(Debug)]
pub struct Explanation<'a> {
    /// The listener whose host table was used (`None`: no table).
    pub listener: Option<&'a str>,
    /// The request's host, normalised, if it has a valid one.
    pub host: Option<String>,
    /// The host-table entry and the application it gave.
    pub application: Option<(HostEntry, &'a Application)>,
    /// The application's routes in precedence order, with their verdicts
    /// (empty when the request never reached route selection).
    pub routes: Vec<Considered<'a, Route>>,
    /// The outcome.
    pub outcome: Outcome<'a>,
}

/// How the request is answered.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// By this route.
    Route(&'a Route),
    /// Before any route, with this status (400, 404, 405, 421), and why.
    Refused(StatusCode, &'static str),
    /// By `https_redirect`: 308 to this location.
    HttpsRedirect(Option<HeaderValue>),
    /// By the application's embedder layers, which may answer themselves.
    ApplicationLayers,
}

impl Gateway {
    /// Explains what the gateway does with a request whose head is `parts`
    /// (a [`ConnInfo`] in its extensions says which listener and scheme;
    /// without one, the first listener's table, plain HTTP).
    pub fn explain(&self, parts: &Parts) -> Explanation<'_> {
        let conn = parts.extensions.get::<ConnInfo>();
        let listener = match conn {
            Some(conn) => self
                .listeners()
                .find(|(name, _)| *name == conn.listener())
                .map(|(name, _)| name),
            None => self.listeners().next().map(|(name, _)| name),
        };
        let host = request_host(parts).and_then(|raw| normalize_host(raw).ok());
        let mut explanation = Explanation {
            listener,
            host: host.as_deref().map(str::to_owned),
            application: None,
            routes: Vec::new(),
            outcome: Outcome::Refused(StatusCode::NOT_FOUND, "no listener of that name"),
        };
        let table = self.hosts_for(conn);
        if let (Some(table), Some(host)) = (table, &host)
            && let Some((application, entry)) = table.explain(host)
        {
            explanation.application = Some((entry, &**application));
        }
        let application = match select_host(table, parts, conn) {
            Ok((application, _)) => application,
            Err(status) => {
                explanation.outcome = Outcome::Refused(status, refusal(status, table.is_some()));
                return explanation;
            }
        };
        if application.redirect_check
            && let Some(host) = &host
            && let Some(mut redirect) =
                https_redirect(application, self.inner.https_port, parts, host)
        {
            let location = redirect.ready_header(http::header::LOCATION);
            explanation.outcome = Outcome::HttpsRedirect(location);
            return explanation;
        }
        if let Ok(path) = normalize_path(parts.uri.path()) {
            explanation.routes =
                application
                    .routes
                    .explain(&parts.method, &path, parts.uri.query(), &parts.headers);
        }
        if application.layered.is_some() {
            explanation.outcome = Outcome::ApplicationLayers;
            return explanation;
        }
        let mut parts = clone_head(parts);
        explanation.outcome = match select_route(&application.routes, &mut parts) {
            Ok(route) => Outcome::Route(route),
            Err(refusal) => Outcome::Refused(
                refusal.status(),
                match refusal.status() {
                    StatusCode::BAD_REQUEST => "the path climbs above the root",
                    StatusCode::METHOD_NOT_ALLOWED => "routes match all but the method",
                    _ => "no route matches",
                },
            ),
        };
        explanation
    }
}

fn refusal(status: StatusCode, has_table: bool) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "missing or invalid host",
        StatusCode::MISDIRECTED_REQUEST => {
            "the certificate chosen by the connection's SNI does not cover the host"
        }
        _ if !has_table => "no listener of that name",
        _ => "no application has that host",
    }
}

/// A copy of the head the selection may write path parameters into.
fn clone_head(parts: &Parts) -> Parts {
    let mut request = http::Request::new(());
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = parts.headers.clone();
    request.into_parts().0
}
