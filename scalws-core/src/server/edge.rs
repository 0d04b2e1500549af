//! The edge between hyper and a tower `Service`: the one place a request gets
//! its [`ConnInfo`] and limits, and a failure or panic becomes a response.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, Version, header};
use http_body_util::Either;
use hyper::body::Incoming;
use tower::{Service, ServiceExt};

use super::activity::Activity;
use super::bodiless::without_forbidden_body;
use crate::error::{BoxError, error_response, status_for};
use crate::{Body, ConnInfo};

/// Everything one connection's requests share.
pub(crate) struct Edge {
    pub(crate) conn: ConnInfo,
    pub(crate) activity: Arc<Activity>,
    pub(crate) max_request_body: u64,
    /// Advertises HTTP/3 on HTTPS listeners that have it on the same port.
    pub(crate) alt_svc: Option<HeaderValue>,
}

/// Marks a request finished however its future ends (completion, error, drop).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

impl Edge {
    /// Answers one request with `service`, a clone of the connection's own:
    /// the service need not be `Sync` (a `tower::util::BoxCloneService` is not).
    pub(crate) async fn handle<S, B>(
        &self,
        service: S,
        request: Request<Incoming>,
    ) -> Result<Response<Either<B, Body>>, Infallible>
    where
        B: http_body::Body,
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
    {
        self.activity
            .request_started(request.version() == Version::HTTP_2);
        let _in_flight = InFlight(self.activity.clone());

        let head = request.method() == Method::HEAD;
        if declared_length(&request).is_some_and(|len| len > self.max_request_body) {
            let response = reject(StatusCode::PAYLOAD_TOO_LARGE, request.version());
            return Ok(without_forbidden_body(response, head).0);
        }

        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(self.conn.clone());
        let request = Request::from_parts(parts, Body::incoming(body, self.max_request_body));

        let call = service.oneshot(request);
        let mut response = match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(response)) => response.map(Either::Left),
            Ok(Err(error)) => failed(error.into()),
            Err(_panic) => panicked(),
        };
        if let Some(alt_svc) = &self.alt_svc {
            response
                .headers_mut()
                .entry(header::ALT_SVC)
                .or_insert_with(|| alt_svc.clone());
        }
        Ok(without_forbidden_body(response, head).0)
    }
}

pub(crate) fn declared_length<B>(request: &Request<B>) -> Option<u64> {
    let value = request.headers().get(header::CONTENT_LENGTH)?;
    value.to_str().ok()?.parse().ok()
}

#[cold]
#[inline(never)]
fn reject<B>(status: StatusCode, version: Version) -> Response<Either<B, Body>> {
    let mut response = error_response(status);
    if version < Version::HTTP_2 {
        // The unread body makes the connection useless for another request.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response.map(Either::Right)
}

#[cold]
#[inline(never)]
pub(crate) fn failed<B>(error: BoxError) -> Response<Either<B, Body>> {
    let status = status_for(error.as_ref());
    if status.is_server_error() {
        tracing::warn!(%error, "request failed");
    } else {
        tracing::debug!(%error, "request refused");
    }
    error_response(status).map(Either::Right)
}

#[cold]
#[inline(never)]
pub(crate) fn panicked<B>() -> Response<Either<B, Body>> {
    tracing::error!("request handler panicked; answered 500");
    error_response(StatusCode::INTERNAL_SERVER_ERROR).map(Either::Right)
}
