//! Where stored responses live: a moka cache from primary key to the
//! responses stored for that URL (one per `Vary` variant), bounded by bytes.
//!
//! Keeping a URL's variants together makes purging a URL one removal and
//! finding a variant one lookup plus a short scan. Entries that cannot be
//! revalidated (no validator) expire on their own when they are of no more use;
//! the others stay until the size bound evicts them (moka's TinyLFU).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use moka::Expiry;
use moka::ops::compute::Op;
use moka::sync::Cache as Moka;

use crate::entry::Entry;
use crate::stats::Counters;

/// At most this many variants per URL; the oldest go first.
const MAX_VARIANTS: usize = 32;

/// The responses stored for one URL, newest first.
#[derive(Debug)]
pub(crate) struct Resource {
    variants: Box<[Arc<Entry>]>,
    weight: u32,
    useful_for: Option<Duration>,
}

impl Resource {
    fn new(key: &str, variants: Vec<Arc<Entry>>, now: Instant) -> Self {
        let weight = key.len() + variants.iter().map(|v| v.weight()).sum::<usize>();
        let mut useful_for = Some(Duration::ZERO);
        for v in &variants {
            useful_for = match (useful_for, v.useful_for(now)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        Self {
            variants: variants.into_boxed_slice(),
            weight: u32::try_from(weight).unwrap_or(u32::MAX),
            useful_for,
        }
    }

    fn entries(&self) -> i64 {
        i64::try_from(self.variants.len()).unwrap_or(i64::MAX)
    }
}

struct UsefulLife;

impl Expiry<String, Arc<Resource>> for UsefulLife {
    fn expire_after_create(
        &self,
        _: &String,
        value: &Arc<Resource>,
        _: Instant,
    ) -> Option<Duration> {
        value.useful_for
    }

    fn expire_after_update(
        &self,
        _: &String,
        value: &Arc<Resource>,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        value.useful_for
    }
}

/// The stored responses, and the counters of what they hold.
pub(crate) struct Store {
    cache: Moka<String, Arc<Resource>>,
    counters: Arc<Counters>,
    max_size: u64,
    /// An insert is running moka's maintenance.
    maintaining: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// A store of at most `max_size` bytes, counting into `counters`.
    pub(crate) fn new(max_size: u64, counters: Arc<Counters>) -> Self {
        let out = Arc::clone(&counters);
        let cache = Moka::builder()
            .max_capacity(max_size)
            .weigher(|_: &String, r: &Arc<Resource>| r.weight)
            .expire_after(UsefulLife)
            // Every way out (replaced, evicted, expired, removed) comes through here.
            .eviction_listener(move |_, r: Arc<Resource>, _| {
                out.resident(-r.entries(), -i64::from(r.weight));
            })
            .build();
        Self {
            cache,
            counters,
            max_size,
            maintaining: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The stored response for `key` that a request with `request` headers selects.
    #[inline]
    pub(crate) fn lookup(&self, key: &str, request: &HeaderMap) -> Option<Arc<Entry>> {
        let resource = self.cache.get(key)?;
        resource
            .variants
            .iter()
            .find(|v| v.vary.matches(request))
            .cloned()
    }

    /// Stores `entry` under `key`, replacing the variant with the same secondary key.
    pub(crate) fn insert(&self, key: String, entry: Arc<Entry>) {
        let counters = &self.counters;
        let key_for_weight = key.clone();
        self.cache.entry(key).and_compute_with(|old| {
            let mut variants = vec![Arc::clone(&entry)];
            if let Some(old) = old {
                variants.extend(
                    old.value()
                        .variants
                        .iter()
                        .filter(|v| v.vary != entry.vary)
                        .take(MAX_VARIANTS - 1)
                        .cloned(),
                );
            }
            let resource = Resource::new(&key_for_weight, variants, Instant::now());
            counters.resident(resource.entries(), i64::from(resource.weight));
            Op::Put(Arc::new(resource))
        });
        // moka evicts for size in its maintenance, which lags a burst of
        // inserts: run it now when the bound is passed, so the store never
        // stays over `max_size` (only between this insert and its eviction).
        if self.counters.bytes() > self.max_size
            && !self
                .maintaining
                .swap(true, std::sync::atomic::Ordering::Acquire)
        {
            // One caller runs it; concurrent inserts go on rather than queue
            // on moka's maintenance lock.
            self.cache.run_pending_tasks();
            self.maintaining
                .store(false, std::sync::atomic::Ordering::Release);
        }
    }

    /// Removes every variant stored for `key`; returns how many there were.
    pub(crate) fn remove(&self, key: &str) -> u64 {
        self.cache
            .remove(key)
            .map_or(0, |r| r.variants.len() as u64)
    }

    /// Removes every URL whose key satisfies `select`; returns the responses removed.
    /// Walks the whole cache: for purges, not for requests.
    pub(crate) fn remove_matching(&self, select: impl Fn(&str) -> bool) -> u64 {
        let keys: Vec<Arc<String>> = self
            .cache
            .iter()
            .filter(|(key, _)| select(key))
            .map(|(key, _)| key)
            .collect();
        keys.iter().map(|key| self.remove(key)).sum()
    }

    /// Runs moka's pending maintenance (evictions, expirations) now.
    pub(crate) fn run_pending_tasks(&self) {
        self.cache.run_pending_tasks();
    }
}
