//! The edge between hyper and a tower `Service`: the one place a request gets
//! its [`ConnInfo`] and limits, and a failure or panic becomes a response.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use http::{Extensions, HeaderValue, Method, Request, Response, StatusCode, Version, header};
use http_body_util::Either;
use hyper::body::Incoming;
use tower::Service;

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

    /// Starts answering `request` with `service`, a clone of the
    /// connection's own (so the service need not be `Sync`; a
    /// `tower::util::BoxCloneService` is not). A request refused here (a
    /// declared body over the limit, an HTTP/2 CONNECT that is not a
    /// WebSocket) never reaches the service.
    ///
    /// A service ready at once (the gateway always is) is called here, as
    /// the request head comes in (on HTTP/2, within the connection's poll),
    /// so the request moves once, into the service, and the future hyper
    /// keeps for the request has room for the service's future or a ready
    /// response, not for the service and the request; one that is not ready
    /// waits in a box, and is asked again when the future is polled. A
    /// future dropped before its first poll (its connection failed in the
    /// same poll) has still called the service.
    fn handle<S, B>(self: &Arc<Self>, service: S, request: Request<Incoming>) -> Handling<S, B>
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: Into<BoxError>,
    {
        let multiplexed = request.version() == Version::HTTP_2;
        self.activity.request_started(multiplexed);
        let head = request.method() == Method::HEAD;
        let stage = if declared_length(&request).is_some_and(|len| len > self.max_request_body) {
            Stage::refused(reject(StatusCode::PAYLOAD_TOO_LARGE, request.version()))
        } else {
            let mut request = request.map(|body| Body::incoming(body, self.max_request_body));
            // An HTTP/2 WebSocket (RFC 8441) goes on as an HTTP/1.1 upgrade.
            let connect = multiplexed && request.method() == Method::CONNECT;
            if connect && !websocket::from_extended_connect(&mut request) {
                Stage::refused(reject(StatusCode::NOT_IMPLEMENTED, request.version()))
            } else {
                request.extensions_mut().extend(self.extensions.clone());
                Stage::start(service, request, connect)
            }
        };
        Handling {
            edge: self.clone(),
            multiplexed,
            head,
            stage,
        }
    }
}

/// One connection's service as hyper calls it: each request gets a clone of
/// the tower service and the connection's [`Edge`].
pub(crate) struct EdgeService<S> {
    edge: Arc<Edge>,
    service: S,
}

impl<S> EdgeService<S> {
    pub(crate) fn new(edge: Edge, service: S) -> Self {
        Self {
            edge: Arc::new(edge),
            service,
        }
    }
}

impl<S, B> hyper::service::Service<Request<Incoming>> for EdgeService<S>
where
    B: http_body::Body,
    S: Service<Request<Body>, Response = Response<B>> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = Response<Sending<Either<B, Body>>>;
    type Error = Infallible;
    type Future = Handling<S, B>;

    #[inline]
    fn call(&self, request: Request<Incoming>) -> Handling<S, B> {
        self.edge.handle(self.service.clone(), request)
    }
}

pin_project_lite::pin_project! {
    /// A request being answered: the service's readiness, its call and its
    /// future, a failure or a panic in any of them answered as a response
    /// (500 for a panic; the connection goes on). Written out, not an
    /// `async` block around `oneshot` and `catch_unwind`: each of those
    /// layers held the request and the service once more and moved them,
    /// and the future, into the next.
    pub(crate) struct Handling<S, B>
    where
        S: Service<Request<Body>, Response = Response<B>>,
    {
        edge: Arc<Edge>,
        multiplexed: bool,
        head: bool,
        #[pin]
        stage: Stage<S, S::Future, B>,
    }

    impl<S, B> PinnedDrop for Handling<S, B>
    where
        S: Service<Request<Body>, Response = Response<B>>,
    {
        fn drop(this: Pin<&mut Self>) {
            // Ended before its response head (an error, a drop): at the
            // head, the request's count passed to the body's `Open`.
            if !matches!(this.stage, Stage::Answered) {
                this.edge.activity.request_finished();
            }
        }
    }
}

