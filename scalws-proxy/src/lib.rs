//! # scalws-proxy
//!
//! What answers a request, and the [`Gateway`] that composes every stage into
//! one `tower::Service`.
//!
//! - [`Respond`]: a fixed status, headers and body.
//! - [`StaticFiles`]: files under a directory, with conditional requests,
//!   ranges, and small files served from memory.
//! - [`Proxy`]: forwards to an [`upstream::UpstreamPool`] (balancing, active
//!   and passive health, retries, timeouts, pooled HTTP/1.1, HTTP/2 and TLS
//!   connections), with header hygiene and upgrades.
//! - [`Backends`]: a weighted split between proxies and fixed statuses.
//! - [`Redirect`]: answers with a redirect (Gateway API `RequestRedirect`).
//! - Route policies around an action, set on a [`Route`]: [`Rewrite`] (path
//!   and host), [`HeaderModifier`] for request and response headers, and
//!   `https_redirect` (also per [`Application`]).
//! - [`Gateway`]: listener -> host -> path -> route -> [`Action`]; see
//!   `gateway.rs` for the order.
//!
//! ```
//! use http::{Method, StatusCode};
//! use scalws_proxy::{Action, Application, Gateway, Respond};
//! use scalws_router::{PathMatch, RouteSpec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hello = Respond::new(StatusCode::OK, "hello\n");
//! let site = Application::builder("site")
//!     .domain("example.com")?
//!     .route(RouteSpec {
//!         path: PathMatch::Prefix("/".into()),
//!         methods: None,
//!         headers: vec![],
//!         query: vec![],
//!         target: Action::Respond(hello),
//!     })?;
//! let gateway = Gateway::builder().listener("http").application(site).build()?;
//! # let _ = (gateway, Method::GET);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

pub mod access_log;
mod action;
mod application;
mod backends;
mod gateway;
pub mod metrics;
mod policy;
mod proxy;
mod respond;
mod static_files;
pub mod upstream;

pub use action::{Action, ActionFuture, Route};
pub use application::{Application, ApplicationBuilder};
pub use backends::{Backend, Backends};
pub use gateway::{Gateway, GatewayBuilder, InvalidGateway, SharedGateway};
pub use policy::{
    HeaderModifier, InvalidHostName, InvalidPathModifier, NotARedirectStatus, PathModifier,
    Redirect, Rewrite,
};
pub use proxy::{Origin, Proxy};
pub use respond::Respond;
pub use static_files::{InvalidStaticRoot, StaticFiles, StaticOptions};
