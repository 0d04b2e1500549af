//! The one error a `static` route can have at build time.

use std::path::PathBuf;

/// The `root` of a `static` route is missing, not a directory, or unreadable.
#[derive(Debug, thiserror::Error)]
#[error("static root {path}: {reason}")]
pub struct InvalidStaticRoot {
    /// The root as configured.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}
