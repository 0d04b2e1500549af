//! Open connections per listener, readable while the server runs.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A snapshot of one listener, for metrics.
#[derive(Clone, Debug)]
pub struct ListenerStats {
    /// The listener's name.
    pub name: Arc<str>,
    /// `"http"`, `"https"` or `"http3"`.
    pub protocol: &'static str,
    /// The address it is bound to.
    pub address: SocketAddr,
    /// Connections open now (for HTTP/3, QUIC connections).
    pub open_connections: usize,
}

/// The listeners of a running server, readable from anywhere (an admin
/// endpoint) while the server runs; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    listeners: Arc<Mutex<Vec<Published>>>,
}

/// A listener as [`ServerStats`] shows it: name, protocol, address, open count.
pub(super) type Published = (Arc<str>, &'static str, SocketAddr, Arc<AtomicUsize>);

impl ServerStats {
    /// Every listener now served, in configuration order.
    pub fn listeners(&self) -> Vec<ListenerStats> {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        listeners
            .iter()
            .map(|(name, protocol, address, open)| ListenerStats {
                name: name.clone(),
                protocol,
                address: *address,
                open_connections: open.load(Ordering::Relaxed),
            })
            .collect()
    }
}

impl ServerStats {
    /// Replaces what is shown with the listeners now served.
    pub(super) fn publish(&self, listeners: Vec<Published>) {
        *self
            .listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = listeners;
    }
}
