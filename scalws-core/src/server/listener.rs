//! What a listener is: its specification (name, address, protocol), and
//! while it is served, the state its accept loop reads for each new
//! connection, the permit each connection holds, and the server's phase.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::Limits;
#[cfg(feature = "tls")]
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
    /// TLS on TCP; ALPN `h2` and `http/1.1` (feature `tls`).
    #[cfg(feature = "tls")]
    Https(TlsCertificates),
    /// HTTP/3 over QUIC, on UDP (feature `http3`).
    #[cfg(feature = "http3")]
    Http3(TlsCertificates),
}

impl ListenerProtocol {
    /// Whether it is HTTPS (TLS on TCP).
    pub(super) fn is_https(&self) -> bool {
        #[cfg(feature = "tls")]
        if let ListenerProtocol::Https(_) = self {
            return true;
        }
        false
    }

    /// Whether it listens on UDP (HTTP/3) rather than TCP.
    pub(super) fn is_udp(&self) -> bool {
        #[cfg(feature = "http3")]
        if let ListenerProtocol::Http3(_) = self {
            return true;
        }
        false
    }

    /// The certificates of a listener that speaks TLS (HTTPS or HTTP/3);
    /// `None` for plain HTTP.
    #[cfg(feature = "tls")]
    pub fn certificates(&self) -> Option<&TlsCertificates> {
        match self {
            ListenerProtocol::Http => None,
            ListenerProtocol::Https(certificates) => Some(certificates),
            #[cfg(feature = "http3")]
            ListenerProtocol::Http3(certificates) => Some(certificates),
        }
    }

    /// `"http"`, `"https"` or `"http3"`, as in the configuration.
    pub fn as_str(&self) -> &'static str {
        match self {
            ListenerProtocol::Http => "http",
            #[cfg(feature = "tls")]
            ListenerProtocol::Https(_) => "https",
            #[cfg(feature = "http3")]
            ListenerProtocol::Http3(_) => "http3",
        }
    }
}

/// Where the server is in its life; connections watch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Serving,
    /// Finish what is in flight, close idle connections, send GOAWAY.
    Draining,
    /// The drain timeout passed: close everything now.
    Closing,
}

/// What a listener kept across a reconfiguration may change: read by its
/// accept loop for every new connection.
pub(super) struct ListenerState {
    pub(super) name: Arc<str>,
    #[cfg(feature = "tls")]
    pub(super) protocol: ListenerProtocol,
    pub(super) limits: Arc<Limits>,
    /// `max_connections` for this listener.
    pub(super) permits: Arc<Semaphore>,
    /// `Alt-Svc` for every response, when HTTP/3 listens on the same port.
    pub(super) alt_svc: Option<http::HeaderValue>,
}

/// A connection's hold on its listener: the `max_connections` permit, and one
/// in the listener's count of open connections, both given back on drop.
pub(super) struct ConnectionPermit {
    _permit: OwnedSemaphorePermit,
    open: Arc<AtomicUsize>,
}

impl ConnectionPermit {
    pub(super) fn new(permit: OwnedSemaphorePermit, open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        Self {
            _permit: permit,
            open: open.clone(),
        }
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}
