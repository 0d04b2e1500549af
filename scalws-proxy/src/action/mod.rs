//! What answers a routed request: the closed set of [`Action`]s, each also a
//! `tower::Service` of its own, and the embedder's own service as one more.
//!
//! - [`Respond`]: a fixed status, headers and body.
//! - [`Redirect`]: a redirect built from the request (Gateway API `RequestRedirect`).
//! - [`StaticFiles`]: files under a directory.
//! - [`Proxy`]: forward to an [`UpstreamPool`](crate::upstream::UpstreamPool),
//!   through a response cache when one is set.
//! - [`Backends`]: a weighted [`Split`] over proxies and fixed statuses.
//! - [`Action::Service`]: any service of the embedder's, boxed.

mod backends;
mod future;
mod proxy;
mod redirect;
mod respond;
#[cfg(feature = "static-files")]
mod static_files;

use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response};
use scalws_core::Body;

pub use backends::{Backend, Backends, Split};
pub use future::ActionFuture;
pub use proxy::Proxy;
pub use redirect::{NotARedirectStatus, Redirect};
pub(crate) use redirect::{redirect_response, request_host, routed_host_value, url};
pub use respond::Respond;
#[cfg(feature = "static-files")]
pub use static_files::{InvalidStaticRoot, StaticFiles, StaticOptions};

use crate::service::HttpService;

/// The action of a route. A closed set, so dispatch is a `match`, not a
/// vtable; only [`Action::Service`] is boxed.
#[derive(Clone)]
pub enum Action {
    /// A fixed response.
    Respond(Respond),
    /// Files under a directory (feature `static-files`).
    #[cfg(feature = "static-files")]
    Static(StaticFiles),
    /// Forward to an upstream pool.
    Proxy(Proxy),
    /// A weighted split between proxies and fixed statuses.
    Backends(Backends),
    /// A redirect.
    Redirect(Redirect),
    /// A service of the embedder's, boxed (see [`Action::service`]).
    Service(HttpService),
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Respond(respond) => f.debug_tuple("Respond").field(respond).finish(),
            #[cfg(feature = "static-files")]
            Action::Static(files) => f.debug_tuple("Static").field(files).finish(),
            Action::Proxy(proxy) => f.debug_tuple("Proxy").field(proxy).finish(),
            Action::Backends(backends) => f.debug_tuple("Backends").field(backends).finish(),
            Action::Redirect(redirect) => f.debug_tuple("Redirect").field(redirect).finish(),
            Action::Service(_) => f.write_str("Service"),
        }
    }
}

impl Action {
    /// An action that hands the request to `service`. Its errors become
    /// responses (413 for a request body past its limit, else 500).
    pub fn service<S>(service: S) -> Self
    where
        S: tower::Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
        S::Error: Into<scalws_core::BoxError>,
        S::Future: Send + 'static,
    {
        Action::Service(crate::service::boxed(service))
    }

    /// Answers a routed request.
    #[inline(always)]
    pub(crate) fn act(&self, parts: Parts, body: Body) -> ActionFuture {
        match self {
            Action::Respond(respond) => ActionFuture::ready(respond.response(&parts.method)),
            Action::Redirect(redirect) => ActionFuture::ready(redirect.response(&parts)),
            #[cfg(feature = "static-files")]
            Action::Static(files) => files.serve_routed(parts),
            Action::Proxy(proxy) => proxy.call_parts(parts, body),
            Action::Backends(backends) => backends.call_parts(parts, body),
            Action::Service(service) => call_boxed(service, Request::from_parts(parts, body)),
        }
    }
}

/// Calls a boxed service of the embedder's.
#[cold]
#[inline(never)]
pub(crate) fn call_boxed(service: &HttpService, request: Request<Body>) -> ActionFuture {
    service.call_ref(request)
}

/// Every action is a service: a gateway is not needed to use one.
impl tower::Service<Request<Body>> for Action {
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        let (parts, body) = request.into_parts();
        self.act(parts, body)
    }
}

/// `tower::Service` for an action type: `$answer` turns the request into an `ActionFuture`.
macro_rules! action_service {
    ($ty:ty, |$this:ident, $request:ident| $answer:expr) => {
        impl tower::Service<Request<Body>> for $ty {
            type Response = Response<Body>;
            type Error = std::convert::Infallible;
            type Future = ActionFuture;

            fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, $request: Request<Body>) -> ActionFuture {
                let $this = &*self;
                $answer
            }
        }
    };
}

action_service!(Redirect, |this, request| {
    let (parts, _) = request.into_parts();
    ActionFuture::ready(this.response(&parts))
});
action_service!(Proxy, |this, request| {
    let (parts, body) = request.into_parts();
    this.call_parts(parts, body)
});
action_service!(Backend, |this, request| {
    let (parts, body) = request.into_parts();
    match this {
        Backend::Proxy(proxy) => proxy.call_parts(parts, body),
        Backend::Status(status) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = *status;
            ActionFuture::ready(response)
        }
    }
});