pin_project_lite::pin_project! {
    #[project = StageProj]
    enum Stage<S, F, B> {
        /// Waiting for the service to be ready (rare, so boxed: the future
        /// keeps no room for the service and the request); the request is
        /// taken by its call.
        Waiting { waiting: Box<Waiting<S>> },
        Called { #[pin] future: F, connect: bool },
        /// Answered without the service's future (refused before the
        /// service, or its readiness or call failed or panicked): the
        /// response is taken when polled.
        Done { response: Option<Response<Either<B, Body>>>, made: Made },
        /// The response head was handed on.
        Answered,
    }
}

/// A request whose service was not ready when it came.
struct Waiting<S> {
    service: S,
    request: Option<Request<Body>>,
    connect: bool,
}

/// How a response was made: a refused request's gets no `Alt-Svc`; a
/// WebSocket's CONNECT (RFC 8441) answered by the service is turned back
/// into HTTP/2's form.
#[derive(Clone, Copy)]
enum Made {
    Refused,
    Served { connect: bool },
}

impl<S, B> Future for Handling<S, B>
where
    B: http_body::Body,
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<Sending<Either<B, Body>>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| this.stage.as_mut().answer(cx)));
        let (response, made) = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(answer)) => answer,
            Err(_panic) => (panicked(), Made::Served { connect: false }),
        };
        // The service (or its future) is dropped here, before the body is sent.
        this.stage.set(Stage::Answered);
        let (mut parts, body) = response.into_parts();
        if let (Made::Served { .. }, Some(alt_svc)) = (made, &this.edge.alt_svc) {
            parts
                .headers
                .entry(header::ALT_SVC)
                .or_insert_with(|| alt_svc.clone());
        }
        let activity = &this.edge.activity;
        activity.response_ready();
        let sending = Sending {
            body,
            clock: this.multiplexed.then(|| activity.send_clock()),
            open: Open(activity.clone()),
        };
        let mut response = Response::from_parts(parts, sending);
        if let Made::Served { connect: true } = made {
            response = websocket::to_extended_connect(response);
        }
        forbid_body(&mut response, *this.head);
        Poll::Ready(Ok(response))
    }
}

impl<S, B> Stage<S, S::Future, B>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    #[inline]
    fn refused(response: Response<Either<B, Body>>) -> Self {
        Stage::Done {
            response: Some(response),
            made: Made::Refused,
        }
    }

    /// Calls `service` if it is ready now (asked with a waker that does
    /// nothing: if it is not, it is asked again with the task's own when
    /// the future is polled, which is at once). What the service runs here
    /// (its readiness, its call, an error's conversion) is under
    /// `catch_unwind`, as it was inside the future's poll: on HTTP/2 this
    /// runs within the connection's poll, where a panic would end every
    /// stream of the connection. The drop of this clone of the service is
    /// not, as the drop of its future after the answer is not: a `Drop`
    /// that panics is a bug no server can answer for. (Catching the drop
    /// too, with the call in one closure, cost about 150 instructions per
    /// request: the service and the request then moved through
    /// `catch_unwind`'s closure.)
    #[inline]
    fn start(mut service: S, request: Request<Body>, connect: bool) -> Self {
        let ready = std::panic::catch_unwind(AssertUnwindSafe(|| {
            service.poll_ready(&mut Context::from_waker(Waker::noop()))
        }));
        match ready {
            Ok(Poll::Ready(Ok(()))) => {
                match std::panic::catch_unwind(AssertUnwindSafe(|| service.call(request))) {
                    Ok(future) => Stage::Called { future, connect },
                    Err(_panic) => Stage::Done {
                        response: Some(panicked()),
                        made: Made::Served { connect: false },
                    },
                }
            }
            Ok(Poll::Pending) => Stage::Waiting {
                waiting: Box::new(Waiting {
                    service,
                    request: Some(request),
                    connect,
                }),
            },
            Ok(Poll::Ready(Err(error))) => Self::unserved(service, move || failed(error.into())),
            Err(_panic) => Self::unserved(service, panicked),
        }
    }

    /// A request answered without the service's future, its readiness
    /// having failed or panicked: `answer` (an error's conversion) and the
    /// service's drop under `catch_unwind` (a cold path: the catch costs
    /// nothing to a request that is served).
    #[cold]
    #[inline(never)]
    fn unserved(service: S, answer: impl FnOnce() -> Response<Either<B, Body>>) -> Self {
        let response = std::panic::catch_unwind(AssertUnwindSafe(move || {
            let response = answer();
            drop(service);
            response
        }));
        Stage::Done {
            response: Some(response.unwrap_or_else(|_panic| panicked())),
            made: Made::Served { connect: false },
        }
    }

    /// The response, and how it was made.
    #[inline(always)]
    fn answer(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<(Response<Either<B, Body>>, Made)> {
        if let StageProj::Waiting { waiting } = self.as_mut().project() {
            let waiting = &mut **waiting;
            if let Err(error) = std::task::ready!(waiting.service.poll_ready(cx)) {
                return Poll::Ready((failed(error.into()), Made::Served { connect: false }));
            }
            let connect = waiting.connect;
            let Some(request) = waiting.request.take() else {
                unreachable!("a request is taken once, and the stage moves on at once")
            };
            let future = waiting.service.call(request);
            self.set(Stage::Called { future, connect });
        }
        match self.project() {
            StageProj::Called { future, connect } => {
                let response = match std::task::ready!(future.poll(cx)) {
                    Ok(response) => response.map(Either::Left),
                    Err(error) => failed(error.into()),
                };
                Poll::Ready((response, Made::Served { connect: *connect }))
            }
            StageProj::Done { response, made } => match response.take() {
                Some(response) => Poll::Ready((response, *made)),
                None => unreachable!("a request is answered once"),
            },
            StageProj::Waiting { .. } | StageProj::Answered => {
                unreachable!("a request is answered once")
            }
        }
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
