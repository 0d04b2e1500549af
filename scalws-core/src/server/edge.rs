//! The edge between hyper and a tower `Service`: the one place a request gets
//! its [`ConnInfo`] and limits, and a failure or panic becomes a response.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use http_body_util::Either;
use hyper::body::Incoming;
use tower::{Service, ServiceExt};

use super::activity::Activity;
use crate::error::{BoxError, error_response, status_for};
use crate::{Body, ConnInfo};

/// Everything one connection's requests share.
pub(crate) struct Edge<S> {
    pub(crate) service: S,
    pub(crate) conn: ConnInfo,
    pub(crate) activity: Arc<Activity>,
    pub(crate) max_request_body: u64,
}

/// Marks a request finished however its future ends (completion, error, drop).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

impl<S, B> Edge<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    pub(crate) async fn handle(
        &self,
        request: Request<Incoming>,
    ) -> Result<Response<Either<B, Body>>, Infallible> {
        self.activity
            .request_started(request.version() == Version::HTTP_2);
        let _in_flight = InFlight(self.activity.clone());

        if declared_length(&request).is_some_and(|len| len > self.max_request_body) {
            return Ok(reject(StatusCode::PAYLOAD_TOO_LARGE, request.version()));
        }

        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(self.conn.clone());
        let request = Request::from_parts(parts, Body::incoming(body, self.max_request_body));

        let call = self.service.clone().oneshot(request);
        match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(response)) => Ok(response.map(Either::Left)),
            Ok(Err(error)) => Ok(failed(error.into())),
            Err(_panic) => Ok(panicked()),
        }
    }
}

fn declared_length<B>(request: &Request<B>) -> Option<u64> {
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
fn failed<B>(error: BoxError) -> Response<Either<B, Body>> {
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
fn panicked<B>() -> Response<Either<B, Body>> {
    tracing::error!("request handler panicked; answered 500");
    error_response(StatusCode::INTERNAL_SERVER_ERROR).map(Either::Right)
}
