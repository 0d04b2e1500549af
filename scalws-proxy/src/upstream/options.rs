//! What a pool is built from: addresses, balancing, protocol, TLS, timeouts, health.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use http::HeaderName;

/// How the pool speaks to its addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 over TCP, connections kept alive and reused.
    #[default]
    Http1,
    /// HTTP/2 over TCP by prior knowledge (h2c): one multiplexed connection per address.
    Http2,
    /// TLS (rustls), ALPN `h2` then `http/1.1`.
    Https,
}

/// How the pool chooses an address for a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Balance {
    /// In turn, each address as often as its weight says (smooth weighted round robin).
    #[default]
    RoundRobin,
    /// The address with the fewest requests in flight per unit of weight.
    LeastRequests,
    /// Two weighted random picks; the less loaded of the two (power of two choices).
    RandomTwo,
    /// Sticky per client IP (rendezvous hashing).
    IpHash,
    /// Sticky per value of this request header (rendezvous hashing); requests
    /// without the header go round robin.
    HeaderHash(HeaderName),
}

/// TLS client settings, used when the protocol is [`Protocol::Https`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsOptions {
    /// The server name sent (SNI) and verified; `None`: the address's IP.
    pub sni: Option<String>,
    /// A PEM file of trusted CA certificates; `None`: the system's roots.
    pub ca: Option<PathBuf>,
    /// Verify the upstream's certificate. Off accepts any certificate (logged as a warning).
    pub verify: bool,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            sni: None,
            ca: None,
            verify: true,
        }
    }
}

/// Active health checking: a `GET path` to every address each `interval`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    /// Path (and query) requested; a 2xx or 3xx answer is a success.
    pub path: String,
    /// Time between two rounds of checks.
    pub interval: Duration,
    /// Time allowed for one check, until the response head.
    pub timeout: Duration,
    /// Consecutive failed checks that take an address down.
    pub unhealthy_after: NonZeroU32,
    /// Consecutive successful checks that bring it back (and end a passive ejection).
    pub healthy_after: NonZeroU32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            path: "/healthz".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            unhealthy_after: nonzero(3),
            healthy_after: nonzero(2),
        }
    }
}

/// Passive health: an address that fails `failures` requests in a row is left
/// out for `cooldown`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passive {
    /// Consecutive transport failures that eject the address.
    pub failures: NonZeroU32,
    /// How long an ejected address is left out.
    pub cooldown: Duration,
}

impl Default for Passive {
    fn default() -> Self {
        Self {
            failures: nonzero(5),
            cooldown: Duration::from_secs(10),
        }
    }
}

/// Everything an [`UpstreamPool`](super::UpstreamPool) is built from. The
/// defaults are those of the `upstreams` section of the specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamOptions {
    /// Addresses with their weights; weight 0 is never chosen.
    pub addresses: Vec<(SocketAddr, u32)>,
    /// How an address is chosen.
    pub balance: Balance,
    /// How the pool speaks to its addresses.
    pub protocol: Protocol,
    /// TLS settings for [`Protocol::Https`].
    pub tls: TlsOptions,
    /// Time allowed to open a connection (TCP and TLS handshake). Default 2 s.
    pub connect_timeout: Duration,
    /// Time allowed from sending until the response head, retries included. Default 30 s.
    pub request_timeout: Duration,
    /// An idle pooled connection is closed after this. Default 60 s.
    pub idle_timeout: Duration,
    /// Idle connections kept per address. Default 256.
    pub max_idle_per_address: usize,
    /// Extra attempts for idempotent requests without a body. Default 1.
    pub retries: u32,
    /// Active health checks; `None` (the default) for none.
    pub health_check: Option<HealthCheck>,
    /// Passive ejection; default 5 failures, 10 s cooldown.
    pub passive: Option<Passive>,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            addresses: Vec::new(),
            balance: Balance::RoundRobin,
            protocol: Protocol::Http1,
            tls: TlsOptions::default(),
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_idle_per_address: 256,
            retries: 1,
            health_check: None,
            passive: Some(Passive::default()),
        }
    }
}

/// `n` as a `NonZeroU32`, for the constant defaults above (0 would become 1).
const fn nonzero(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => NonZeroU32::MIN,
    }
}
