//! # scalws-cache
//!
//! ScalWS's response cache: an RFC 9111 shared cache as a tower layer on
//! [moka](https://docs.rs/moka), with request coalescing, revalidation and purge.
//!
//! - [`Cache`]: the store (bounded by bytes), its counters ([`CacheStats`]) and
//!   purges (by URL, host, prefix). Build it once per application from
//!   [`CacheOptions`] and share it.
//! - [`CacheLayer`] / [`CacheService`]: wrap the service that asks the origin
//!   (the proxy). GET and HEAD are answered from the cache when RFC 9111
//!   allows; everything else passes through. Every response carries a
//!   [`CacheStatus`] in its extensions (hit, miss, stale, revalidated, bypass).
//!
//! What it does, in short (the phases are in `service.rs`):
//!
//! - **Stores** GET responses with a heuristically cacheable status (200, 203,
//!   204, 300, 301, 308, 404, 405, 410, 414; never 206 or 5xx), unless they say
//!   `no-store` or `private`, set a cookie, `Vary: *`, or answer a request with
//!   `Authorization` without `public`, `s-maxage` or `must-revalidate`.
//!   Bodies over `max_object` stream through uncollected; a body that fails is
//!   not stored.
//! - **Freshness** from `s-maxage`, `max-age`, `Expires` - `Date`, else
//!   `default_ttl` (zero: not stored). Hits carry `Age` (RFC 9111 4.2.3).
//! - **Revalidates** stale and `no-cache` responses with `If-None-Match` /
//!   `If-Modified-Since`; a 304 refreshes the stored headers. Honours
//!   `stale-while-revalidate` and `stale-if-error`, and the request's
//!   `no-cache`, `no-store`, `max-age`, `min-fresh`, `max-stale`, `only-if-cached`.
//! - **Coalesces** concurrent misses for a key into one origin request.
//! - **Vary**: one stored response per combination of the named request
//!   headers' values (normalised).
//!
//! ## The key, and cache poisoning
//!
//! The key is the layer's partition ([`Cache::layer_for`]; none for
//! [`Cache::layer`]) + scheme + host + path-and-query (+ the `Vary` headers):
//! routes of one application share the store but never entries. A header
//! that is not in the key cannot choose which stored response a request gets,
//! so a response that depends on such a header must name it in `Vary`;
//! otherwise it is stored and served to everyone as it is. (An origin that
//! reflects `X-Forwarded-Host` into its pages without `Vary: X-Forwarded-Host`
//! is trusting every client to send the same value.) The host is the one the
//! request was routed by (`scalws_core::OriginalHost` when a rewrite replaced
//! `Host`), and a request whose host is not a plain name or IP
//! literal is not cached. Pages that are personal must say `private` (or
//! `no-store`): `/account/x.css` with `Cache-Control: private` is not stored
//! whatever its extension.
//!
//! ## Example
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response};
//! use http_body_util::BodyExt;
//! use scalws_cache::{Cache, CacheOptions};
//! use scalws_core::Body;
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let origin = tower::service_fn(|_request: Request<Body>| async {
//!     let mut response = Response::new(Body::from("hello\n"));
//!     response
//!         .headers_mut()
//!         .insert("cache-control", "max-age=60".parse().unwrap());
//!     Ok::<_, Infallible>(response)
//! });
//! let cache = Cache::new(CacheOptions::default());
//! let service = cache.layer().layer(origin);
//!
//! for _ in 0..2 {
//!     let request = Request::get("http://example.com/hello").body(Body::empty()).unwrap();
//!     let response = service.clone().oneshot(request).await.unwrap();
//!     // The body is stored as it streams to the client.
//!     let body = response.into_body().collect().await.unwrap().to_bytes();
//!     assert_eq!(body, "hello\n");
//! }
//! let stats = cache.stats();
//! assert_eq!((stats.misses, stats.hits, stats.entries), (1, 1, 1));
//! assert_eq!(cache.purge_url("http", "example.com", "/hello"), 1);
//! # }
//! ```
#![forbid(unsafe_code)]

mod body;
mod cache;
mod cache_control;
mod conditional;
mod entry;
mod fetch;
mod future;
mod key;
mod layer;
mod options;
mod policy;
mod purge;
mod revalidate;
mod service;
mod stats;
mod status;
mod store;
mod vary;

pub use cache::Cache;
pub use future::ResponseFuture;
pub use layer::CacheLayer;
pub use options::CacheOptions;
pub use service::CacheService;
pub use stats::CacheStats;
pub use status::CacheStatus;
