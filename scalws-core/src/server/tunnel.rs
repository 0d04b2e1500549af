//! Byte tunnels for upgraded connections (WebSocket and the like): the
//! client's connection and the upstream's, after `101 Switching Protocols`.
//!
//! A tunnel started for a connection the server accepted is one of the
//! server's connections to the end: the client's connection keeps its place
//! in its listener's `max_connections` and open-connection count (the permit
//! travels with the socket into the tunnel), a drain waits for it like for a
//! request in flight and closes it when `drain_timeout` runs out, and it is
//! closed once no byte has moved either way for `tunnel_idle_timeout`.

use std::sync::Arc;
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

/// Waits for both sides to finish upgrading, then copies bytes both ways until
/// either side closes, nothing moves for the idle limit, or the drain ends it.
/// Runs as a task of its own so the `101` response can go back first.
///
/// `conn` is the client connection's [`ConnInfo`]: with one made by the
/// server, the tunnel counts as that connection (see the module docs);
/// without (a request not from [`Server`](super::Server)), it is a plain task
/// with the default idle limit.
pub fn spawn_tunnel(conn: Option<&ConnInfo>, client: OnUpgrade, upstream: OnUpgrade) {
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
    tokio::pin!(copy);
    loop {
        let Some(silent_at) = moved.silent_at(idle_timeout) else {
            tracing::debug!(?idle_timeout, "tunnel idle; closing");
            return;
        };
        tokio::select! {
            result = &mut copy => {
                match result {
                    Ok((up, down)) => tracing::debug!(up, down, "tunnel closed"),
                    Err(error) => tracing::debug!(%error, "tunnel ended with an error"),
                }
                return;
            }
            () = &mut closing => {
                tracing::debug!("drain timeout reached; closing the tunnel");
                return;
            }
            // Checked again at the top: bytes may have moved meanwhile.
            () = tokio::time::sleep_until(silent_at.into()) => {}
        }
    }
}
