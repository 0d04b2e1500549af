//! Route selection: the path normalised, then the route table; as a
//! function the gateway calls inline, and as [`RouteRouter`], a service over
//! any services of the embedder's.

use std::convert::Infallible;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, header};
use scalws_core::Body;
use scalws_core::error::error_response;
use scalws_router::{
    InvalidRoute, NoRoute, RouteSpec, RouteTable, RouteTableBuilder, normalize_path,
};
use tower::Service;

use crate::action::ActionFuture;

/// Why a request has no route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoRouteFor {
    /// The path climbs above the root: 400.
    BadPath,
    /// No route matches: 404.
    NotFound,
    /// Routes match all but the method: 405 with this `Allow`.
    MethodNotAllowed(HeaderValue),
}

impl NoRouteFor {
    /// The status the request gets.
    pub fn status(&self) -> StatusCode {
        match self {
            NoRouteFor::BadPath => StatusCode::BAD_REQUEST,
            NoRouteFor::NotFound => StatusCode::NOT_FOUND,
            NoRouteFor::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
        }
    }

    /// The answer: a short plain-text response, with `Allow` for 405.
    #[cold]
    #[inline(never)]
    pub fn into_response(self) -> Response<Body> {
        let mut response = error_response(self.status());
        if let NoRouteFor::MethodNotAllowed(allow) = self {
            response.headers_mut().insert(header::ALLOW, allow);
        }
        response
    }
}

/// The route `parts` takes in `routes`, its path parameters put in the
/// request's extensions; or why there is none.
#[inline(always)]
pub(crate) fn select_route<'a, T>(
    routes: &'a RouteTable<T>,
    parts: &mut Parts,
) -> Result<&'a T, NoRouteFor> {
    let Ok(path) = normalize_path(parts.uri.path()) else {
        return Err(NoRouteFor::BadPath);
    };
    match routes.route(&parts.method, &path, parts.uri.query(), &parts.headers) {
        Ok(matched) => {
            if !matched.params.is_empty() {
                parts.extensions.insert(matched.params);
            }
            Ok(matched.target)
        }
        Err(NoRoute::NotFound) => Err(NoRouteFor::NotFound),
        Err(NoRoute::MethodNotAllowed { allow }) => Err(NoRouteFor::MethodNotAllowed(allow)),
    }
}

/// Route selection in front of services of your own: `select` picks the
/// route (the SPEC's precedence: exact, longest prefix, pattern; then
/// method, headers, query), then the route's service answers. No route:
/// 404; only the method wrong: 405 with `Allow`; a path climbing above the
/// root: 400. Pattern parameters are in the request's
/// [`Params`](scalws_router::Params) extension.
///
/// ```
/// use http::{Request, StatusCode};
/// use scalws_core::Body;
/// use scalws_proxy::{RouteRouter, Respond};
/// use scalws_router::RouteSpec;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let router = RouteRouter::builder()
///     .route(RouteSpec::prefix("/api", Respond::new(StatusCode::OK, "api")))?
///     .build();
/// let response = router.oneshot(Request::get("/api/x").body(Body::empty())?).await?;
/// assert_eq!(response.status(), StatusCode::OK);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RouteRouter<S> {
    routes: std::sync::Arc<RouteTable<S>>,
}

impl<S> Clone for RouteRouter<S> {
    fn clone(&self) -> Self {
        Self {
            routes: self.routes.clone(),
        }
    }
}

/// Collects a [`RouteRouter`]'s routes.
#[derive(Debug)]
pub struct RouteRouterBuilder<S> {
    routes: RouteTableBuilder<S>,
}

impl<S> RouteRouter<S> {
    /// Starts a router.
    pub fn builder() -> RouteRouterBuilder<S> {
        RouteRouterBuilder {
            routes: RouteTableBuilder::new(),
        }
    }

    /// The service `parts` is for, or why there is none (see the type's
    /// documentation). Puts the path parameters in `parts`.
    pub fn select(&self, parts: &mut Parts) -> Result<&S, NoRouteFor> {
        select_route(&self.routes, parts)
    }
}

impl<S> RouteRouterBuilder<S> {
    /// Adds a route; refused like [`RouteTableBuilder::route`] refuses.
    pub fn route(mut self, route: RouteSpec<S>) -> Result<Self, InvalidRoute> {
        self.routes.route(route)?;
        Ok(self)
    }

    /// The router.
    pub fn build(self) -> RouteRouter<S> {
        RouteRouter {
            routes: std::sync::Arc::new(self.routes.build()),
        }
    }
}

impl<S> Service<Request<Body>> for RouteRouter<S>
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
        let (mut parts, body) = request.into_parts();
        match self.select(&mut parts) {
            Ok(service) => ActionFuture::oneshot(service.clone(), Request::from_parts(parts, body)),
            Err(refusal) => ActionFuture::ready(refusal.into_response()),
        }
    }
}
