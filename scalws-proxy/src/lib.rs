//! # scalws-proxy
//!
//! Every stage of a ScalWS request path as a tower `Service` or `Layer`, and
//! the [`Gateway`] that composes them into one service (in the order
//! `gateway/stack.rs` lists). Modules follow the request:
//!
//! - [`access_log`], [`metrics`]: what observes ([`AccessLogLayer`](access_log::AccessLogLayer),
//!   [`MetricsLayer`](metrics::MetricsLayer)).
//! - [`Gateway`], [`SharedGateway`] (the reload slot), [`HostRouter`]
//!   (host selection over services of your own).
//! - [`Application`], [`RouteRouter`] (route selection over services of
//!   your own).
//! - [`Route`] and its policies, each a layer too: [`Rewrite`] and
//!   [`RequestHeaders`] (as [`PolicyLayer`]s), [`HttpsRedirect`],
//!   [`ResponseHeadersLayer`], [`TimeoutLayer`].
//! - Actions, each a service: [`Respond`], [`Redirect`], [`StaticFiles`],
//!   [`Proxy`], [`Backends`] (a weighted [`Split`]), and
//!   [`Action::Service`] for a service of yours.
//! - [`upstream::UpstreamPool`]: a balanced, health-checked client, a
//!   `Service<Request<Body>>` of its own.
//!
//! Cargo features, all on by default: `tls` (https upstreams, the 421
//! check), `cache` (the response cache in front of a [`Proxy`]) and
//! `static-files` ([`StaticFiles`]). Without them the crate routes and
//! proxies over plain HTTP and builds none of rustls or moka.
//!
//! The embedder's own layers go around everything (wrap the gateway),
//! around one application ([`ApplicationBuilder::layer`]), around one route
//! ([`Route::layer`]) and around the upstream call
//! ([`Proxy::upstream_layer`]).
//!
//! ```
//! use http::{Method, Request, StatusCode, header};
//! use scalws_core::Body;
//! use scalws_proxy::{Action, Application, Gateway, Respond};
//! use scalws_router::RouteSpec;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hello = Respond::new(StatusCode::OK, "hello\n");
//! let site = Application::builder("site")
//!     .domain("example.com")?
//!     .route(RouteSpec::prefix("/", Action::Respond(hello)).methods([Method::GET]))?;
//! let gateway = Gateway::builder().listener("http").application(site).build()?;
//!
//! let request = Request::get("/").header(header::HOST, "example.com").body(Body::empty())?;
//! let response = gateway.oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod action;
mod application;
mod gateway;
mod observe;
mod route;
mod service;
pub mod upstream;

pub use observe::{access_log, metrics};

pub use action::{
    Action, ActionFuture, Backend, Backends, NotARedirectStatus, Proxy, Redirect, Respond, Split,
};
#[cfg(feature = "static-files")]
pub use action::{InvalidStaticRoot, StaticFiles, StaticOptions};
pub use application::{
    Application, ApplicationBuilder, NoRouteFor, RouteRouter, RouteRouterBuilder,
};
pub use gateway::{
    ClaimedTwice, Explanation, Gateway, GatewayBuilder, HostRouter, HostRouterBuilder,
    InvalidGateway, InvalidHostRouter, Outcome, SharedGateway,
};
pub use route::{
    HeaderModifier, HttpsRedirect, InvalidHostName, InvalidPathModifier, PathModifier, PolicyLayer,
    PolicyService, RequestHeaders, RequestPolicy, ResponseHeaders, ResponseHeadersLayer, Rewrite,
    Route, Timeout, TimeoutLayer,
};
pub use service::{HttpService, boxed};
