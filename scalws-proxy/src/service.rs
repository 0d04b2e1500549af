//! The one boxed service type, for the points where an embedder plugs in a
//! service or a layer of their own. Everything ScalWS composes itself is
//! dispatched statically; a box is paid only where one of these is used.

use std::convert::Infallible;

use http::{Request, Response};
use scalws_core::error::{error_response, status_for};
use scalws_core::{Body, BoxError};
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

/// A boxed, cloneable HTTP service that never fails: its errors have already
/// become responses. What [`Action::Service`](crate::Action::Service), the
/// embedder's layers ([`Route::layer`](crate::Route::layer),
/// [`ApplicationBuilder::layer`](crate::ApplicationBuilder::layer)) and
/// [`Gateway::boxed`](crate::Gateway::boxed) are made of.
pub type HttpService = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// Boxes `service`; an error it returns becomes a short plain-text response
/// (413 for a request body past its limit, else 500) and a log line.
pub fn boxed<S>(service: S) -> HttpService
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    BoxCloneSyncService::new(Answered(service))
}

/// A service whose errors are answered: what [`boxed`] boxes.
#[derive(Clone)]
struct Answered<S>(S);

impl<S> Service<Request<Body>> for Answered<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = crate::ActionFuture;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> crate::ActionFuture {
        // Ready or not, the clone is called through `oneshot`, which waits
        // for it to be ready: a service of the embedder's may apply backpressure.
        let call = self.0.clone().oneshot(request);
        crate::ActionFuture::boxed(async move {
            match call.await {
                Ok(response) => response,
                Err(error) => error_as_response(&error.into()),
            }
        })
    }
}

#[cold]
#[inline(never)]
pub(crate) fn error_as_response(error: &BoxError) -> Response<Body> {
    let status = status_for(error.as_ref());
    tracing::warn!(%error, %status, "service failed");
    error_response(status)
}
