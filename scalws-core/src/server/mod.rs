//! The server runtime: listeners, connections, limits, drain.
//!
//! [`Server::bind`] opens every listener first (so a bad address fails before
//! anything is served), then [`Server::serve`] runs them with one `Service`
//! until the shutdown future resolves, and drains.

mod activity;
mod connection;
mod edge;
mod h3;
mod io;
mod limits;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_util::task::TaskTracker;
use tower::Service;

pub use limits::Limits;

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
        let listeners = listeners
            .iter()
            .map(|spec| {
                let fail = |source| BindFailed {
                    name: spec.name.clone(),
                    address: spec.address,
                    source,
                };
                let socket = match spec.protocol {
                    ListenerProtocol::Http | ListenerProtocol::Https(_) => {
                        Socket::Tcp(bind_tcp(spec.address).map_err(fail)?)
                    }
                    ListenerProtocol::Http3(_) => {
                        Socket::Udp(std::net::UdpSocket::bind(spec.address).map_err(fail)?)
                    }
                };
                let local = match &socket {
                    Socket::Tcp(tcp) => tcp.local_addr(),
                    Socket::Udp(udp) => udp.local_addr(),
                }
                .map_err(fail)?;
                Ok(Bound {
                    spec: spec.clone(),
                    local,
                    socket,
                })
            })
            .collect::<Result<_, _>>()?;
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
        S: Service<Request<Body>, Response = Response<B>> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (phase_tx, phase_rx) = watch::channel(Phase::Serving);
        let connections = TaskTracker::new();
        let limits = Arc::new(self.limits);
        let mut acceptors = tokio::task::JoinSet::new();
        let h3_ports: Vec<u16> = self
            .listeners
            .iter()
            .filter(|b| matches!(b.spec.protocol, ListenerProtocol::Http3(_)))
            .map(|b| b.local.port())
            .collect();
        for bound in self.listeners {
            tracing::info!(
                listener = %bound.spec.name,
                address = %bound.local,
                protocol = bound.spec.protocol.as_str(),
                "listening"
            );
            match bound.socket {
                Socket::Tcp(socket) => {
                    // HTTPS answers advertise HTTP/3 when it listens on the same port.
                    let alt_svc = match bound.spec.protocol {
                        ListenerProtocol::Https(_) if h3_ports.contains(&bound.local.port()) => {
                            http::HeaderValue::try_from(format!(
                                "h3=\":{}\"; ma=86400",
                                bound.local.port()
                            ))
                            .ok()
                        }
                        _ => None,
                    };
                    acceptors.spawn(connection::accept_loop(connection::Acceptor {
                        name: bound.spec.name,
                        protocol: bound.spec.protocol,
                        socket,
                        local: bound.local,
                        permits: Arc::new(Semaphore::new(limits.max_connections)),
                        limits: limits.clone(),
                        service: service.clone(),
                        phase: phase_rx.clone(),
                        connections: connections.clone(),
                        alt_svc,
                    }));
                }
                Socket::Udp(socket) => {
                    let ListenerProtocol::Http3(certificates) = bound.spec.protocol else {
                        continue;
                    };
                    acceptors.spawn(h3::accept_loop(h3::Acceptor {
                        name: bound.spec.name,
                        certificates,
                        socket,
                        local: bound.local,
                        limits: limits.clone(),
                        service: service.clone(),
                        phase: phase_rx.clone(),
                        connections: connections.clone(),
                    }));
                }
            }
        }

        shutdown.await;
        tracing::info!(
            connections = connections.len(),
            timeout = ?limits.drain_timeout,
            "shutting down: draining"
        );
        // Stop accepting: dropping the listeners refuses new connections.
        acceptors.abort_all();
        while acceptors.join_next().await.is_some() {}
        let _ = phase_tx.send(Phase::Draining);
        connections.close();
        if tokio::time::timeout(limits.drain_timeout, connections.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                connections = connections.len(),
                "drain timeout reached; closing the remaining connections"
            );
            let _ = phase_tx.send(Phase::Closing);
            connections.wait().await;
        }
        tracing::info!("drained");
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
