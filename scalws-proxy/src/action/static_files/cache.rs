//! Small files held in memory, so serving one costs no disk read.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

use super::representation::Representation;

/// Files up to this size are cached; larger ones stream from disk.
pub(super) const MAX_CACHED_FILE: u64 = 64 * 1024;
/// Total bytes of cached files per `static` route.
const CAPACITY: u64 = 64 * 1024 * 1024;
/// An entry is served without looking at the disk for this long after its last check.
const TRUST_FOR_MS: u64 = 1000;
/// What an entry costs beyond its bytes (key, headers, bookkeeping), roughly.
const ENTRY_OVERHEAD: u32 = 1024;

/// A small file's bytes and headers.
#[derive(Debug)]
pub(super) struct CachedFile {
    pub(super) representation: Representation,
    pub(super) bytes: Bytes,
    /// The canonical path read, to tell a recheck that finds another file.
    pub(super) path: PathBuf,
    /// When the disk last agreed with this entry, on `scalws_core::clock`'s
    /// coarse clock (the kernel's tick, 1 to 4 ms old), read on every hit:
    /// `Instant` arithmetic cost about 60 instructions more per hit (a
    /// time-stamp counter read, a checked subtraction and a 128-bit
    /// division), and a second of trust does not need its precision.
    checked_ms: AtomicU64,
}

impl CachedFile {
    pub(super) fn new(
        representation: Representation,
        bytes: Bytes,
        path: PathBuf,
        checked_ms: u64,
    ) -> Self {
        Self {
            representation,
            bytes,
            path,
            checked_ms: AtomicU64::new(checked_ms),
        }
    }
}

/// What the cache says about a path.
pub(super) enum Lookup {
    /// Serve it.
    Fresh(Arc<CachedFile>),
    /// Trusted too long: this request checks the disk, then serves it or drops it.
    Recheck(Arc<CachedFile>),
    /// Not cached.
    Miss,
}

/// The cache of one `static` route, keyed by the path relative to its root.
///
/// Hashed with foldhash (seeded per process) rather than moka's default
/// SipHash, about 190 instructions per lookup of a short path: an entry is
/// made only for a file read from disk, so requests cannot fill the map with
/// keys of their choosing, which is what SipHash's resistance is for.
pub(super) struct FileCache {
    files: moka::sync::Cache<Box<str>, Arc<CachedFile>, foldhash::fast::RandomState>,
    /// The misses being read from disk, by key, each with the signal its
    /// reader gives when it is done (see [`FileCache::join_load`]). An entry
    /// lives as long as one request's read: the map holds at most one per
    /// request in flight.
    loading: Mutex<HashMap<Box<str>, Arc<Notify>, foldhash::fast::RandomState>>,
    /// Reads from disk, counted for the tests.
    #[cfg(test)]
    pub(super) disk_loads: std::sync::atomic::AtomicUsize,
}

/// Who reads a missing file from disk: see [`FileCache::join_load`].
pub(super) enum Flight<'a> {
    /// This request reads it; requests for it meanwhile wait until this
    /// guard is dropped (the read done, or the request gone).
    Lead(Leading<'a>),
    /// Another request is reading it: wait for this, then look again.
    Follow(OwnedNotified),
}

/// The reader's side of a [`Flight`]: dropped, it lets the others go on.
pub(super) struct Leading<'a> {
    cache: &'a FileCache,
    key: &'a str,
    done: Arc<Notify>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.cache.loading().remove(self.key);
        // Every follower registered (made its `OwnedNotified`) under the
        // lock while the key was there, so before this call: none is missed.
        self.done.notify_waiters();
    }
}

impl FileCache {
    pub(super) fn new() -> Self {
        let files = moka::sync::Cache::<Box<str>, Arc<CachedFile>>::builder()
            .max_capacity(CAPACITY)
            .weigher(|key, file| {
                let bytes = file.bytes.len().saturating_add(key.len());
                u32::try_from(bytes)
                    .unwrap_or(u32::MAX)
                    .saturating_add(ENTRY_OVERHEAD)
            })
            .build_with_hasher(foldhash::fast::RandomState::default());
        Self {
            files,
            loading: Mutex::default(),
            #[cfg(test)]
            disk_loads: Default::default(),
        }
    }

    fn loading(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Arc<Notify>, foldhash::fast::RandomState>>
    {
        // The map is consistent at every point a panic could leave it.
        self.loading.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// For a miss: whether this request reads the file or waits for the
    /// request already reading it. Without this, a burst of requests for a
    /// file not yet cached (a cold start, a new deploy) read it once each,
    /// each on a blocking thread of its own: 64 threads for 64 connections.
    /// A lock, but only on a miss; a hit never takes it.
    pub(super) fn join_load<'a>(&'a self, key: &'a str) -> Flight<'a> {
        let mut loading = self.loading();
        if let Some(done) = loading.get(key) {
            return Flight::Follow(done.clone().notified_owned());
        }
        let done = Arc::new(Notify::new());
        loading.insert(key.into(), done.clone());
        Flight::Lead(Leading {
            cache: self,
            key,
            done,
        })
    }

    #[inline]
    pub(super) fn lookup(&self, key: &str) -> Lookup {
        let Some(file) = self.files.get(key) else {
            return Lookup::Miss;
        };
        let now = scalws_core::clock::now_ms();
        let checked = file.checked_ms.load(Ordering::Relaxed);
        if now.saturating_sub(checked) < TRUST_FOR_MS {
            return Lookup::Fresh(file);
        }
        // One request claims the recheck; concurrent ones keep serving the entry,
        // which is within the documented staleness window anyway.
        match file
            .checked_ms
            .compare_exchange(checked, now, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Lookup::Recheck(file),
            Err(_) => Lookup::Fresh(file),
        }
    }

    pub(super) fn insert(&self, key: &str, file: Arc<CachedFile>) {
        self.files.insert(key.into(), file);
    }

    pub(super) fn invalidate(&self, key: &str) {
        self.files.invalidate(key);
    }
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("entries", &self.files.entry_count())
            .field("loading", &self.loading().len())
            .finish()
    }
}
