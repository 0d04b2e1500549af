//! The route policies as tower layers, for use outside a gateway's routes
//! (inside one, a [`Route`](crate::Route) applies the same code without a
//! layer per policy; `gateway/stack.rs` shows the order).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::request::Parts;
use http::{Request, Response};
use scalws_core::Body;
use tower::{Layer, Service};

use super::{HeaderModifier, Rewrite};
use crate::action::ActionFuture;

/// A change to a request's head before the inner service, which may answer
/// for it instead (`Err` with the response).
pub trait RequestPolicy: Clone + Send + Sync + 'static {
    /// Changes `parts`, or answers the request. (The answer is not boxed:
    /// it is the rare path, and a box would cost it an allocation.)
    #[allow(clippy::result_large_err)]
    fn apply(&self, parts: &mut Parts) -> Result<(), Response<Body>>;
}

impl RequestPolicy for Rewrite {
    fn apply(&self, parts: &mut Parts) -> Result<(), Response<Body>> {
        Rewrite::apply(self, parts).map_err(scalws_core::error::error_response)
    }
}

/// The request headers a [`HeaderModifier`] changes (the `request_headers`
/// policy).
#[derive(Clone, Debug)]
pub struct RequestHeaders(pub HeaderModifier);

impl RequestPolicy for RequestHeaders {
    fn apply(&self, parts: &mut Parts) -> Result<(), Response<Body>> {
        self.0.apply(&mut parts.headers);
        Ok(())
    }
}

/// Wraps a service in a [`PolicyService`] applying `P` to each request.
#[derive(Clone, Debug)]
pub struct PolicyLayer<P> {
    policy: P,
}

impl<P> PolicyLayer<P> {
    /// A layer applying `policy`: a [`Rewrite`], [`RequestHeaders`],
    /// [`HttpsRedirect`](super::HttpsRedirect) or a policy of your own.
    pub fn new(policy: P) -> Self {
        Self { policy }
    }
}

impl<P: Clone, S> Layer<S> for PolicyLayer<P> {
    type Service = PolicyService<P, S>;

    fn layer(&self, inner: S) -> Self::Service {
        PolicyService {
            policy: self.policy.clone(),
            inner,
        }
    }
}

/// Applies a [`RequestPolicy`], then calls the inner service (unless the
/// policy answered).
#[derive(Clone, Debug)]
pub struct PolicyService<P, S> {
    policy: P,
    inner: S,
}

impl<P, S> Service<Request<Body>> for PolicyService<P, S>
where
    P: RequestPolicy,
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        let (mut parts, body) = request.into_parts();
        match self.policy.apply(&mut parts) {
            Ok(()) => call(&self.inner, Request::from_parts(parts, body)),
            Err(response) => ActionFuture::ready(response),
        }
    }
}

/// Calls a clone of `inner` (ready at once, as every ScalWS service is).
fn call<S>(inner: &S, request: Request<Body>) -> ActionFuture
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    ActionFuture::oneshot(inner.clone(), request)
}

/// Changes the headers of every response of the inner service, errors
/// included (the `response_headers` policy).
#[derive(Clone, Debug)]
pub struct ResponseHeadersLayer {
    headers: Arc<HeaderModifier>,
}

impl ResponseHeadersLayer {
    /// A layer applying `headers` to responses.
    pub fn new(headers: HeaderModifier) -> Self {
        Self {
            headers: Arc::new(headers),
        }
    }
}

impl<S> Layer<S> for ResponseHeadersLayer {
    type Service = ResponseHeaders<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ResponseHeaders {
            headers: self.headers.clone(),
            inner,
        }
    }
}

/// Made by [`ResponseHeadersLayer`].
#[derive(Clone, Debug)]
pub struct ResponseHeaders<S> {
    headers: Arc<HeaderModifier>,
    inner: S,
}

impl<S> Service<Request<Body>> for ResponseHeaders<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        call(&self.inner, request).with_response_headers(self.headers.clone())
    }
}

/// Answers 504 when the inner service's response head has not come within
/// a time (the `timeout` policy; the body is not bounded).
#[derive(Clone, Copy, Debug)]
pub struct TimeoutLayer {
    limit: Duration,
}

impl TimeoutLayer {
    /// A layer answering 504 after `limit`.
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Timeout {
            limit: self.limit,
            inner,
        }
    }
}

/// Made by [`TimeoutLayer`].
#[derive(Clone, Debug)]
pub struct Timeout<S> {
    limit: Duration,
    inner: S,
}

impl<S> Service<Request<Body>> for Timeout<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        call(&self.inner, request).with_timeout(self.limit)
    }
}
