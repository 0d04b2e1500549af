//! What a cache is built with.

use std::time::Duration;

/// The settings of a [`Cache`](crate::Cache).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    /// Total bytes the cache may hold: bodies, headers and keys (64 MiB).
    pub max_size: u64,
    /// Largest body stored, in bytes (1 MiB). Larger responses stream through
    /// uncached, without being buffered.
    pub max_object: u64,
    /// Freshness of a storable response that gives none (no `s-maxage`,
    /// `max-age` or `Expires`). Zero (the default): such responses are not
    /// stored, unless they carry a validator and `no-cache`.
    pub default_ttl: Duration,
    /// How long concurrent requests for a key wait for the one request that
    /// went to the origin before going there themselves (5 s).
    pub coalesce_timeout: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            max_size: 64 << 20,
            max_object: 1 << 20,
            default_ttl: Duration::ZERO,
            coalesce_timeout: scalws_core::coalesce::FOLLOW_TIMEOUT,
        }
    }
}
