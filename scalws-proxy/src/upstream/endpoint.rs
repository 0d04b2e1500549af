//! One address of a pool: its connections, weight, load and health (atomics).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use http::uri::Authority;

use super::client::UpstreamClient;
use super::options::Passive;

/// The health of an address, as [`UpstreamPool::stats`](super::UpstreamPool::stats) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointState {
    /// Chosen normally.
    Healthy,
    /// Left out after consecutive request failures, until its cooldown passes.
    Ejected,
    /// Failed `unhealthy_after` active checks in a row; left out until it passes
    /// `healthy_after` checks.
    Down,
}

impl EndpointState {
    /// `"healthy"`, `"ejected"` or `"down"`, for metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Ejected => "ejected",
            Self::Down => "down",
        }
    }
}

/// A snapshot of one address's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointStats {
    /// The address.
    pub address: SocketAddr,
    /// Its configured weight.
    pub weight: u32,
    /// Requests sent to it whose response head has not arrived (nor failed) yet.
    pub in_flight: usize,
    /// Requests to it that failed before a response head, since the pool was built.
    pub failures: u64,
    /// Its health.
    pub state: EndpointState,
}

/// Passive ejection settings, in the units the atomics use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PassivePolicy {
    failures: u32,
    cooldown_ms: u64,
}

impl From<&Passive> for PassivePolicy {
    fn from(passive: &Passive) -> Self {
        Self {
            failures: passive.failures.get(),
            cooldown_ms: u64::try_from(passive.cooldown.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// One address. Aligned to its own cache lines so the counters written per
/// request do not bounce a neighbour's line between cores.
#[repr(align(128))]
pub(crate) struct Endpoint {
    in_flight: AtomicUsize,
    failures: AtomicU64,
    /// Consecutive request failures (passive health).
    consecutive: AtomicU32,
    /// Milliseconds since `epoch` when a passive ejection ends; 0 = not ejected.
    ejected_until: AtomicU64,
    /// Milliseconds since `epoch` of the last failure (request or check); 0 = never.
    last_failure: AtomicU64,
    /// Taken down by active checks.
    down: AtomicBool,
    epoch: Instant,
    address: SocketAddr,
    weight: u32,
    /// `ip:port`, cloned into a request's URI (a reference count, no copy).
    authority: Authority,
    /// `ip:port` as a Host header, for HTTP/1 requests that came without one.
    host: HeaderValue,
    /// This address's pooled connections.
    client: UpstreamClient,
}

impl Endpoint {
    pub(crate) fn new(
        address: SocketAddr,
        weight: u32,
        epoch: Instant,
        client: UpstreamClient,
    ) -> Self {
        let authority = Authority::from_maybe_shared(Bytes::from(address.to_string()))
            .unwrap_or_else(|_| Authority::from_static("invalid"));
        let host = HeaderValue::from_str(authority.as_str())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        Self {
            in_flight: AtomicUsize::new(0),
            failures: AtomicU64::new(0),
            consecutive: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            last_failure: AtomicU64::new(0),
            down: AtomicBool::new(false),
            epoch,
            address,
            weight,
            authority,
            host,
            client,
        }
    }

    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    pub(crate) fn weight(&self) -> u32 {
        self.weight
    }

    pub(crate) fn authority(&self) -> &Authority {
        &self.authority
    }

    /// `ip:port` as a Host header value.
    pub(crate) fn host(&self) -> &HeaderValue {
        &self.host
    }

    pub(crate) fn client(&self) -> &UpstreamClient {
        &self.client
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Relaxed)
    }

    /// Weight above 0, not down, not ejected. Reads the clock only while an
    /// ejection is pending.
    #[inline]
    pub(crate) fn is_available(&self) -> bool {
        if self.weight == 0 || self.down.load(Relaxed) {
            return false;
        }
        let until = self.ejected_until.load(Relaxed);
        until == 0 || self.ejection_over(until)
    }

    #[cold]
    #[inline(never)]
    fn ejection_over(&self, until: u64) -> bool {
        if self.now_ms() < until {
            return false;
        }
        // Eligible again. The consecutive count stays at the threshold, so one
        // more failure ejects it again at once (a half-open probe).
        let _ = self
            .ejected_until
            .compare_exchange(until, 0, Relaxed, Relaxed);
        true
    }

    /// Counts a request in flight until the guard drops.
    #[inline]
    pub(crate) fn begin(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Relaxed);
        InFlight(&self.in_flight)
    }

    /// A response head arrived: the run of failures ends.
    #[inline]
    pub(crate) fn record_success(&self) {
        // Read first: the common case writes nothing.
        if self.consecutive.load(Relaxed) != 0 {
            self.consecutive.store(0, Relaxed);
            self.ejected_until.store(0, Relaxed);
        }
    }

    /// A request failed before its response head.
    #[cold]
    pub(crate) fn record_failure(&self, passive: Option<PassivePolicy>) {
        self.failures.fetch_add(1, Relaxed);
        let now = self.now_ms();
        self.last_failure.store(now, Relaxed);
        let Some(passive) = passive else { return };
        let run = self.consecutive.fetch_add(1, Relaxed).saturating_add(1);
        if run >= passive.failures {
            let until = now.saturating_add(passive.cooldown_ms).max(1);
            if self.ejected_until.swap(until, Relaxed) == 0 {
                tracing::warn!(
                    address = %self.address,
                    failures = run,
                    "upstream address ejected after consecutive failures"
                );
            }
        }
    }

    /// An active check failed (not counted in `failures`, which counts requests).
    pub(crate) fn record_check_failure(&self) {
        self.last_failure.store(self.now_ms(), Relaxed);
    }

    /// Active checks take the address down (`true`) or bring it back, which
    /// also ends a passive ejection.
    pub(crate) fn set_down(&self, down: bool) {
        self.down.store(down, Relaxed);
        if !down {
            self.consecutive.store(0, Relaxed);
            self.ejected_until.store(0, Relaxed);
        }
    }

    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Relaxed)
    }

    /// The end of the current passive ejection (0 = none), to notice a new one.
    pub(crate) fn ejection(&self) -> u64 {
        self.ejected_until.load(Relaxed)
    }

    pub(crate) fn last_failure(&self) -> u64 {
        self.last_failure.load(Relaxed)
    }

    pub(crate) fn state(&self) -> EndpointState {
        if self.down.load(Relaxed) {
            return EndpointState::Down;
        }
        let until = self.ejected_until.load(Relaxed);
        if until != 0 && self.now_ms() < until {
            EndpointState::Ejected
        } else {
            EndpointState::Healthy
        }
    }

    pub(crate) fn stats(&self) -> EndpointStats {
        EndpointStats {
            address: self.address,
            weight: self.weight,
            in_flight: self.in_flight(),
            failures: self.failures.load(Relaxed),
            state: self.state(),
        }
    }

    fn now_ms(&self) -> u64 {
        millis(self.epoch.elapsed())
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Decrements an address's in-flight count when dropped (response head, error
/// or cancellation).
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
