//! Byte tunnels for upgraded connections (WebSocket and the like): the
//! client's connection and the upstream's, after `101 Switching Protocols`.
//!
//! A tunnel started for a connection the server accepted is one of the
//! server's connections to the end: the client's connection keeps its place
//! in its listener's `max_connections` and open-connection count (the permit
//! travels with the socket into the tunnel), a drain waits for it like for a
//! request in flight and closes it when `drain_timeout` runs out, and it is
//! closed once no byte has moved either way for `tunnel_idle_timeout`.

use std::future::Future;
use std::sync::Arc;
#[cfg(feature = "http3")]
use std::sync::Mutex;
use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use super::activity::Activity;
use super::edge::Open;
use super::io::Watched;
use super::limits::Limits;
use super::listener::Phase;
use crate::ConnInfo;

/// What a connection's tunnels need from the server: its task tracker (a
/// drain waits for them), its listener's phase (closed when the drain runs
/// out) and the idle limit.
#[derive(Clone, Debug)]
pub(crate) struct TunnelHost {
    pub(super) tasks: TaskTracker,
    pub(super) phase: watch::Receiver<Phase>,
    pub(super) idle_timeout: Duration,
    /// The client connection's: an HTTP/2 stream's tunnel lives inside
    /// that connection, which is busy, not idle, while the tunnel is open.
    pub(super) activity: Arc<Activity>,
}

/// The client's side of an upgrade, taken from its request: hyper's, for an
/// HTTP/1.1 upgrade or an HTTP/2 extended CONNECT, or an HTTP/3 stream's
/// (RFC 9220), which the server's HTTP/3 edge tunnels itself once
/// [`spawn_tunnel`] hands it the upstream's side.
#[derive(Clone, Debug)]
pub struct ClientUpgrade(ClientSide);

#[derive(Clone, Debug)]
enum ClientSide {
    Hyper(OnUpgrade),
    /// Where the HTTP/3 edge finds the upstream's side after the service
    /// answered (`101` with it, or no tunnel).
    #[cfg(feature = "http3")]
    Stream(UpstreamSlot),
}

/// In an HTTP/3 request's extensions: where `spawn_tunnel` sends the
/// upstream's side to the edge, which takes it once the service answered
/// (a later send finds the edge gone, and the upstream's side is dropped).
#[cfg(feature = "http3")]
pub(crate) type UpstreamSlot = Arc<Mutex<Option<tokio::sync::oneshot::Sender<OnUpgrade>>>>;

impl ClientUpgrade {
    /// Removes the client's side of an upgrade from a request's
    /// extensions: hyper's `OnUpgrade`, or one an HTTP/3 edge put there.
    pub fn take(extensions: &mut http::Extensions) -> Option<Self> {
        match extensions.remove::<OnUpgrade>() {
            Some(hyper) => Some(Self(ClientSide::Hyper(hyper))),
            None => extensions.remove::<Self>(),
        }
    }

    /// The side of an HTTP/3 stream whose edge waits in `slot`.
    #[cfg(feature = "http3")]
    pub(crate) fn stream(slot: UpstreamSlot) -> Self {
        Self(ClientSide::Stream(slot))
    }
}

impl From<OnUpgrade> for ClientUpgrade {
    fn from(hyper: OnUpgrade) -> Self {
        Self(ClientSide::Hyper(hyper))
    }
}

/// Waits for both sides to finish upgrading, then copies bytes both ways until
/// either side closes, nothing moves for the idle limit, or the drain ends it.
/// Runs as a task of its own so the `101` response can go back first.
///
/// For an HTTP/3 client nothing is spawned: `upstream` is handed to the
/// stream's edge, which opens the tunnel if the same service call answers
/// `101` (a call made after that answer drops `upstream`). An HTTP/3
/// WebSocket therefore has to be proxied by this function; an embedder's
/// own WebSocket handler (one that takes hyper's `OnUpgrade`) finds none
/// on an HTTP/3 request.
///
/// `conn` is the client connection's [`ConnInfo`]: with one made by the
/// server, the tunnel counts as that connection (see the module docs);
/// without (a request not from [`Server`](super::Server)), it is a plain task
/// with the default idle limit.
pub fn spawn_tunnel(
    conn: Option<&ConnInfo>,
    client: impl Into<ClientUpgrade>,
    upstream: OnUpgrade,
) {
    // Without HTTP/3, hyper's is the only kind.
    #[cfg_attr(not(feature = "http3"), allow(clippy::infallible_destructuring_match))]
    let client = match client.into().0 {
        ClientSide::Hyper(client) => client,
        #[cfg(feature = "http3")]
        ClientSide::Stream(slot) => {
            // Poisoned only by a panic while holding it: no tunnel then.
            let sender = slot.lock().ok().and_then(|mut slot| slot.take());
            if sender.is_none_or(|sender| sender.send(upstream).is_err()) {
                tracing::debug!("HTTP/3 stream no longer waiting for its tunnel; upgrade dropped");
            }
            return;
        }
    };
    match conn.and_then(ConnInfo::tunnel_host) {
        Some(host) => {
            let open = Open::new(&host.activity);
            let run = run(
                client,
                upstream,
                host.idle_timeout,
                Some(host.phase.clone()),
            );
            host.tasks.spawn(async move {
                run.await;
                drop(open);
            });
        }
        None => {
            let idle_timeout = Limits::default().tunnel_idle_timeout;
            tokio::spawn(run(client, upstream, idle_timeout, None));
        }
    }
}

async fn run(
    client: OnUpgrade,
    upstream: OnUpgrade,
    idle_timeout: Duration,
    phase: Option<watch::Receiver<Phase>>,
) {
    let closing = async move {
        match phase {
            // A dropped sender means the server is gone: close too.
            Some(mut phase) => drop(phase.wait_for(|now| *now == Phase::Closing).await),
            None => std::future::pending().await,
        }
    };
    tokio::pin!(closing);
    let upgraded = tokio::select! {
        both = async { tokio::try_join!(client, upstream) } => both,
        () = &mut closing => return,
    };
    let (client, upstream) = match upgraded {
        Ok(both) => both,
        Err(error) => {
            tracing::debug!(%error, "upgrade failed before the tunnel opened");
            return;
        }
    };
    let moved = Arc::new(Activity::new());
    let mut client = Watched::new(TokioIo::new(client), moved.clone());
    let mut upstream = Watched::new(TokioIo::new(upstream), moved.clone());
    let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    tokio::select! {
        copied = until_idle(copy, &moved, idle_timeout) => match copied {
            Some(Ok((up, down))) => tracing::debug!(up, down, "tunnel closed"),
            Some(Err(error)) => tracing::debug!(%error, "tunnel ended with an error"),
            None => {}
        },
        () = &mut closing => tracing::debug!("drain timeout reached; closing the tunnel"),
    }
}

/// Runs `copy` until it ends, or `None` once `moved` has seen no byte for
/// `idle_timeout`.
pub(super) async fn until_idle<F: Future>(
    copy: F,
    moved: &Activity,
    idle_timeout: Duration,
) -> Option<F::Output> {
    tokio::pin!(copy);
    loop {
        let Some(silent_at) = moved.silent_at(idle_timeout) else {
            tracing::debug!(?idle_timeout, "tunnel idle; closing");
            return None;
        };
        tokio::select! {
            done = &mut copy => return Some(done),
            // Checked again at the top: bytes may have moved meanwhile.
            () = tokio::time::sleep_until(silent_at.into()) => {}
        }
    }
}
