//! [`ActionFuture`]: the one future type of every stage in the standard stack.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;

use crate::observe::metrics::RouteMetrics;
use crate::route::HeaderModifier;

/// The future of a stage: ready at once for fixed answers (`respond`,
/// redirects, errors), boxed for the rest. One concrete type, so stages
/// compose without a box per layer.
pub struct ActionFuture {
    kind: FutureKind,
    /// Counts the response when it comes (futures that are not ready at once).
    measure: Option<Measure>,
}

struct Measure {
    metrics: Arc<RouteMetrics>,
    start: Instant,
}

enum FutureKind {
    /// Taken when polled: a future is not polled after it is ready.
    Ready(Option<Response<Body>>),
    Boxed(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

impl std::fmt::Debug for ActionFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            FutureKind::Ready(_) => "ready",
            FutureKind::Boxed(_) => "boxed",
        };
        f.debug_struct("ActionFuture").field("kind", &kind).finish()
    }
}

impl ActionFuture {
    /// A future ready with `response`.
    #[inline(always)]
    pub fn ready(response: Response<Body>) -> Self {
        Self {
            kind: FutureKind::Ready(Some(response)),
            measure: None,
        }
    }

    /// A future that runs `future` (boxed once).
    pub fn boxed(future: impl Future<Output = Response<Body>> + Send + 'static) -> Self {
        Self {
            kind: FutureKind::Boxed(Box::pin(future)),
            measure: None,
        }
    }

    /// A future that runs the future `make` returns, built in its box:
    /// `make` is called with the box already allocated, so a large future
    /// (the proxy's is 4 KiB) is not built on the stack and then copied in.
    #[inline(always)]
    pub(crate) fn boxed_in_place<F>(make: impl FnOnce() -> F) -> Self
    where
        F: Future<Output = Response<Body>> + Send + 'static,
    {
        let future = Box::write(Box::<F>::new_uninit(), make());
        Self {
            kind: FutureKind::Boxed(Box::into_pin(future)),
            measure: None,
        }
    }

    /// Calls `service` (readiness awaited, as `oneshot` does) and boxes its
    /// future: how a stage calls a service of another type.
    pub(crate) fn oneshot<S>(service: S, request: http::Request<Body>) -> Self
    where
        S: tower::Service<http::Request<Body>, Response = Response<Body>, Error = Infallible>
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        let call = tower::ServiceExt::oneshot(service, request);
        Self::boxed(async move { call.await.unwrap_or_else(|never| match never {}) })
    }

    /// A future ready with the short plain-text response for `status`.
    #[cold]
    #[inline(never)]
    pub fn error(status: StatusCode) -> Self {
        Self::ready(error_response(status))
    }

    /// The response, when it is ready now (before the future is polled).
    #[inline(always)]
    fn ready_response(&mut self) -> Option<&mut Response<Body>> {
        match &mut self.kind {
            FutureKind::Ready(response) => response.as_mut(),
            FutureKind::Boxed(_) => None,
        }
    }

    /// Counts the response in `metrics`: at once when it is ready (as taking
    /// no time: it was made while routing), else when its head comes.
    #[inline(always)]
    pub(crate) fn measured(mut self, metrics: &Arc<RouteMetrics>) -> Self {
        match self.ready_response() {
            Some(response) => metrics.record(response.status().as_u16(), Duration::ZERO),
            None => {
                self.measure = Some(Measure {
                    metrics: metrics.clone(),
                    start: Instant::now(),
                });
            }
        }
        self
    }

    /// A header of a response that is ready now.
    pub(crate) fn ready_header(
        &mut self,
        name: http::header::HeaderName,
    ) -> Option<http::HeaderValue> {
        self.ready_response()?.headers().get(name).cloned()
    }

    /// The status of a response that is ready now.
    pub(crate) fn ready_status(&mut self) -> Option<StatusCode> {
        self.ready_response().map(|response| response.status())
    }

    /// Applies `headers` to the response once it comes; at once when it is ready.
    pub(crate) fn with_response_headers(mut self, headers: Arc<HeaderModifier>) -> Self {
        if let Some(response) = self.ready_response() {
            headers.apply(response.headers_mut());
            return self;
        }
        let measure = self.measure.take();
        let mut future = Self::boxed(async move {
            let mut response = self.await.unwrap_or_else(|never| match never {});
            headers.apply(response.headers_mut());
            response
        });
        future.measure = measure;
        future
    }

    /// Answers 504 when the response head has not come within `limit`.
    #[cold]
    #[inline(never)]
    pub(crate) fn with_timeout(self, limit: Duration) -> Self {
        if matches!(self.kind, FutureKind::Ready(_)) {
            return self;
        }
        Self::boxed(async move {
            match tokio::time::timeout(limit, self).await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_elapsed) => error_response(StatusCode::GATEWAY_TIMEOUT),
            }
        })
    }
}

impl Future for ActionFuture {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match &mut this.kind {
            FutureKind::Ready(response) => Poll::Ready(Ok(response
                .take()
                .expect("ActionFuture polled after it was ready"))),
            FutureKind::Boxed(future) => {
                let response = std::task::ready!(future.as_mut().poll(cx));
                if let Some(measure) = this.measure.take() {
                    let elapsed = measure.start.elapsed();
                    measure.metrics.record(response.status().as_u16(), elapsed);
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}
