//! Tunnels an upgraded connection (WebSocket and the like) once the upstream
//! has agreed with `101 Switching Protocols`.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

/// Waits for both sides to finish upgrading, then copies bytes both ways until
/// either closes. Runs as its own task so the response can go back first.
pub(crate) fn spawn_tunnel(client: OnUpgrade, upstream: OnUpgrade) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(error) => {
                tracing::debug!(%error, "upgrade failed before the tunnel opened");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            Ok((up, down)) => tracing::debug!(up, down, "tunnel closed"),
            Err(error) => tracing::debug!(%error, "tunnel ended with an error"),
        }
    });
}
