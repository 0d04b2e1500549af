//! A server that is serving: its listeners can be added, removed and changed
//! in place (for configuration reloads), and it drains on shutdown.
//!
//! A listener that stays at the same address keeps its socket: the accept
//! loop reads its name, protocol and limits from a shared [`ListenerState`]
//! that a reconfiguration swaps, so no connection is refused while a reload
//! happens. Connections already open keep what they started with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tower::Service;

use super::bind::{BindFailed, Bound, Socket, bind, h3_ports};
use super::connection;
#[cfg(feature = "http3")]
use super::h3;
use super::limits::Limits;
#[cfg(feature = "http3")]
use super::listener::ListenerProtocol;
use super::listener::{ListenerSpec, ListenerState, Phase};
use super::stats::ServerStats;
use super::workers::Workers;
use crate::Body;
use crate::error::BoxError;

/// One listener being served.
struct Slot {
    spec: ListenerSpec,
    local: SocketAddr,
    state: Arc<ArcSwap<ListenerState>>,
    open: Arc<AtomicUsize>,
    /// The accept loops, one per socket (per worker, for TCP).
    accept: Vec<JoinHandle<()>>,
    /// What this listener's connections watch: it drains on its own when a
    /// reconfiguration removes it, and with the others on shutdown.
    phase: watch::Sender<Phase>,
}

impl Slot {
    fn is_udp(&self) -> bool {
        self.spec.protocol.is_udp()
    }
}

/// A server started by [`Server::start`](super::Server::start).
pub struct Running<S> {
    service: S,
    /// The drain phases of listeners removed by reconfigurations whose
    /// connections may still be open: shutdown closes them too.
    retired: Vec<Arc<watch::Sender<Phase>>>,
    connections: TaskTracker,
    limits: Arc<Limits>,
    slots: Vec<Slot>,
    stats: ServerStats,
    /// Dropped last: the extra event loops stop when the server is gone.
    workers: Workers,
}

impl<S> Running<S> {
    /// The address each listener is bound to, by name.
    pub fn local_addrs(&self) -> Vec<(Arc<str>, SocketAddr)> {
        self.slots
            .iter()
            .map(|slot| (slot.spec.name.clone(), slot.local))
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
        limits: Limits,
    ) -> Result<(), BindFailed> {
        let kept = |spec: &ListenerSpec| {
            let udp = spec.protocol.is_udp();
            self.slots
                .iter()
                .position(|slot| slot.spec.address == spec.address && slot.is_udp() == udp)
        };
        // Bind every new address before touching anything.
        let mut fresh = Vec::new();
        for spec in listeners {
            if kept(spec).is_none() {
                fresh.push(bind(spec, self.workers.count())?);
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
                    |i| self.slots[i].local,
                );
                (spec, local)
            })
            .collect();
        let h3_ports = h3_ports(all.into_iter());

