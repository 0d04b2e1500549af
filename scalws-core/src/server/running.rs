//! A server that is serving: its listeners can be added, removed and changed
//! in place (for configuration reloads), and it drains on shutdown.
//!
//! A listener that stays at the same address keeps its socket: the accept
//! loop reads its name, protocol and limits from a shared [`ListenerState`]
//! that a reconfiguration swaps, so no connection is refused while a reload
//! happens. Connections already open keep what they started with.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tower::Service;

#[cfg(feature = "http3")]
use super::h3;
use super::{
    BindFailed, Bound, Limits, ListenerProtocol, ListenerSpec, Phase, Socket, bind_tcp, connection,
};
use crate::Body;
use crate::error::BoxError;

/// What a listener kept across a reconfiguration may change: read by its
/// accept loop for every new connection.
pub(super) struct ListenerState {
    pub(super) name: Arc<str>,
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

/// One listener being served.
struct Slot {
    spec: ListenerSpec,
    local: SocketAddr,
    state: Arc<ArcSwap<ListenerState>>,
    open: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
    /// What this listener's connections watch: it drains on its own when a
    /// reconfiguration removes it, and with the others on shutdown.
    phase: watch::Sender<Phase>,
}

impl Slot {
    fn is_udp(&self) -> bool {
        matches!(self.spec.protocol, ListenerProtocol::Http3(_))
    }
}

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
type Published = (Arc<str>, &'static str, SocketAddr, Arc<AtomicUsize>);

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

/// A server started by [`Server::start`](super::Server::start).
pub struct Running<S> {
    pub(super) service: S,
    /// The drain phases of listeners removed by reconfigurations whose
    /// connections may still be open: shutdown closes them too.
    pub(super) retired: Vec<Arc<watch::Sender<Phase>>>,
    pub(super) connections: TaskTracker,
    pub(super) limits: Arc<Limits>,
    pub(super) slots: Vec<SlotHandle>,
    pub(super) stats: ServerStats,
}

/// Keeps [`Slot`] private to this file.
pub(super) struct SlotHandle(Slot);

impl<S> Running<S> {
    /// The address each listener is bound to, by name.
    pub fn local_addrs(&self) -> Vec<(Arc<str>, SocketAddr)> {
        self.slots
            .iter()
            .map(|SlotHandle(slot)| (slot.spec.name.clone(), slot.local))
            .collect()
    }

    /// Open connections per listener, readable while the server runs.
    pub fn stats(&self) -> ServerStats {
        self.stats.clone()
    }
}

impl<S> std::fmt::Debug for Running<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("listeners", &self.local_addrs())
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

impl<S, B> Running<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    /// Makes the listeners those of `listeners`, with `limits` for new
    /// connections. All or nothing: every new address is bound first, and if
    /// one cannot be, nothing changes and the error is returned.
    ///
    /// - A listener at an address already served (same transport) keeps its
    ///   socket: new connections see its new name, protocol, limits and (for
    ///   HTTPS) certificates. QUIC's endpoint keeps the certificate store it
    ///   was opened with, so an HTTP/3 listener's new certificates are poured
    ///   into that store.
    /// - A listener no longer listed is closed before this returns; its open
    ///   connections finish what is in flight and close within `drain_timeout`.
    /// - A new listener is bound and served.
    ///
    /// `max_connections` applies per listener generation: after a change of
    /// limits, connections accepted before it count against the old figure.
    pub async fn reconfigure(
        &mut self,
        listeners: &[ListenerSpec],
        limits: super::Limits,
    ) -> Result<(), BindFailed> {
        let kept = |spec: &ListenerSpec| {
            let udp = matches!(spec.protocol, ListenerProtocol::Http3(_));
            self.slots.iter().position(|SlotHandle(slot)| {
                slot.spec.address == spec.address && slot.is_udp() == udp
            })
        };
        // Bind every new address before touching anything.
        let mut fresh = Vec::new();
        for spec in listeners {
            if kept(spec).is_none() {
                fresh.push(bind(spec)?);
            }
        }
        let limits_changed = *self.limits != limits;
        if limits_changed {
            self.limits = Arc::new(limits);
        }
        let all: Vec<(&ListenerSpec, SocketAddr)> = listeners
            .iter()
            .map(|spec| {
                let local = kept(spec).map_or_else(
                    || {
                        fresh
                            .iter()
                            .find(|b| b.spec.address == spec.address && b.spec == *spec)
                            .map_or(spec.address, |b| b.local)
                    },
                    |i| self.slots[i].0.local,
                );
                (spec, local)
            })
            .collect();
        let h3_ports = h3_ports(all.into_iter());

        let mut slots = std::mem::take(&mut self.slots);
        let mut next = Vec::with_capacity(listeners.len());
        for spec in listeners {
            let udp = matches!(spec.protocol, ListenerProtocol::Http3(_));
            let position = slots.iter().position(|SlotHandle(slot)| {
                slot.spec.address == spec.address && slot.is_udp() == udp
            });
            if let Some(i) = position {
                let SlotHandle(mut slot) = slots.remove(i);
                self.update(&mut slot, spec, &h3_ports, limits_changed);
                next.push(SlotHandle(slot));
            } else if let Some(i) = fresh.iter().position(|b| b.spec == *spec) {
                let bound = fresh.remove(i);
                next.push(SlotHandle(self.spawn(bound, &h3_ports)));
            }
        }
        let mut removed = Vec::with_capacity(slots.len());
        for SlotHandle(gone) in slots {
            tracing::info!(listener = %gone.spec.name, address = %gone.local, "listener removed: draining its connections");
            gone.accept.abort();
            removed.push(gone);
        }
        self.slots = next;
        self.publish_stats();
        let drain_timeout = self.limits.drain_timeout;
        self.retired.retain(|phase| phase.receiver_count() > 0);
        for gone in removed {
            // Once its accept loop has ended, the listening socket is closed:
            // when this returns, the address refuses connections.
            let _ = gone.accept.await;
            // Its connections finish what is in flight and close (GOAWAY, idle
            // keep-alives closed), as on shutdown, within drain_timeout.
            let phase = Arc::new(gone.phase);
            self.retired.push(phase.clone());
            tokio::spawn(async move {
                let _ = phase.send(Phase::Draining);
                tokio::time::sleep(drain_timeout).await;
                let _ = phase.send(Phase::Closing);
            });
        }
        Ok(())
    }

    /// Stops accepting, lets requests in flight finish for up to
    /// `drain_timeout` (HTTP/2 and HTTP/3 get GOAWAY, idle HTTP/1.1
    /// keep-alives are closed), then closes what remains.
    pub async fn shutdown(mut self) {
        let limits = self.limits.clone();
        tracing::info!(
            connections = self.connections.len(),
            timeout = ?limits.drain_timeout,
            "shutting down: draining"
        );
        // Stop accepting: dropping the listeners refuses new connections.
        let slots: Vec<Slot> = self.slots.drain(..).map(|SlotHandle(slot)| slot).collect();
        for slot in &slots {
            slot.accept.abort();
        }
        for slot in &slots {
            let _ = slot.phase.send(Phase::Draining);
        }
        for phase in &self.retired {
            // Never back from Closing to Draining.
            phase.send_if_modified(|now| {
                let drain = *now == Phase::Serving;
                if drain {
                    *now = Phase::Draining;
                }
                drain
            });
        }
        self.connections.close();
        if tokio::time::timeout(limits.drain_timeout, self.connections.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                connections = self.connections.len(),
                "drain timeout reached; closing the remaining connections"
            );
            for slot in &slots {
                let _ = slot.phase.send(Phase::Closing);
            }
            for phase in &self.retired {
                let _ = phase.send(Phase::Closing);
            }
            self.connections.wait().await;
        }
        tracing::info!("drained");
    }

