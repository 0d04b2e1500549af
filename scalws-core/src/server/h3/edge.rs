//! One HTTP/3 request stream: head, limits, `ConnInfo`, the service call. The
//! same rules as the TCP edge: a failure or a panic becomes a response.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Either;
use tower::{Service, ServiceExt};

use super::body::RequestBody;
use super::response::ResponseStream;
use crate::error::{BoxError, error_response};
use crate::server::bodiless::without_forbidden_body;
use crate::server::edge::{declared_length, failed, panicked};
use crate::server::limits::Limits;
use crate::{Body, ConnInfo};

/// What h3 hands over for each request stream.
pub(super) type Resolver = ::h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

/// Everything one connection's requests share.
pub(super) struct Edge {
    pub(super) conn: ConnInfo,
    pub(super) limits: Arc<Limits>,
}

impl Edge {
    /// Reads the request head, answers it, and streams the response back.
    /// Every error ends this stream only.
    pub(super) async fn serve<S, B>(self: Arc<Self>, service: S, resolver: Resolver)
    where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let head =
            tokio::time::timeout(self.limits.header_read_timeout, resolver.resolve_request()).await;
        let (request, stream) = match head {
            Ok(Ok(resolved)) => resolved,
            Ok(Err(error)) => {
                // h3 has already answered 431 or reset the stream, as fits.
                tracing::debug!(%error, "HTTP/3 request head refused");
                return;
            }
            Err(_elapsed) => {
                tracing::debug!("HTTP/3 request head not received in time");
                return;
            }
        };
        let (send, recv) = stream.split();
        let mut response_stream = ResponseStream::new(send);
        let is_head = request.method() == Method::HEAD;
        let response = self.respond(service, request, recv).await;
        let (response, with_body) = without_forbidden_body(response, is_head);
        if let Err(error) = response_stream.send(response, with_body).await {
            tracing::debug!(%error, "HTTP/3 response not sent whole");
        }
    }

    async fn respond<S, B>(
        &self,
        service: S,
        request: Request<()>,
        recv: super::body::RecvHalf,
    ) -> Response<Either<B, Body>>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
        B: http_body::Body,
    {
        if request.headers().len() > self.limits.max_headers {
            return reject(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        }
        let declared = declared_length(&request);
        if declared.is_some_and(|len| len > self.limits.max_request_body) {
            // Dropping `recv` tells the client to stop sending.
            return reject(StatusCode::PAYLOAD_TOO_LARGE);
        }
        let (mut parts, ()) = request.into_parts();
        parts.extensions.insert(self.conn.clone());
        let body = RequestBody::new(recv, self.limits.max_request_body, declared);
        let request = Request::from_parts(parts, Body::new(body));

        let call = service.oneshot(request);
        match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(response)) => response.map(Either::Left),
            Ok(Err(error)) => failed(error.into()),
            Err(_panic) => panicked(),
        }
    }
}

#[cold]
#[inline(never)]
fn reject<B>(status: StatusCode) -> Response<Either<B, Body>> {
    error_response(status).map(Either::Right)
}
