//! Finding and opening a file under the root. Blocking: runs in `spawn_blocking`.
//!
//! Every path is canonicalised and must start with the canonical root, so neither a
//! crafted path nor a symlink reaches outside it: whatever fails that check is 404,
//! the same answer as a missing file, so nothing outside the root can be probed.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;

use super::cache::{CachedFile, MAX_CACHED_FILE};
use super::listing;
use super::representation::Representation;

/// What a relative path names.
pub(super) enum Located {
    /// A regular file (possibly a directory's index).
    File {
        /// The file's canonical path, inside the root.
        path: PathBuf,
        /// The name as requested, whose extension gives the Content-Type.
        name: PathBuf,
        metadata: fs::Metadata,
    },
    /// A directory without a usable index.
    Dir(PathBuf),
}

/// What a request gets from the disk.
pub(super) enum Loaded {
    /// A small file, read whole, to cache.
    Small(Arc<CachedFile>),
    /// A larger file, opened, to stream.
    Large(Box<Representation>, File),
    /// A directory listing, as HTML.
    Listing(Bytes),
}

/// Resolves `rel` under `root` (canonical), following an `index` for a directory.
pub(super) fn locate(root: &Path, rel: &str, index: Option<&str>) -> Result<Located, StatusCode> {
    // `rel` comes from `request_path::relative`; this is defence in depth.
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(StatusCode::NOT_FOUND);
    }
    let name = root.join(rel);
    let path = inside(root, &name)?;
    let metadata = fs::metadata(&path).map_err(|_| StatusCode::NOT_FOUND)?;
    if metadata.is_file() {
        return Ok(Located::File {
            path,
            name,
            metadata,
        });
    }
    if !metadata.is_dir() {
        // FIFOs, sockets, devices: opening some would block.
        return Err(StatusCode::NOT_FOUND);
    }
    if let Some(index) = index {
        let name = path.join(index);
        if let Ok(index_path) = inside(root, &name)
            && let Ok(metadata) = fs::metadata(&index_path)
            && metadata.is_file()
        {
            return Ok(Located::File {
                path: index_path,
                name,
                metadata,
            });
        }
    }
    Ok(Located::Dir(path))
}

/// Reads a small file, opens a large one, or lists a directory (when `listing_base`,
/// the request path the listing's links start with, is given).
pub(super) fn load(
    root: &Path,
    rel: &str,
    index: Option<&str>,
    listing_base: Option<&str>,
    now_ms: u64,
) -> Result<Loaded, StatusCode> {
    match locate(root, rel, index)? {
        Located::File { path, name, .. } => {
            let mut file = File::open(&path).map_err(|e| io_status(&e))?;
            // The opened file's own metadata, in case it changed since `locate`.
            let metadata = file.metadata().map_err(|e| io_status(&e))?;
            if !metadata.is_file() {
                return Err(StatusCode::NOT_FOUND);
            }
            let mtime = metadata.modified().map_err(|e| io_status(&e))?;
            if metadata.len() > MAX_CACHED_FILE {
                let representation = Representation::new(&name, metadata.len(), mtime);
                return Ok(Loaded::Large(Box::new(representation), file));
            }
            let mut bytes = Vec::with_capacity(metadata.len().try_into().unwrap_or(0));
            (&mut file)
                .take(metadata.len())
                .read_to_end(&mut bytes)
                .map_err(|e| io_status(&e))?;
            let representation = Representation::new(&name, bytes.len() as u64, mtime);
            let cached = CachedFile::new(representation, Bytes::from(bytes), path, now_ms);
            Ok(Loaded::Small(Arc::new(cached)))
        }
        Located::Dir(path) => {
            let base = listing_base.ok_or(StatusCode::NOT_FOUND)?;
            listing::render(&path, base)
                .map(Loaded::Listing)
                .map_err(|e| io_status(&e))
        }
    }
}

/// Whether the file a cache entry was read from is still there, unchanged.
pub(super) fn unchanged(root: &Path, rel: &str, index: Option<&str>, cached: &CachedFile) -> bool {
    let Ok(Located::File { path, metadata, .. }) = locate(root, rel, index) else {
        return false;
    };
    path == cached.path
        && metadata.len() == cached.representation.len
        && metadata
            .modified()
            .is_ok_and(|mtime| mtime == cached.representation.mtime)
}

/// `path` canonicalised, if that lies inside `root`; 404 otherwise or if it fails.
fn inside(root: &Path, path: &Path) -> Result<PathBuf, StatusCode> {
    let canonical = fs::canonicalize(path).map_err(|_| StatusCode::NOT_FOUND)?;
    if canonical.starts_with(root) {
        Ok(canonical)
    } else {
        Err(StatusCode::NOT_FOUND)
    }
}

/// A file inside the root that cannot be opened or read: permission denied is 403,
/// missing (it vanished since `locate`) 404, anything else 500.
fn io_status(error: &io::Error) -> StatusCode {
    match error.kind() {
        io::ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        io::ErrorKind::NotFound => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
