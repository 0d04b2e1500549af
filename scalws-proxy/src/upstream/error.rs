//! How a pool fails: at build ([`InvalidUpstream`]) and per request ([`UpstreamError`]).

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use scalws_core::BoxError;

/// A request could not get a response head from the pool.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No address could be connected (after retries), or the upstream failed
    /// before a response head (reset, closed, garbage, oversized head): 502.
    #[error("upstream {name:?}: unavailable")]
    Unavailable {
        /// The pool's name.
        name: String,
        /// The last failure, when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// `request_timeout` passed before the response head: 504.
    #[error("upstream {name:?}: no response head within request_timeout")]
    TimedOut {
        /// The pool's name.
        name: String,
    },
    /// The request failed on the client's side while it was sent: its body
    /// had bad framing or was cut short (400), ran past `max_request_body`
    /// (413), or had not all arrived by `request_timeout` (408). Not counted
    /// against the upstream's health.
    #[error("upstream {name:?}: the request failed on the client's side ({status})")]
    Client {
        /// The pool's name.
        name: String,
        /// 400, 408 or 413.
        status: StatusCode,
        /// What failed.
        #[source]
        source: BoxError,
    },
}

impl UpstreamError {
    /// The status a proxy answers with: 502, 504, or the client's 400, 408 or 413.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unavailable { .. } => StatusCode::BAD_GATEWAY,
            Self::TimedOut { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::Client { status, .. } => *status,
        }
    }
}

/// The options given to [`UpstreamPool::new`](super::UpstreamPool::new) cannot make a pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream {name:?}: {reason}")]
pub struct InvalidUpstream {
    /// The pool's name.
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

/// Opening a connection to an address failed (the source of an
/// [`UpstreamError::Unavailable`]).
#[derive(Debug, thiserror::Error)]
#[error("connect to {address}: {source}")]
pub struct ConnectFailed {
    /// The address tried.
    pub address: SocketAddr,
    /// Why (refused, unreachable, TLS handshake...).
    #[source]
    pub source: std::io::Error,
}

/// Opening a connection (TCP and TLS handshake) took longer than `connect_timeout`.
#[derive(Debug, thiserror::Error)]
#[error("connect to {address}: no connection within {timeout:?}")]
pub struct ConnectTimedOut {
    /// The address tried.
    pub address: SocketAddr,
    /// The `connect_timeout` that passed.
    pub timeout: Duration,
}