    pub(super) fn launch(&mut self, bound: Bound, h3_ports: &[u16]) {
        let slot = self.spawn(bound, h3_ports);
        self.slots.push(SlotHandle(slot));
    }

    pub(super) fn publish_stats(&self) {
        let snapshot = self
            .slots
            .iter()
            .map(|SlotHandle(slot)| {
                (
                    slot.spec.name.clone(),
                    slot.spec.protocol.as_str(),
                    slot.local,
                    slot.open.clone(),
                )
            })
            .collect();
        *self
            .stats
            .listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = snapshot;
    }

    fn state(&self, spec: &ListenerSpec, local: SocketAddr, h3_ports: &[u16]) -> ListenerState {
        // HTTPS answers advertise HTTP/3 when it listens on the same port.
        let alt_svc = match spec.protocol {
            ListenerProtocol::Https(_) if h3_ports.contains(&local.port()) => {
                http::HeaderValue::try_from(format!("h3=\":{}\"; ma=86400", local.port())).ok()
            }
            _ => None,
        };
        ListenerState {
            name: spec.name.clone(),
            protocol: spec.protocol.clone(),
            limits: self.limits.clone(),
            permits: Arc::new(Semaphore::new(self.limits.max_connections)),
            alt_svc,
        }
    }

    fn spawn(&self, bound: Bound, h3_ports: &[u16]) -> Slot {
        tracing::info!(
            listener = %bound.spec.name,
            address = %bound.local,
            protocol = bound.spec.protocol.as_str(),
            "listening"
        );
        let state = Arc::new(ArcSwap::from_pointee(self.state(
            &bound.spec,
            bound.local,
            h3_ports,
        )));
        let open = Arc::new(AtomicUsize::new(0));
        let (phase, watching) = watch::channel(Phase::Serving);
        let accept = match bound.socket {
            Socket::Tcp(socket) => tokio::spawn(connection::accept_loop(connection::Acceptor {
                state: state.clone(),
                socket,
                local: bound.local,
                open: open.clone(),
                service: self.service.clone(),
                phase: watching.clone(),
                connections: self.connections.clone(),
            })),
            #[cfg(feature = "http3")]
            Socket::Udp(socket) => tokio::spawn(h3::accept_loop(h3::Acceptor {
                state: state.clone(),
                socket,
                local: bound.local,
                open: open.clone(),
                service: self.service.clone(),
                phase: watching.clone(),
                connections: self.connections.clone(),
            })),
        };
        Slot {
            spec: bound.spec,
            local: bound.local,
            state,
            open,
            accept,
            phase,
        }
    }

