//! When a failed attempt may go again, and the request it goes again with.
//!
//! Only idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) with an
//! empty body are retried, and only for failures before any response byte:
//! connect errors, and a connection reset or closed before the response head.
//! A response that is garbage or has an oversized head is an answer (a bad
//! one) and is not retried; neither is a `request_timeout`, which bounds every
//! attempt together.

use std::error::Error as StdError;

use http::{HeaderMap, Method, Request, StatusCode, Uri, Version, header};
use scalws_core::{Body, BoxError, ConnInfo};

use super::error::{ConnectFailed, ConnectTimedOut};
use super::wire::WireError;

/// A failure before any of the answer, with the request's head given back
/// (by the `http1` client, which sends from a borrowed head): the pool sends
/// it again from there instead of keeping a copy of every request. Taken
/// apart by the pool before the failure is sorted; never seen outside it.
#[derive(Debug)]
pub(crate) struct Unanswered {
    pub(crate) head: http::request::Parts,
    pub(crate) source: BoxError,
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl StdError for Unanswered {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.source.as_ref())
    }
}

impl Unanswered {
    /// The failure, and the head when `error` carries one.
    pub(crate) fn take(error: BoxError) -> (BoxError, Option<http::request::Parts>) {
        match error.downcast::<Unanswered>() {
            Ok(unanswered) => {
                let Unanswered { head, source } = *unanswered;
                (source, Some(head))
            }
            Err(error) => (error, None),
        }
    }
}

/// What is needed to send a request again: it had an empty body.
pub(crate) struct Replay {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    conn_info: Option<ConnInfo>,
}

impl Replay {
    /// Whether `request` may be sent again: idempotent, with an empty body.
    pub(crate) fn allowed(request: &Request<Body>) -> bool {
        is_idempotent(request.method()) && has_empty_body(request)
    }

    /// A copy of `request` when it may be retried.
    pub(crate) fn capture(request: &Request<Body>) -> Option<Self> {
        if !Self::allowed(request) {
            return None;
        }
        Some(Self {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
            conn_info: request.extensions().get::<ConnInfo>().cloned(),
        })
    }

    /// The request again, with an empty body.
    pub(crate) fn rebuild(&self) -> Request<Body> {
        let mut request = Request::new(Body::empty());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        if let Some(info) = &self.conn_info {
            request.extensions_mut().insert(info.clone());
        }
        request
    }
}

fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

fn has_empty_body(request: &Request<Body>) -> bool {
    http_body::Body::is_end_stream(request.body())
        || request
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() == b"0")
}

/// Why an attempt failed, as far as retrying and the answer go.
pub(crate) enum Failure {
    /// Before any response byte: may go again.
    BeforeResponse(BoxError),
    /// The upstream answered something unusable, or the request itself was bad.
    Final(BoxError),
    /// `request_timeout` passed.
    TimedOut,
    /// The client's side failed (its body was malformed, too large, or not
    /// all sent by `request_timeout`): answered with this status, and not
    /// the upstream's failure.
    Client(StatusCode, BoxError),
}

impl Failure {
    /// Sorts a client's error: connect failures and resets/closes before the
    /// head may be retried; parse errors (garbage, oversized head) may not.
    pub(crate) fn from_error(error: BoxError) -> Self {
        if is_bad_response(error.as_ref()) {
            Self::Final(error)
        } else {
            Self::BeforeResponse(error)
        }
    }
}

/// The upstream sent bytes that are not a usable response head, or hyper
/// refused the request as given; not a failure to connect.
fn is_bad_response(error: &(dyn StdError + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<ConnectFailed>() || e.is::<ConnectTimedOut>() {
            return false;
        }
        if let Some(legacy) = e.downcast_ref::<hyper_util::client::legacy::Error>()
            && legacy.is_connect()
        {
            return false;
        }
        if let Some(wire) = e.downcast_ref::<WireError>() {
            return wire.is_final();
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            return hyper.is_parse() || hyper.is_parse_status() || hyper.is_user();
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_idempotent_empty_requests_are_captured() {
        let get = Request::get("/").body(Body::empty()).unwrap();
        assert!(Replay::capture(&get).is_some());
        let post = Request::post("/").body(Body::empty()).unwrap();
        assert!(Replay::capture(&post).is_none());
        let put_with_body = Request::put("/").body(Body::full("x")).unwrap();
        assert!(Replay::capture(&put_with_body).is_none());
    }

    #[test]
    fn rebuild_keeps_head_and_conn_info() {
        let info = ConnInfo::new(
            "http".into(),
            scalws_core::Scheme::Http,
            "10.0.0.1:5000".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
            None,
        );
        let mut request = Request::delete("/x?y")
            .header("host", "a.test")
            .body(Body::empty())
            .unwrap();
        request.extensions_mut().insert(info);
        let again = Replay::capture(&request).unwrap().rebuild();
        assert_eq!(again.method(), Method::DELETE);
        assert_eq!(again.uri(), "/x?y");
        assert_eq!(again.headers()["host"], "a.test");
        assert_eq!(
            again.extensions().get::<ConnInfo>().map(ConnInfo::peer),
            Some("10.0.0.1:5000".parse().unwrap())
        );
    }
}
