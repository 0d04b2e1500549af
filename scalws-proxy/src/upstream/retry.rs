//! When a failed attempt may go again.
//!
//! Only idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) with an
//! empty body are retried, and only for failures before any response byte:
//! connect errors, and a connection reset or closed before the response head.
//! A response that is garbage or has an oversized head is an answer (a bad
//! one) and is not retried; neither is a `request_timeout`, which bounds every
//! attempt together.

use std::error::Error as StdError;

use http::request::Parts;
use http::{Method, StatusCode, header};
use scalws_core::{Body, BoxError};

use super::error::{ConnectFailed, ConnectTimedOut};
use super::wire::WireError;

/// Whether a request (`head`, `body`) may be sent again: idempotent, with an
/// empty body. The pool sends it again from the head its caller keeps, with
/// no body.
pub(crate) fn allowed(head: &Parts, body: &Body) -> bool {
    is_idempotent(&head.method) && has_empty_body(head, body)
}

fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

fn has_empty_body(head: &Parts, body: &Body) -> bool {
    http_body::Body::is_end_stream(body)
        || head
            .headers
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
    use http::Request;

    use super::*;

    #[test]
    fn only_idempotent_empty_requests_are_allowed() {
        let allowed = |request: Request<Body>| {
            let (head, body) = request.into_parts();
            super::allowed(&head, &body)
        };
        assert!(allowed(Request::get("/").body(Body::empty()).unwrap()));
        assert!(!allowed(Request::post("/").body(Body::empty()).unwrap()));
        assert!(!allowed(Request::put("/").body(Body::full("x")).unwrap()));
    }
}
