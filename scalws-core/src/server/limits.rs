//! The per-listener limits of SPEC section 2, typed.

use std::num::NonZeroU32;
use std::time::Duration;

/// Limits the server enforces on every connection and request.
///
/// The defaults are the ones documented in `docs/configuration.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Open connections per listener; beyond it, new connections wait in the backlog.
    pub max_connections: usize,
    /// Time a client has to send a whole request head (and the first one on a new connection).
    pub header_read_timeout: Duration,
    /// Idle time allowed between requests on a keep-alive connection.
    pub keepalive_timeout: Duration,
    /// Size of a request head; larger heads get 431.
    pub max_header_bytes: usize,
    /// Number of request headers; more get 431.
    pub max_headers: usize,
    /// Concurrent streams per HTTP/2 connection.
    pub h2_max_concurrent_streams: NonZeroU32,
    /// Request body size, declared or streamed; larger bodies get 413.
    pub max_request_body: u64,
    /// How long requests in flight may run after shutdown begins.
    pub drain_timeout: Duration,
    /// How long a tunnel (an upgraded connection: WebSocket) may stay open
    /// with no byte moving either way.
    pub tunnel_idle_timeout: Duration,
    /// How long the socket of an HTTP/1.1 or HTTP/2 connection may refuse
    /// every write (the client stopped reading) while a response is being
    /// sent; then the connection is closed. Keep it well above zero: at zero
    /// the first moment a socket buffer is full ends the connection.
    pub send_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
            max_header_bytes: 64 * 1024,
            max_headers: 100,
            h2_max_concurrent_streams: NonZeroU32::new(128).unwrap_or(NonZeroU32::MIN),
            max_request_body: 16 * 1024 * 1024,
            drain_timeout: Duration::from_secs(30),
            tunnel_idle_timeout: Duration::from_secs(300),
            send_timeout: Duration::from_secs(30),
        }
    }
}
