//! The server runtime: listeners, connections, limits, drain.
//!
//! [`Server::bind`] opens every listener first (so a bad address fails before
//! anything is served), then [`Server::serve`] runs them with one `Service`
//! until the shutdown future resolves, and drains. [`Server::start`] returns a
//! [`Running`] server instead, whose listeners can be changed while it serves
//! (configuration reloads) before it is shut down.

mod activity;
mod bodiless;
mod connection;
mod edge;
#[cfg(feature = "http3")]
mod h3;
mod io;
mod limits;
mod running;
mod tunnel;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;
use tower::Service;

pub use limits::Limits;
pub use running::{ListenerStats, Running, ServerStats};
pub(crate) use tunnel::TunnelHost;
pub use tunnel::spawn_tunnel;

use crate::Body;
use crate::error::BoxError;
use crate::tls::TlsCertificates;

/// A listener to open: its name (as requests will see it in `ConnInfo`),
/// address and protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Unique name; the router scopes applications by it.
    pub name: Arc<str>,
    /// Address to bind (TCP, or UDP for HTTP/3).
    pub address: SocketAddr,
    /// What the listener speaks.
    pub protocol: ListenerProtocol,
}

impl ListenerSpec {
    /// A plain-HTTP listener (HTTP/1.1 and h2c).
    pub fn http(name: impl Into<Arc<str>>, address: SocketAddr) -> Self {
        Self {
            name: name.into(),
            address,
            protocol: ListenerProtocol::Http,
        }
    }
}

/// What a listener speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenerProtocol {
    /// HTTP/1.1 and HTTP/2 by prior knowledge (h2c), on TCP.
    Http,
    /// TLS on TCP; ALPN `h2` and `http/1.1`.
    Https(TlsCertificates),
    /// HTTP/3 over QUIC, on UDP.
    Http3(TlsCertificates),
}

/// Opening a listener failed.
#[derive(Debug, thiserror::Error)]
#[error("listener \"{name}\": cannot bind {address}: {source}")]
pub struct BindFailed {
    /// The listener's name.
    pub name: Arc<str>,
    /// The address it wanted.
    pub address: SocketAddr,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

struct Bound {
    spec: ListenerSpec,
    local: SocketAddr,
    socket: Socket,
}

enum Socket {
    Tcp(TcpListener),
    #[cfg(feature = "http3")]
    Udp(std::net::UdpSocket),
}

/// Bound listeners, ready to serve.
pub struct Server {
    listeners: Vec<Bound>,
    limits: Limits,
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
    /// Binds every listener (TCP, `SO_REUSEADDR`, backlog 1024). Must run inside a tokio runtime.
    pub fn bind(listeners: &[ListenerSpec], limits: Limits) -> Result<Self, BindFailed> {
        let listeners = running::bind_all(listeners)?;
        Ok(Self { listeners, limits })
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
    pub fn start<S, B>(self, service: S) -> Running<S>
    where
        S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut running = Running {
            service,
            retired: Vec::new(),
            connections: TaskTracker::new(),
            limits: Arc::new(self.limits),
            slots: Vec::new(),
            stats: ServerStats::default(),
        };
        let h3_ports = running::h3_ports(self.listeners.iter().map(|b| (&b.spec, b.local)));
        for bound in self.listeners {
            running.launch(bound, &h3_ports);
        }
        running.publish_stats();
        running
    }
}

impl ListenerProtocol {
    /// `"http"`, `"https"` or `"http3"`, as in the configuration.
    pub fn as_str(&self) -> &'static str {
        match self {
            ListenerProtocol::Http => "http",
            ListenerProtocol::Https(_) => "https",
            ListenerProtocol::Http3(_) => "http3",
        }
    }
}

/// Where the server is in its life; connections watch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Serving,
    /// Finish what is in flight, close idle connections, send GOAWAY.
    Draining,
    /// The drain timeout passed: close everything now.
    Closing,
}

fn bind_tcp(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if address.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}
