//! HTTP/3 listeners: QUIC (quinn) and h3 (h3-quinn), serving the same
//! `Service` as the TCP listeners.
//!
//! The life of an HTTP/3 listener, one file per step:
//!
//! 1. here: the QUIC endpoint on the bound UDP socket (TLS 1.3 with the
//!    listener's certificates, ALPN `h3`, the limits as transport settings),
//!    and the loop accepting connections;
//! 2. [`connection`]: one QUIC connection: handshake, h3 settings, a task per
//!    request stream, GOAWAY and drain;
//! 3. [`edge`]: one request stream: head, limits, `ConnInfo`, the service call
//!    (a failure or panic becomes a response);
//! 4. [`response`]: the response head, body frames and trailers, streamed;
//! 5. [`body`]: the request body, streamed from the QUIC stream under
//!    `max_request_body`;
//! 6. [`tunnel`]: a WebSocket's bytes on its stream (RFC 9220), after the
//!    `200` that answered its extended CONNECT.

mod body;
mod connection;

use connection::Listener;
mod edge;
mod response;
mod tunnel;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response};
use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;
use tower::Service;

use super::limits::Limits;
use super::listener::{ConnectionPermit, ListenerProtocol, ListenerState, Phase};
use crate::Body;
use crate::error::BoxError;
use crate::tls::TlsCertificates;

/// ALPN of HTTP/3 (RFC 9114 3.1).
const ALPN_H3: &[u8] = b"h3";

pub(super) struct Acceptor<S> {
    /// Name, certificates and limits: swapped when a reload changes them.
    pub(super) state: Arc<ArcSwap<ListenerState>>,
    pub(super) socket: std::net::UdpSocket,
    pub(super) local: SocketAddr,
    /// The listener's count of open connections.
    pub(super) open: Arc<AtomicUsize>,
    pub(super) service: S,
    pub(super) phase: watch::Receiver<Phase>,
    pub(super) connections: TaskTracker,
}

/// Accepts QUIC connections until aborted (when the server starts draining);
/// each connection runs in a task tracked by `connections`, and one more
/// tracked task closes the endpoint once they have all finished.
pub(super) async fn accept_loop<S, B>(acceptor: Acceptor<S>)
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let Acceptor {
        state,
        socket,
        local,
        open,
        service,
        phase,
        connections,
    } = acceptor;
    let first = state.load_full();
    let ListenerProtocol::Http3(certificates) = &first.protocol else {
        tracing::error!(listener = %first.name, "not an HTTP/3 listener");
        return;
    };
    // The endpoint's TLS resolves through this store: a reload pours new
    // certificates into it rather than replacing the endpoint.
    let endpoint = match open_endpoint(certificates, &first.limits, socket) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            tracing::error!(listener = %first.name, %error, "cannot start the HTTP/3 listener");
            return;
        }
    };
    let listener_connections = TaskTracker::new();
    connections.spawn(close_when_drained(
        endpoint.clone(),
        listener_connections.clone(),
        phase.clone(),
    ));
    let listener = Arc::new(Listener { state, local });
    loop {
        // Past max_connections we stop accepting: new handshakes wait in quinn's queue.
        let permits = listener.state.load().permits.clone();
        let Ok(permit) = permits.acquire_owned().await else {
            return;
        };
        let Some(incoming) = endpoint.accept().await else {
            return;
        };
        let permit = ConnectionPermit::new(permit, &open);
        let connection = connection::serve(
            incoming,
            listener.clone(),
            service.clone(),
            phase.clone(),
            permit,
        );
        connections.spawn(listener_connections.track_future(connection));
    }
}

/// The endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
enum EndpointFailed {
    #[error("the TLS configuration cannot serve QUIC: {0}")]
    Tls(String),
    #[error("cannot use the UDP socket: {0}")]
    Socket(#[from] std::io::Error),
}

fn open_endpoint(
    certificates: &TlsCertificates,
    limits: &Limits,
    socket: std::net::UdpSocket,
) -> Result<quinn::Endpoint, EndpointFailed> {
    let tls = certificates.server_config(&[ALPN_H3]);
    // quinn unwraps this per handshake; a config it rejects must fail here, once.
    rustls::quic::ServerConnection::new(tls.clone(), rustls::quic::Version::V1, Vec::new())
        .map_err(|error| EndpointFailed::Tls(error.to_string()))?;
    let crypto =
        QuicServerConfig::try_from(tls).map_err(|error| EndpointFailed::Tls(error.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport(limits)));
    Ok(quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )?)
}

/// The limits that QUIC itself enforces.
///
/// QUIC's idle timeout counts time without packets, so alone it would also
/// cut a request whose handler is silent for `keepalive_timeout`. As on TCP,
/// only time between requests should count: the server pings at half the
/// timeout (a vanished client still times out), and the connection driver
/// closes a connection that has had no request in flight for that long.
fn transport(limits: &Limits) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    // Bound what one connection can make us buffer when the service reads
    // slowly (quinn's default connection window is unlimited): 1 MiB per
    // stream and 16 MiB per connection, in the range of HTTP/2's defaults.
    transport.stream_receive_window(quinn::VarInt::from_u32(1 << 20));
    transport.receive_window(quinn::VarInt::from_u32(16 << 20));
    // HTTP/3 here reads no datagrams.
    transport.datagram_receive_buffer_size(None);
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(
        limits.h2_max_concurrent_streams.get(),
    ));
    // Zero or out of QUIC's range (about 146 years): no idle timeout from us.
    let keepalive = limits.keepalive_timeout;
    let idle = quinn::IdleTimeout::try_from(keepalive)
        .ok()
        .filter(|_| !keepalive.is_zero());
    transport.max_idle_timeout(idle);
    if idle.is_some() {
        transport.keep_alive_interval(Some(keepalive / 2));
    }
    transport
}

/// Once the server drains: refuses new handshakes (CONNECTION_REFUSED, so
/// clients fail fast as with a closed TCP port), waits for the listener's
/// connections to finish (or for the drain timeout), then closes the endpoint.
async fn close_when_drained(
    endpoint: quinn::Endpoint,
    connections: TaskTracker,
    mut phase: watch::Receiver<Phase>,
) {
    while *phase.borrow_and_update() == Phase::Serving {
        if phase.changed().await.is_err() {
            break;
        }
    }
    connections.close();
    let closing = async {
        while *phase.borrow_and_update() != Phase::Closing {
            if phase.changed().await.is_err() {
                break;
            }
        }
    };
    let refuse = async {
        while let Some(incoming) = endpoint.accept().await {
            incoming.refuse();
        }
    };
    tokio::select! {
        () = connections.wait() => {}
        () = closing => {}
        () = refuse => {}
    }
    endpoint.close(
        quinn::VarInt::from_u32(connection::H3_NO_ERROR),
        b"server shutting down",
    );
}
