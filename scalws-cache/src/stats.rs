//! Counters: what the cache did, for metrics and tests.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// A snapshot of a cache's counters.
///
/// Every GET or HEAD request the cache sees counts once in exactly one of
/// `hits`, `misses`, `stale_served` and `bypasses`; every other request counts
/// in `bypasses`. So `hits + misses + stale_served + bypasses` is the number of
/// requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Answered from a stored response: fresh, or confirmed by the origin with
    /// a 304 to a conditional request, or stored meanwhile by a concurrent
    /// request this one waited for.
    pub hits: u64,
    /// Sent to the origin for a full response (nothing usable stored, or the
    /// origin answered a revalidation with a new response or an error).
    pub misses: u64,
    /// Answered from a stale stored response: `stale-while-revalidate`,
    /// `stale-if-error`, or a request's `max-stale`.
    pub stale_served: u64,
    /// Conditional requests sent to the origin to revalidate a stored
    /// response (in the foreground or in the background).
    pub revalidations: u64,
    /// Bytes held now (bodies, headers, keys), as the size bound counts them.
    pub bytes_stored: u64,
    /// Responses held now (each `Vary` variant counts).
    pub entries: u64,
    /// Full responses written into the cache (new or replacing).
    pub stores: u64,
    /// Requests passed through without consulting the cache: methods other
    /// than GET and HEAD, requests with `Cache-Control: no-store`, requests
    /// without a usable host.
    pub bypasses: u64,
}

/// The live counters behind [`CacheStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) stale_served: AtomicU64,
    pub(crate) revalidations: AtomicU64,
    pub(crate) stores: AtomicU64,
    pub(crate) bypasses: AtomicU64,
    // Signed: an eviction may be noted just before the insert it undoes.
    bytes: AtomicI64,
    entries: AtomicI64,
}

impl Counters {
    #[inline]
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    /// Bytes held now, as the size bound counts them.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed).max(0).unsigned_abs()
    }

    /// Notes `entries` responses of `bytes` coming in (negative: going out).
    pub(crate) fn resident(&self, entries: i64, bytes: i64) {
        self.entries.fetch_add(entries, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            stale_served: self.stale_served.load(Relaxed),
            revalidations: self.revalidations.load(Relaxed),
            bytes_stored: self.bytes.load(Relaxed).max(0).unsigned_abs(),
            entries: self.entries.load(Relaxed).max(0).unsigned_abs(),
            stores: self.stores.load(Relaxed),
            bypasses: self.bypasses.load(Relaxed),
        }
    }
}
