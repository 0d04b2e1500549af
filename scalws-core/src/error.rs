//! Errors shared by every layer, and the one place that turns them into responses.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use crate::Body;

/// The error type at service boundaries.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body went past `limits.max_request_body`.
#[derive(Debug, thiserror::Error)]
#[error("request body too large")]
pub struct BodyTooLarge;

/// A handler panicked; the client gets 500 and the process goes on.
#[derive(Debug, thiserror::Error)]
#[error("request handler panicked")]
pub struct HandlerPanicked;

/// The status a failure should be answered with, found by walking the error's causes.
pub fn status_for(error: &(dyn std::error::Error + 'static)) -> StatusCode {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.is::<BodyTooLarge>() {
            return StatusCode::PAYLOAD_TOO_LARGE;
        }
        cause = e.source();
    }
    StatusCode::INTERNAL_SERVER_ERROR
}

/// A short plain-text response for `status`: `404 Not Found\n`.
///
/// Every error ScalWS itself produces goes through here, so they look alike.
pub fn error_response(status: StatusCode) -> Response<Body> {
    let reason = status.canonical_reason().unwrap_or("Error");
    let text = format!("{} {}\n", status.as_u16(), reason);
    let mut response = Response::new(Body::full(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_too_large_maps_to_413_through_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("wrapped")]
        struct Wrapped(#[source] BodyTooLarge);
        assert_eq!(
            status_for(&Wrapped(BodyTooLarge)),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            status_for(&HandlerPanicked),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[test]
    fn error_response_is_plain_text_with_reason() {
        let r = error_response(StatusCode::NOT_FOUND);
        assert_eq!(r.status(), 404);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }
}
