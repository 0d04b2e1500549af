//! [`AccessLogLayer`] and [`AccessLogService`]: note each request, and log
//! it when its response body ends.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use scalws_core::Body;
use tower::{Layer, Service};

use super::handle::AccessLog;
use super::pending::Pending;

/// Wraps a service in an [`AccessLogService`] logging to one [`AccessLog`].
#[derive(Clone, Debug)]
pub struct AccessLogLayer {
    log: AccessLog,
}

impl AccessLogLayer {
    /// A layer logging to `log`.
    pub fn new(log: AccessLog) -> Self {
        Self { log }
    }
}

impl<S> Layer<S> for AccessLogLayer {
    type Service = AccessLogService<S>;

    fn layer(&self, inner: S) -> AccessLogService<S> {
        AccessLogService {
            inner,
            log: self.log.clone(),
        }
    }
}

/// Logs one [`AccessLogEntry`](super::AccessLogEntry) per request to the
/// inner service, when the response body ends, fails or is dropped (a
/// request whose client goes away before the response head is logged with
/// status 499). Made by [`AccessLogLayer`].
///
/// Its cost per request: copies of the host and path, and two allocations:
/// the entry being made (boxed, so that the future stays small) and the
/// response body's wrapper. The inner service's future must be `Unpin`
/// (the [`Gateway`](crate::Gateway)'s is); box another one with
/// `ServiceExt::map_future(Box::pin)`.
#[derive(Clone, Debug)]
pub struct AccessLogService<S> {
    inner: S,
    log: AccessLog,
}

impl<S> Service<Request<Body>> for AccessLogService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let pending = Pending::start(&self.log, &request);
        // Asks the proxy and the cache for the upstream address and cache status.
        request.extensions_mut().insert(scalws_core::Observed);
        ResponseFuture {
            future: self.inner.call(request),
            pending: Some(pending),
        }
    }
}

/// The future of an [`AccessLogService`] response.
pub struct ResponseFuture<F> {
    future: F,
    /// Taken with the response head; still here if the future is dropped
    /// before it.
    pending: Option<Box<Pending>>,
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>> + Unpin,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled =
            std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(&mut this.future).poll(cx)));
        let Ok(response) = ready!(match polled {
            Ok(poll) => poll,
            // The server answers a panicking handler with 500 (and logs the
            // panic): the entry says 500 too, not "client gone".
            Err(panic) => {
                if let Some(pending) = this.pending.take() {
                    pending.panicked();
                }
                std::panic::resume_unwind(panic)
            }
        });
        Poll::Ready(Ok(match this.pending.take() {
            Some(pending) => pending.respond(response),
            None => response,
        }))
    }
}

impl<F> Drop for ResponseFuture<F> {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.abandoned();
        }
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
