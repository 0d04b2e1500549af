//! Small files held in memory, so serving one costs no disk read.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use scalws_core::coalesce::Flights;

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
    /// The misses being read from disk: concurrent requests for one file
    /// not in memory make one read (see [`StaticFiles::answer_from_disk`]).
    ///
    /// [`StaticFiles::answer_from_disk`]: super::StaticFiles
    pub(super) flights: Arc<Flights>,
    /// Reads from disk, counted for the tests.
    #[cfg(test)]
    pub(super) disk_loads: std::sync::atomic::AtomicUsize,
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
            flights: Arc::default(),
            #[cfg(test)]
            disk_loads: Default::default(),
        }
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
            .finish()
    }
}
