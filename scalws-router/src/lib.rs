//! Host and route tables for ScalWS: which application, and which of its routes,
//! a request belongs to.
//!
//! This crate chooses and never answers. It owns:
//!
//! - [`normalize_host`] and [`HostTable`]: the `Host`/`:authority` of a request, lower-cased
//!   and stripped of its port, looked up exact name first, then `*.suffix`, `**.suffix`
//!   and the `*` catch-all (SPEC section 3);
//! - [`normalize_path`]: percent-decoding of unreserved characters and removal of dot
//!   segments, refusing paths that climb above the root (SPEC section 4);
//! - [`RouteTable`]: `exact`, `prefix` and `pattern` routes with method, header and query
//!   conditions, ranked by the SPEC section 4 precedence, with a single longest-prefix
//!   lookup when every route is a plain prefix.
//!
//! Both tables are generic over the target `T` they hand back, are built once from
//! configuration and are immutable afterwards. Looking up an already-normal request
//! (exact host, clean path) allocates nothing.
//!
//! # Example
//!
//! ```
//! use http::{HeaderMap, Method};
//! use scalws_router::{
//!     HostPattern, HostTableBuilder, NoRoute, PathMatch, RouteSpec, RouteTableBuilder,
//!     normalize_host, normalize_path,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Applications by domain.
//! let mut hosts = HostTableBuilder::new();
//! hosts.insert(HostPattern::parse("example.com")?, "site", "site")?;
//! hosts.insert(HostPattern::parse("*.example.com")?, "tenants", "tenants")?;
//! let hosts = hosts.build();
//!
//! let host = normalize_host("A.Example.COM:8443")?;
//! assert_eq!(host, "a.example.com");
//! assert_eq!(hosts.get(&host), Some(&"tenants"));
//!
//! // Routes of one application.
//! let mut routes = RouteTableBuilder::new();
//! routes.route(RouteSpec {
//!     path: PathMatch::Prefix("/api".into()),
//!     methods: None,
//!     headers: vec![],
//!     query: vec![],
//!     target: "api",
//! })?;
//! routes.route(RouteSpec {
//!     path: PathMatch::Pattern("/users/{id}".into()),
//!     methods: Some(vec![Method::GET]),
//!     headers: vec![],
//!     query: vec![],
//!     target: "user",
//! })?;
//! let routes = routes.build();
//!
//! let path = normalize_path("/api/v1/../items")?;
//! let hit = routes.route(&Method::GET, &path, None, &HeaderMap::new())?;
//! assert_eq!(*hit.target, "api");
//!
//! let hit = routes.route(&Method::GET, "/users/42", None, &HeaderMap::new())?;
//! assert_eq!((*hit.target, hit.params.get("id")), ("user", Some("42")));
//!
//! let miss = routes.route(&Method::DELETE, "/users/42", None, &HeaderMap::new());
//! assert!(matches!(miss, Err(NoRoute::MethodNotAllowed { allow }) if allow == "GET"));
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod host;
mod path;
mod percent;
mod route;

pub use host::{
    DuplicateDomain, HostEntry, HostPattern, HostTable, HostTableBuilder, InvalidHost,
    InvalidHostPattern, normalize_host,
};
pub use path::{BadPath, normalize_path};
pub use route::{
    Conditions, Considered, InvalidRoute, NoRoute, Params, PathMatch, RouteMatch, RouteSpec,
    RouteTable, RouteTableBuilder, Verdict,
};