        let mut slots = std::mem::take(&mut self.slots);
        let mut next = Vec::with_capacity(listeners.len());
        for spec in listeners {
            let udp = spec.protocol.is_udp();
            let position = slots
                .iter()
                .position(|slot| slot.spec.address == spec.address && slot.is_udp() == udp);
            if let Some(i) = position {
                let mut slot = slots.remove(i);
                self.update(&mut slot, spec, &h3_ports, limits_changed);
                next.push(slot);
            } else if let Some(i) = fresh.iter().position(|b| b.spec == *spec) {
                let bound = fresh.remove(i);
                next.push(self.spawn(bound, &h3_ports));
            }
        }
        let mut removed = Vec::with_capacity(slots.len());
        for gone in slots {
            tracing::info!(listener = %gone.spec.name, address = %gone.local, "listener removed: draining its connections");
            gone.accept.iter().for_each(JoinHandle::abort);
            removed.push(gone);
        }
        self.slots = next;
        self.publish_stats();
        let drain_timeout = self.limits.drain_timeout;
        self.retired.retain(|phase| phase.receiver_count() > 0);
        for gone in removed {
            // Once its accept loops have ended, the listening sockets are
            // closed: when this returns, the address refuses connections.
            for accept in gone.accept {
                let _ = accept.await;
            }
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
        let slots: Vec<Slot> = self.slots.drain(..).collect();
        for slot in &slots {
            slot.accept.iter().for_each(JoinHandle::abort);
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

    /// A running server with no listeners yet: [`Server::start`](super::Server::start)
    /// launches its bound ones.
    pub(super) fn new(service: S, limits: Limits, workers: Workers) -> Self {
        Self {
            workers,
            service,
            retired: Vec::new(),
            connections: TaskTracker::new(),
            limits: Arc::new(limits),
            slots: Vec::new(),
            stats: ServerStats::default(),
        }
    }

    pub(super) fn launch(&mut self, bound: Bound, h3_ports: &[u16]) {
        let slot = self.spawn(bound, h3_ports);
        self.slots.push(slot);
        self.publish_stats();
    }

    fn publish_stats(&self) {
        self.stats.publish(
            self.slots
                .iter()
                .map(|slot| {
                    (
                        slot.spec.name.clone(),
                        slot.spec.protocol.as_str(),
                        slot.local,
                        slot.open.clone(),
                    )
                })
                .collect(),
        );
    }

    fn state(&self, spec: &ListenerSpec, local: SocketAddr, h3_ports: &[u16]) -> ListenerState {
        // HTTPS answers advertise HTTP/3 when it listens on the same port.
        let alt_svc = if spec.protocol.is_https() && h3_ports.contains(&local.port()) {
            http::HeaderValue::try_from(format!("h3=\":{}\"; ma=86400", local.port())).ok()
        } else {
            None
        };
        ListenerState {
            name: spec.name.clone(),
            #[cfg(feature = "tls")]
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
            Socket::Tcp(sockets) => {
                let shared = sockets.len() > 1;
                sockets
                    .into_iter()
                    .enumerate()
                    .map(|(worker, socket)| {
                        let accept = connection::accept_loop(connection::Acceptor {
                            state: state.clone(),
                            socket,
                            shared,
                            local: bound.local,
                            open: open.clone(),
                            service: self.service.clone(),
                            phase: watching.clone(),
                            connections: self.connections.clone(),
                        });
                        match self.workers.handle(worker) {
                            Some(handle) => handle.spawn(accept),
                            None => tokio::spawn(accept),
                        }
                    })
                    .collect()
            }
            #[cfg(feature = "http3")]
            Socket::Udp(socket) => vec![tokio::spawn(h3::accept_loop(h3::Acceptor {
                state: state.clone(),
                socket,
                local: bound.local,
                open: open.clone(),
                service: self.service.clone(),
                phase: watching.clone(),
                connections: self.connections.clone(),
            }))],
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
        let next = keep_quic_store(&slot.spec, spec);
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

/// What a kept listener becomes. HTTPS takes the new certificate store: its
/// accept loop builds a new TLS configuration when the state changes. QUIC's
/// endpoint keeps the store it was opened with, so an HTTP/3 listener's new
/// certificates are poured into that one (which, after this, only HTTP/3
/// listeners use).
#[cfg(feature = "http3")]
fn keep_quic_store(old: &ListenerSpec, new: &ListenerSpec) -> ListenerSpec {
    let mut next = new.clone();
    if let (ListenerProtocol::Http3(kept), ListenerProtocol::Http3(fresh)) =
        (&old.protocol, &new.protocol)
    {
        kept.adopt(fresh);
        next.protocol = old.protocol.clone();
    }
    next
}

/// What a kept listener becomes: without HTTP/3, simply the new spec.
#[cfg(not(feature = "http3"))]
fn keep_quic_store(_old: &ListenerSpec, new: &ListenerSpec) -> ListenerSpec {
    new.clone()
}
