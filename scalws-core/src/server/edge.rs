//! The edge between hyper and a tower `Service`: the one place a request gets
//! its [`ConnInfo`] and limits, and a failure or panic becomes a response.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt;
use http::{Extensions, HeaderValue, Method, Request, Response, StatusCode, Version, header};
use http_body_util::Either;
use hyper::body::Incoming;
use tower::{Service, ServiceExt};

use super::activity::{Activity, SendClock};
use super::bodiless::{Emptiable, forbid_body};
use super::websocket;
use crate::error::{BoxError, error_response, status_for};
use crate::{Body, ConnInfo};

/// Everything one connection's requests share.
pub(crate) struct Edge {
    pub(crate) conn: ConnInfo,
    /// What every request's extensions start with: a clone of `conn`, made
    /// by [`Edge::seal`] once the connection is what it will stay (after a
    /// TLS handshake), then cloned whole into each request. A clone of a
    /// one-entry map costs fewer instructions than inserting into the empty
    /// map a request comes with (hashbrown's first growth).
    extensions: Extensions,
    pub(crate) activity: Arc<Activity>,
    pub(crate) max_request_body: u64,
    /// Advertises HTTP/3 on HTTPS listeners that have it on the same port.
    pub(crate) alt_svc: Option<HeaderValue>,
}

/// Marks a request finished however its future ends before its response
/// head (an error, a drop); at the head it becomes the body's [`Open`].
struct InFlight<'a>(&'a Arc<Activity>);

impl InFlight<'_> {
    /// The response head is ready: the request's count passes to its body.
    fn into_open(self) -> Open {
        let activity = self.0.clone();
        // Its drop would count the request finished a second time.
        std::mem::forget(self);
        activity.response_ready();
        Open(activity)
    }
}

/// A response body being sent, however it ends: the connection is busy
/// until the last byte of the response, so a quiet stream (server-sent
/// events) is never taken for an idle connection.
pub(crate) struct Open(Arc<Activity>);

impl Open {
    pub(crate) fn new(activity: &Arc<Activity>) -> Self {
        activity.opened();
        Self(activity.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.closed();
    }
}

pin_project_lite::pin_project! {
    /// A response body as it is sent: it keeps its connection busy, and on
    /// HTTP/2 keeps the clock `send_timeout` reads (see [`SendClock`]).
    pub(crate) struct Sending<B> {
        #[pin]
        body: B,
        // Dropped with the body: hyper drops it once sent, or on failure.
        open: Open,
        clock: Option<Arc<SendClock>>,
    }
}

impl<B: Emptiable> Emptiable for Sending<B> {
    fn exact_size(&self) -> Option<u64> {
        self.body.exact_size()
    }

    fn empty(&mut self) {
        self.body.empty();
    }
}

impl<B: http_body::Body> http_body::Body for Sending<B> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let Some(clock) = this.clock.as_ref() else {
            return this.body.poll_frame(cx);
        };
        clock.asked();
        let polled = this.body.poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            clock.handed();
        }
        polled
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

impl Edge {
    pub(crate) fn new(
        conn: ConnInfo,
        activity: Arc<Activity>,
        max_request_body: u64,
        alt_svc: Option<HeaderValue>,
    ) -> Self {
        Self {
            conn,
            extensions: Extensions::new(),
            activity,
            max_request_body,
            alt_svc,
        }
    }

    /// Fixes the connection's [`ConnInfo`] as its requests will see it.
    pub(crate) fn seal(&mut self) {
        let mut extensions = Extensions::new();
        extensions.insert(self.conn.clone());
        self.extensions = extensions;
    }

    /// Answers one request with `service`, a clone of the connection's own:
    /// the service need not be `Sync` (a `tower::util::BoxCloneService` is not).
    pub(crate) async fn handle<S, B>(
        &self,
        service: S,
        request: Request<Incoming>,
    ) -> Result<Response<Sending<Either<B, Body>>>, Infallible>
    where
        B: http_body::Body,
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
    {
        let multiplexed = request.version() == Version::HTTP_2;
        self.activity.request_started(multiplexed);
        let in_flight = InFlight(&self.activity);
        // One `map` of the response: it is a large value to move.
        let sending = |body| Sending {
            body,
            clock: multiplexed.then(|| self.activity.send_clock()),
            open: in_flight.into_open(),
        };

        let head = request.method() == Method::HEAD;
        if declared_length(&request).is_some_and(|len| len > self.max_request_body) {
            let mut response =
                reject(StatusCode::PAYLOAD_TOO_LARGE, request.version()).map(sending);
            forbid_body(&mut response, head);
            return Ok(response);
        }

        let mut request = request.map(|body| Body::incoming(body, self.max_request_body));
        // An HTTP/2 WebSocket (RFC 8441) goes on as an HTTP/1.1 upgrade.
        let connect = multiplexed && request.method() == Method::CONNECT;
        if connect && !websocket::from_extended_connect(&mut request) {
            let response = reject(StatusCode::NOT_IMPLEMENTED, request.version());
            return Ok(response.map(sending));
        }
        request.extensions_mut().extend(self.extensions.clone());

        let call = service.oneshot(request);
        let mut response = match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(response)) => response.map(|body| sending(Either::Left(body))),
            Ok(Err(error)) => failed(error.into()).map(sending),
            Err(_panic) => panicked().map(sending),
        };
        if let Some(alt_svc) = &self.alt_svc {
            response
                .headers_mut()
                .entry(header::ALT_SVC)
                .or_insert_with(|| alt_svc.clone());
        }
        if connect {
            response = websocket::to_extended_connect(response);
        }
        forbid_body(&mut response, head);
        Ok(response)
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
