//! The access log: one JSON line per request, written off the request path.
//!
//! - [`AccessLogLayer`] wraps a service (usually the [`Gateway`](crate::Gateway)):
//!   it notes the request's head, and the response's status, upstream
//!   ([`UpstreamAddress`](crate::upstream::UpstreamAddress)) and cache status
//!   ([`CacheStatus`](scalws_cache::CacheStatus)) from its extensions; it
//!   logs one [`AccessLogEntry`] when the response body ends, fails, or is
//!   dropped (the client went away), with the body bytes sent and the time
//!   since the request started.
//! - [`AccessLog`] is the handle entries go through: a bounded queue to one
//!   writer task. [`AccessLog::log`] never waits: when the queue is full the
//!   entry is dropped and counted ([`AccessLog::dropped`]). The writer
//!   formats what is queued into one buffer and writes it in one go, so lines
//!   appear as soon as the queue is momentarily empty.
//! - [`AccessLog::reopen`] reopens the file (log rotation);
//!   [`AccessLog::flush`] waits until everything logged so far is written.
//!
//! A line (keys always present, `null` when unknown):
//!
//! ```text
//! {"time":"2025-01-02T03:04:05.678Z","listener":"http","peer":"127.0.0.1:50432","method":"GET","host":"example.com","path":"/a?b=c","status":200,"bytes":5,"duration_ms":0.412,"upstream":"10.0.0.7:8080","cache":"miss"}
//! ```
//!
//! ```no_run
//! use scalws_core::{Limits, ListenerSpec, Server};
//! use scalws_proxy::Gateway;
//! use scalws_proxy::access_log::{AccessLog, AccessLogLayer, LogTarget};
//! use tower::Layer;
//!
//! # async fn run(gateway: Gateway) -> Result<(), Box<dyn std::error::Error>> {
//! let log = AccessLog::start(LogTarget::File("access.log".into()), AccessLog::DEFAULT_CAPACITY)?;
//! let service = AccessLogLayer::new(log.clone()).layer(gateway);
//! let server = Server::bind(&[ListenerSpec::http("http", "0.0.0.0:8080".parse()?)], Limits::default())?;
//! server.serve(service, async { let _ = tokio::signal::ctrl_c().await; }).await;
//! log.flush().await;
//! # Ok(()) }
//! ```

mod body;
mod entry;
mod handle;
mod layer;
mod pending;
mod writer;

pub use entry::AccessLogEntry;
pub use handle::{AccessLog, LogTarget};
pub use layer::{AccessLogLayer, AccessLogService, ResponseFuture};
