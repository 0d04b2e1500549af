//! # scalws-core
//!
//! The vocabulary every ScalWS crate shares, and the server runtime.
//!
//! - [`Body`]: the body type of requests and responses in a ScalWS stack.
//! - [`ConnInfo`]: the listener, scheme and peer of a request, found in its extensions.
//! - [`error`]: the error type at service boundaries, and the one function that
//!   turns a failure into a short plain-text response.
//! - [`server`]: binds listeners and serves any `tower::Service<Request<Body>>`
//!   over HTTP/1.1 and HTTP/2 (h2c by prior knowledge, or over TLS by ALPN)
//!   and HTTP/3 (QUIC), enforcing [`Limits`]:
//!   head size and count (431), request body size (413), header read and
//!   keep-alive timeouts, connection count, HTTP/2 streams; a panicking request
//!   gets 500; shutdown drains.
//!
//! - [`RequestLimitsLayer`]: the request limits as a layer, for a stack
//!   mounted in a server that is not ScalWS's own.
//! - [`clock`]: a coarse monotonic clock in milliseconds (the kernel's tick),
//!   for timeouts read on every request.
//! - `tls` (feature `tls`): listener certificates loaded from PEM files,
//!   chosen by SNI, reloadable in place.
//!
//! Features: `http3` (on by default: HTTP/3 listeners, with quinn) and
//! `tls` (HTTPS listeners, with rustls), which `http3` turns on. Without
//! them the server speaks plain HTTP/1.1 and h2c.
//!
//! Core knows nothing of routing, caching or proxying.
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response};
//! use scalws_core::{Body, Limits, ListenerSpec, Server};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hello = tower::service_fn(|_req: Request<Body>| async {
//!     Ok::<_, Infallible>(Response::new(Body::from("hello\n")))
//! });
//! let listeners = [ListenerSpec::http("http", "127.0.0.1:0".parse()?)];
//! let server = Server::bind(&listeners, Limits::default())?;
//! println!("serving on {:?}", server.local_addrs());
//! // `serve(service, shutdown)` serves until the shutdown future resolves;
//! // `start` returns a running server to reconfigure and shut down.
//! let running = server.start(hello);
//! running.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! To serve on several cores, bind with [`Workers`]:
//! `Server::bind_with(&listeners, limits, Workers::start(n - 1)?)` from a
//! current-thread runtime adds `n - 1` event loops, each accepting on its own
//! `SO_REUSEPORT` socket of every TCP listener.
#![forbid(unsafe_code)]

mod body;
pub mod clock;
pub mod coalesce;
mod conn;
pub mod error;
mod limit;
pub mod server;
#[cfg(feature = "tls")]
pub mod tls;

pub use body::Body;
pub use conn::{ConnInfo, Observed, OriginalHost, Scheme};
pub use error::BoxError;
pub use limit::{RequestLimits, RequestLimitsLayer};
pub use server::{
    BindFailed, ClientUpgrade, Limits, ListenerProtocol, ListenerSpec, ListenerStats, Running,
    Server, ServerStats, Workers, spawn_tunnel,
};