    /// A kept listener takes `spec`: new state for new connections, and the
    /// new certificates poured into the store its TLS configuration reads.
    fn update(&self, slot: &mut Slot, spec: &ListenerSpec, h3_ports: &[u16], limits_changed: bool) {
        let mut next = spec.clone();
        // HTTPS takes the new store: its accept loop builds a new TLS
        // configuration when the state changes. QUIC's endpoint keeps the
        // store it was opened with, so the new certificates are poured into
        // that one (which, after this, only HTTP/3 listeners use).
        if let (ListenerProtocol::Http3(old), ListenerProtocol::Http3(new)) =
            (&slot.spec.protocol, &spec.protocol)
        {
            old.adopt(new);
            next.protocol = slot.spec.protocol.clone();
        }
        let unchanged = next == slot.spec && !limits_changed;
        let before = slot.state.load();
        let alt_svc_before = before.alt_svc.clone();
        let mut state = self.state(&next, slot.local, h3_ports);
        // The same max_connections: the same permits, so a full listener
        // waiting for one is not left waiting on a semaphore nobody uses.
        if before.limits.max_connections == state.limits.max_connections {
            state.permits = before.permits.clone();
        }
        if unchanged && state.alt_svc == alt_svc_before {
            return;
        }
        if slot.is_udp() && next.name != slot.spec.name {
            tracing::info!(listener = %next.name, was = %slot.spec.name, "HTTP/3 listener renamed");
        }
        slot.state.store(Arc::new(state));
        slot.spec = next;
    }
}

fn bind(spec: &ListenerSpec) -> Result<Bound, BindFailed> {
    let fail = |source| BindFailed {
        name: spec.name.clone(),
        address: spec.address,
        source,
    };
    let socket = match spec.protocol {
        ListenerProtocol::Http | ListenerProtocol::Https(_) => {
            Socket::Tcp(bind_tcp(spec.address).map_err(fail)?)
        }
        #[cfg(feature = "http3")]
        ListenerProtocol::Http3(_) => {
            Socket::Udp(std::net::UdpSocket::bind(spec.address).map_err(fail)?)
        }
        #[cfg(not(feature = "http3"))]
        ListenerProtocol::Http3(_) => {
            return Err(fail(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "HTTP/3 is not built in (scalws-core's \"http3\" feature is off)",
            )));
        }
    };
    let local = match &socket {
        Socket::Tcp(tcp) => tcp.local_addr(),
        #[cfg(feature = "http3")]
        Socket::Udp(udp) => udp.local_addr(),
    }
    .map_err(fail)?;
    Ok(Bound {
        spec: spec.clone(),
        local,
        socket,
    })
}

pub(super) fn bind_all(listeners: &[ListenerSpec]) -> Result<Vec<Bound>, BindFailed> {
    listeners.iter().map(bind).collect()
}

/// The ports HTTP/3 listens on (for `Alt-Svc` on HTTPS listeners of the same port).
pub(super) fn h3_ports<'a>(
    listeners: impl Iterator<Item = (&'a ListenerSpec, SocketAddr)>,
) -> Vec<u16> {
    listeners
        .filter(|(spec, _)| matches!(spec.protocol, ListenerProtocol::Http3(_)))
        .map(|(_, local)| local.port())
        .collect()
}
