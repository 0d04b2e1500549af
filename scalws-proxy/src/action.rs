//! What a route leads to: the closed set of actions, dispatched statically.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;

use crate::{Respond, StaticFiles};

/// The action of a route. A closed set, so dispatch is a `match`, not a vtable.
#[derive(Clone)]
pub enum Action {
    /// A fixed response.
    Respond(Respond),
    /// Files under a directory.
    Static(StaticFiles),
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Respond(r) => f.debug_tuple("Respond").field(r).finish(),
            Action::Static(_) => f.write_str("Static"),
        }
    }
}

impl Action {
    /// Runs the action for a routed request; `path` is the normalised path.
    pub(crate) fn call(&self, parts: &Parts, path: &str) -> ActionFuture {
        match self {
            Action::Respond(respond) => ActionFuture::ready(respond.response(&parts.method)),
            Action::Static(files) => {
                let files = files.clone();
                let method = parts.method.clone();
                let headers = parts.headers.clone();
                let path = path.to_owned();
                ActionFuture::boxed(async move { files.serve(&method, &path, &headers).await })
            }
        }
    }
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
