//! The one boxed service type, for the points where an embedder plugs in a
//! service or a layer of their own. Everything ScalWS composes itself is
//! dispatched statically; a box is paid only where one of these is used.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use scalws_core::error::{error_response, status_for};
use scalws_core::{Body, BoxError};
use tower::{Service, ServiceExt};

use crate::ActionFuture;

/// A boxed, cloneable HTTP service that never fails: its errors have already
/// become responses. What [`Action::Service`](crate::Action::Service), the
/// embedder's layers ([`Route::layer`](crate::Route::layer),
/// [`ApplicationBuilder::layer`](crate::ApplicationBuilder::layer)) and
/// [`Gateway::boxed`](crate::Gateway::boxed) are made of.
///
/// Like tower's `BoxCloneSyncService`, but cloning it is one reference-count
/// increment (the service inside is shared: a service of yours is cloned
/// per call, a ScalWS stage not at all), and its future is the stack's own
/// [`ActionFuture`]: a layer over a ScalWS stage adds one box per request,
/// not three.
#[derive(Clone)]
pub struct HttpService {
    inner: Arc<dyn Erased>,
}

impl std::fmt::Debug for HttpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpService")
    }
}

/// A service behind the box: called by shared reference.
trait Erased: Send + Sync {
    fn call(&self, request: Request<Body>) -> ActionFuture;
}

/// Any service: a clone of it per call, its future boxed, its errors answered.
struct Answered<S>(S);

impl<S> Erased for Answered<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    fn call(&self, request: Request<Body>) -> ActionFuture {
        // Through `oneshot`, which waits for the clone to be ready: a service
        // of the embedder's may apply backpressure.
        let call = self.0.clone().oneshot(request);
        ActionFuture::boxed(async move {
            match call.await {
                Ok(response) => response,
                Err(error) => error_as_response(&error.into()),
            }
        })
    }
}

/// A ScalWS stage that answers by shared reference: no clone per call.
pub(crate) trait Answer: Send + Sync + 'static {
    /// Answers one request.
    fn answer(&self, request: Request<Body>) -> ActionFuture;
}

/// A ScalWS stage behind the box.
struct Direct<S>(S);

impl<S: Answer> Erased for Direct<S> {
    fn call(&self, request: Request<Body>) -> ActionFuture {
        self.0.answer(request)
    }
}

impl HttpService {
    /// Boxes `service`; an error it returns becomes a short plain-text
    /// response (413 for a request body past its limit, else 500) and a log line.
    pub fn new<S>(service: S) -> Self
    where
        S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        Self {
            inner: Arc::new(Answered(service)),
        }
    }

    /// Boxes a ScalWS stage (always ready, never failing), without boxing
    /// its future again.
    pub(crate) fn direct<S: Answer>(service: S) -> Self {
        Self {
            inner: Arc::new(Direct(service)),
        }
    }

    /// Calls the service without a clone of the box.
    #[inline]
    pub(crate) fn call_ref(&self, request: Request<Body>) -> ActionFuture {
        self.inner.call(request)
    }
}

/// Always ready: readiness is awaited per call, inside.
impl Service<Request<Body>> for HttpService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        self.inner.call(request)
    }
}

/// Boxes `service` ([`HttpService::new`]).
pub fn boxed<S>(service: S) -> HttpService
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    HttpService::new(service)
}

#[cold]
#[inline(never)]
pub(crate) fn error_as_response(error: &BoxError) -> Response<Body> {
    let status = status_for(error.as_ref());
    tracing::warn!(%error, %status, "service failed");
    error_response(status)
}
