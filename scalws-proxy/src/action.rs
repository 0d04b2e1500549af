//! What a route leads to: the closed set of actions, dispatched statically,
//! and the route's own policy (a timeout).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::request::Parts;
use http::{Request, Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;
use scalws_router::normalize_path;

use crate::{Backends, Proxy, Respond, StaticFiles};

/// The action of a route. A closed set, so dispatch is a `match`, not a vtable.
#[derive(Clone, Debug)]
pub enum Action {
    /// A fixed response.
    Respond(Respond),
    /// Files under a directory.
    Static(StaticFiles),
    /// Forward to an upstream pool.
    Proxy(Proxy),
    /// A weighted split between proxies and fixed statuses.
    Backends(Backends),
}

/// A route's target: its action and the policies around it.
#[derive(Clone, Debug)]
pub struct Route {
    action: Action,
    timeout: Option<Duration>,
}

impl Route {
    /// A route to `action` with no policy.
    pub fn new(action: Action) -> Self {
        Self {
            action,
            timeout: None,
        }
    }

    /// Answers 504 when the response head has not come within `timeout`.
    /// `Duration::ZERO` means no timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// The action.
    pub fn action(&self) -> &Action {
        &self.action
    }

    /// Runs the route for a routed request.
    pub(crate) fn call(&self, parts: Parts, body: Body) -> ActionFuture {
        let future = match &self.action {
            Action::Respond(respond) => {
                return ActionFuture::ready(respond.response(&parts.method));
            }
            Action::Static(files) => {
                let files = files.clone();
                ActionFuture::boxed(async move {
                    // Normalised again rather than copied out: the gateway already
                    // accepted this path, so this cannot fail.
                    match normalize_path(parts.uri.path()) {
                        Ok(path) => files.serve(&parts.method, &path, &parts.headers).await,
                        Err(_) => error_response(StatusCode::BAD_REQUEST),
                    }
                })
            }
            Action::Proxy(proxy) => {
                let proxy = proxy.clone();
                ActionFuture::boxed(
                    async move { proxy.forward(Request::from_parts(parts, body)).await },
                )
            }
            Action::Backends(backends) => {
                let backends = backends.clone();
                ActionFuture::boxed(
                    async move { backends.call(Request::from_parts(parts, body)).await },
                )
            }
        };
        match self.timeout {
            None => future,
            Some(limit) => with_timeout(future, limit),
        }
    }
}

impl From<Action> for Route {
    fn from(action: Action) -> Self {
        Route::new(action)
    }
}

#[cold]
#[inline(never)]
fn with_timeout(future: ActionFuture, limit: Duration) -> ActionFuture {
    ActionFuture::boxed(async move {
        match tokio::time::timeout(limit, future).await {
            Ok(Ok(response)) => response,
            Ok(Err(never)) => match never {},
            Err(_elapsed) => error_response(StatusCode::GATEWAY_TIMEOUT),
        }
    })
}

/// The future of an action: ready at once for `respond` and errors, boxed for the rest.
pub struct ActionFuture {
    kind: FutureKind,
}

enum FutureKind {
    Ready(Option<Response<Body>>),
    Boxed(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

impl ActionFuture {
    pub(crate) fn ready(response: Response<Body>) -> Self {
        Self {
            kind: FutureKind::Ready(Some(response)),
        }
    }

    pub(crate) fn boxed(future: impl Future<Output = Response<Body>> + Send + 'static) -> Self {
        Self {
            kind: FutureKind::Boxed(Box::pin(future)),
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn error(status: StatusCode) -> Self {
        Self::ready(error_response(status))
    }
}

impl Future for ActionFuture {
    type Output = Result<Response<Body>, std::convert::Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().kind {
            FutureKind::Ready(response) => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => Poll::Ready(Ok(error_response(StatusCode::INTERNAL_SERVER_ERROR))),
            },
            FutureKind::Boxed(future) => future.as_mut().poll(cx).map(Ok),
        }
    }
}
