//! One QUIC connection: handshake, h3 settings, a task per request stream,
//! GOAWAY and drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::Service;

use super::edge::Edge;
use crate::error::BoxError;
use crate::server::activity::later;
use crate::server::listener::{ConnectionPermit, ListenerProtocol, ListenerState, Phase};
use crate::{Body, ConnInfo, Scheme};

/// What every connection of one listener shares.
pub(super) struct Listener {
    /// Read once per connection: its name, certificates and limits.
    pub(super) state: Arc<ArcSwap<ListenerState>>,
    pub(super) local: SocketAddr,
}

/// `H3_NO_ERROR` (RFC 9114 8.1), to close a connection that did nothing wrong.
pub(super) const H3_NO_ERROR: u32 = 0x100;

/// Serves one connection until the client closes it, it idles out, or the
/// server drains (GOAWAY, then the requests in flight finish) or closes.
pub(super) async fn serve<S, B>(
    incoming: quinn::Incoming,
    listener: Arc<Listener>,
    service: S,
    mut phase: watch::Receiver<Phase>,
    _permit: ConnectionPermit,
) where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let state = listener.state.load_full();
    let limits = &state.limits;
    let handshake = async {
        let quic = incoming.accept()?.await?;
        Ok::<_, quinn::ConnectionError>(quic)
    };
    let quic = match tokio::time::timeout(limits.header_read_timeout, handshake).await {
        Ok(Ok(quic)) => quic,
        Ok(Err(error)) => {
            tracing::debug!(%error, "QUIC handshake failed");
            return;
        }
        Err(_elapsed) => {
            tracing::debug!("QUIC handshake not finished in time");
            return;
        }
    };
    let mut conn = ConnInfo::new(
        state.name.clone(),
        Scheme::Https,
        quic.remote_address(),
        listener.local,
        server_name(&quic),
    );
    if let ListenerProtocol::Http3(certificates) = &state.protocol {
        conn = conn.with_tls(certificates.clone());
    }
    let mut h3 = match ::h3::server::builder()
        .max_field_section_size(u64::try_from(limits.max_header_bytes).unwrap_or(u64::MAX))
        // SETTINGS_ENABLE_CONNECT_PROTOCOL: WebSocket over HTTP/3 (RFC 9220),
        // announced only where h3 parses `:protocol websocket` (the
        // workspace's patched copy; the release refuses it as malformed).
        .enable_extended_connect("websocket".parse::<::h3::ext::Protocol>().is_ok())
        .build::<_, Bytes>(h3_quinn::Connection::new(quic.clone()))
        .await
    {
        Ok(h3) => h3,
        Err(error) => {
            tracing::debug!(%error, "HTTP/3 connection setup failed");
            return;
        }
    };
    let edge = Arc::new(Edge {
        conn,
        limits: limits.clone(),
    });

    let mut requests = JoinSet::new();
    let mut draining = false;
    // As on TCP, a new connection owes its first request within
    // header_read_timeout; later gaps between requests get keepalive_timeout.
    let mut idle_until = later(Instant::now(), limits.header_read_timeout);
    loop {
        let now = *phase.borrow_and_update();
        match now {
            Phase::Serving => {}
            Phase::Draining if !draining => {
                draining = true;
                // GOAWAY: streams after the last one accepted are refused (the
                // client may retry them elsewhere); the ones in flight finish.
                if let Err(error) = h3.shutdown(0).await {
                    tracing::debug!(%error, "HTTP/3 GOAWAY not sent");
                    break;
                }
            }
            Phase::Draining => {}
            Phase::Closing => {
                // Closing first keeps the aborted requests from ending their
                // streams cleanly, as if their bodies were whole.
                quic.close(H3_NO_ERROR.into(), b"server closing");
                break;
            }
        }
        if draining && requests.is_empty() {
            break;
        }
        tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    requests.spawn(edge.clone().serve(service.clone(), resolver));
                }
                // The client sent GOAWAY and its requests are answered.
                Ok(None) => break,
                Err(error) => {
                    if !error.is_h3_no_error() {
                        tracing::debug!(%error, "HTTP/3 connection ended");
                    }
                    break;
                }
            },
            Some(finished) = requests.join_next(), if !requests.is_empty() => {
                if let Err(error) = finished
                    && error.is_panic()
                {
                    tracing::warn!("HTTP/3 request task panicked; stream reset");
                }
                if requests.is_empty() {
                    idle_until = later(Instant::now(), limits.keepalive_timeout);
                }
            }
            () = tokio::time::sleep_until(idle_until.into()), if requests.is_empty() && !draining => {
                tracing::debug!("HTTP/3 connection idle past keepalive_timeout; closing");
                // GOAWAY first: a request crossing it is refused, and retried, not lost.
                let _ = h3.shutdown(0).await;
                break;
            }
            changed = phase.changed() => {
                if changed.is_err() {
                    // The server is gone without draining: close now.
                    quic.close(H3_NO_ERROR.into(), b"server closing");
                    break;
                }
            }
        }
    }
    // Dropping `h3` closes the connection with H3_NO_ERROR; dropping
    // `requests` aborts any request still running.
}

/// The SNI the client sent, from the QUIC handshake.
fn server_name(quic: &quinn::Connection) -> Option<Arc<str>> {
    let data = quic
        .handshake_data()?
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?;
    data.server_name.map(Arc::from)
}
