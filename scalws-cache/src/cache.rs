//! The cache handle: what an application builds once and shares between the
//! layer that serves from it and the admin calls that purge it.

use std::sync::Arc;

use crate::layer::CacheLayer;
use crate::options::CacheOptions;
use crate::stats::{CacheStats, Counters};
use crate::store::Store;
use scalws_core::coalesce::Flights;

/// A response cache (RFC 9111 shared cache). Cloning it is one reference count;
/// clones share the stored responses.
#[derive(Clone)]
pub struct Cache {
    pub(crate) shared: Arc<Shared>,
}

/// What the handle, its layers and their services share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) options: CacheOptions,
    pub(crate) store: Store,
    pub(crate) flights: Arc<Flights>,
    pub(crate) counters: Arc<Counters>,
}

impl Cache {
    /// An empty cache.
    pub fn new(options: CacheOptions) -> Self {
        let counters = Arc::new(Counters::default());
        Self {
            shared: Arc::new(Shared {
                store: Store::new(options.max_size, Arc::clone(&counters)),
                options,
                flights: Arc::default(),
                counters,
            }),
        }
    }

    /// The tower layer that serves requests from this cache and fills it
    /// from the service it wraps (the origin).
    ///
    /// Its keys are in the default (empty) partition; see [`Cache::layer_for`].
    pub fn layer(&self) -> CacheLayer {
        self.layer_for("")
    }

    /// Like [`Cache::layer`], with keys in `partition` (a route's name, say):
    /// layers of different partitions share the store and its `max_size`, but
    /// never entries, so a route that a header selects or that rewrites the
    /// path cannot answer for another route. Purges remove matching entries
    /// of every partition.
    pub fn layer_for(&self, partition: impl Into<Arc<str>>) -> CacheLayer {
        CacheLayer::new(Arc::clone(&self.shared), partition.into())
    }

    /// The counters now. `bytes_stored` and `entries` lag evictions until
    /// moka's maintenance runs (on its own during traffic, or
    /// [`Cache::run_pending_tasks`]).
    pub fn stats(&self) -> CacheStats {
        self.shared.counters.snapshot()
    }

    /// Runs the store's pending maintenance (size evictions, expirations) now,
    /// so that [`Cache::stats`] is exact. Traffic runs it anyway.
    pub fn run_pending_tasks(&self) {
        self.shared.store.run_pending_tasks();
    }

    /// The options the cache was built with.
    pub fn options(&self) -> &CacheOptions {
        &self.shared.options
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("options", &self.shared.options)
            .field("stats", &self.stats())
            .finish()
    }
}
