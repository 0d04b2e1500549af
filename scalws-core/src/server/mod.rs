//! The server runtime: listeners, connections, limits, drain.
//!
//! [`Server::bind`] opens every listener first (so a bad address fails before
//! anything is served), then [`Server::serve`] runs them with one `Service`
//! until the shutdown future resolves, and drains. [`Server::start`] returns a
//! [`Running`] server instead, whose listeners can be changed while it serves
//! (configuration reloads) before it is shut down.

//!
//! The files, each depending only on those listed before it: `limits`
//! (what the server enforces), `listener` (a listener's specification,
//! the state its accept loop reads, connection permits, the phase),
//! `workers` (extra event loops), `bind` (opening sockets), `stats`, then what serves a connection
//! (`activity`, `io`, `bodiless`, `edge`, `tunnel`, `connection`, `h3`),
//! and `running` (the served listeners, reconfiguration, drain). This file
//! holds only [`Server`], which binds and then starts a [`Running`].

mod activity;
mod bind;
mod bodiless;
mod connection;
mod edge;
#[cfg(feature = "http3")]
mod h3;
mod io;
mod limits;
mod listener;
mod running;
mod stats;
mod streams;
mod tunnel;
mod websocket;
mod workers;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use tower::Service;

pub use bind::BindFailed;
pub use limits::Limits;
pub use listener::{ListenerProtocol, ListenerSpec};
pub use running::Running;
pub use stats::{ListenerStats, ServerStats};
pub(crate) use tunnel::TunnelHost;
pub use tunnel::{ClientUpgrade, spawn_tunnel};
pub use workers::{BLOCKING_THREADS_PER_WORKER, Workers, worker_runtime};

use crate::Body;
use crate::error::BoxError;
use bind::Bound;

/// Bound listeners, ready to serve.
pub struct Server {
    listeners: Vec<Bound>,
    limits: Limits,
    workers: Workers,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listeners", &self.local_addrs())
            .field("limits", &self.limits)
            .finish()
    }
}

impl Server {
    /// Binds every listener (TCP, `SO_REUSEADDR`, backlog 1024), to be
    /// served on the caller's runtime.
    pub fn bind(listeners: &[ListenerSpec], limits: Limits) -> Result<Self, BindFailed> {
        Self::bind_with(listeners, limits, Workers::none())
    }

    /// Binds every listener to be served by `workers` as well as by the
    /// caller's runtime: each TCP listener gets one socket per worker, all
    /// with `SO_REUSEPORT` (see [`Workers`]). The server owns the workers
    /// from here on and stops them when it is dropped or shut down.
    pub fn bind_with(
        listeners: &[ListenerSpec],
        limits: Limits,
        workers: Workers,
    ) -> Result<Self, BindFailed> {
        let count = workers.count();
        let listeners = listeners
            .iter()
            .map(|spec| bind::bind(spec, count))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            listeners,
            limits,
            workers,
        })
    }

    /// The address each listener is bound to (useful with port 0).
    pub fn local_addrs(&self) -> Vec<(Arc<str>, SocketAddr)> {
        self.listeners
            .iter()
            .map(|b| (b.spec.name.clone(), b.local))
            .collect()
    }

    /// Serves `service` on every listener until `shutdown` resolves, then stops
    /// accepting, lets requests in flight finish for up to `drain_timeout`, and returns.
    ///
    /// Each request gets a clone of `service`, asked `poll_ready` first with a
    /// waker that does nothing: a ready service is called as the request head
    /// comes in (on HTTP/2, within the connection's poll); one that is not is
    /// asked again with the request's own waker until it is. A panic in
    /// `poll_ready`, `call` or the future is answered 500.
    pub async fn serve<S, B>(self, service: S, shutdown: impl Future<Output = ()>)
    where
        S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let running = self.start(service);
        shutdown.await;
        running.shutdown().await;
    }

    /// Starts serving `service` on every listener and returns at once; the
    /// [`Running`] server can then be reconfigured and finally shut down.
    /// Requests reach `service` as [`serve`](Self::serve) describes.
    pub fn start<S, B>(self, service: S) -> Running<S>
    where
        S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let h3_ports = bind::h3_ports(self.listeners.iter().map(|b| (&b.spec, b.local)));
        let mut running = Running::new(service, self.limits, self.workers);
        for bound in self.listeners {
            running.launch(bound, &h3_ports);
        }
        running
    }
}
