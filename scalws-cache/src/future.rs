//! The response future of [`CacheService`](crate::CacheService): ready at
//! once for a hit, the inner service's own future for a pass-through, boxed
//! only where the cache has work to do after the origin answers.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Response, StatusCode};
use pin_project_lite::pin_project;
use scalws_core::Body;
use scalws_core::error::error_response;

use crate::status::{CacheStatus, mark};

type BoxFuture = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

pin_project! {
    /// The future of a [`CacheService`](crate::CacheService) response.
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Ready { response: Option<Response<Body>> },
        Inner { #[pin] future: F, status: CacheStatus },
        Boxed { future: BoxFuture },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn ready(response: Response<Body>) -> Self {
        Self {
            kind: Kind::Ready {
                response: Some(response),
            },
        }
    }

    /// The inner service's future; its response is marked with `status`.
    pub(crate) fn inner(future: F, status: CacheStatus) -> Self {
        Self {
            kind: Kind::Inner { future, status },
        }
    }

    pub(crate) fn boxed(future: impl Future<Output = Response<Body>> + Send + 'static) -> Self {
        Self {
            kind: Kind::Boxed {
                future: Box::pin(future),
            },
        }
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Ready { response } => Poll::Ready(Ok(response
                .take()
                .unwrap_or_else(|| error_response(StatusCode::INTERNAL_SERVER_ERROR)))),
            KindProj::Inner { future, status } => future
                .poll(cx)
                .map(|result| result.map(|response| mark(response, *status))),
            KindProj::Boxed { future } => future.as_mut().poll(cx).map(Ok),
        }
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
