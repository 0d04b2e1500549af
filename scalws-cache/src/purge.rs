//! Purging: removing stored responses on demand (the admin listener's
//! `POST /cache/purge`, or any embedder).
//!
//! Every purge removes matching responses of every partition
//! ([`Cache::layer_for`]), so each walks every stored URL (a URL's variants
//! are stored together): a pass over the cache, which is fine for an admin
//! call and never happens on the request path.

use crate::cache::Cache;
use crate::key;

impl Cache {
    /// Removes every response stored for `scheme://host/path_and_query` (all
    /// its `Vary` variants; GET and HEAD share them). `host` may carry a port
    /// and is compared without it, case-insensitively. Returns the number of
    /// responses removed.
    pub fn purge_url(&self, scheme: &str, host: &str, path_and_query: &str) -> u64 {
        let scheme = scheme.to_ascii_lowercase();
        let Some(url) = key::url_key(&scheme, host, path_and_query) else {
            return 0;
        };
        // One key per partition: walk them all.
        self.shared
            .store
            .remove_matching(|key| key::url_part(key) == url)
    }

    /// Removes every response stored for `host` (both schemes). Returns the
    /// number removed.
    pub fn purge_host(&self, host: &str) -> u64 {
        let Some(host) = key::normalize_host(host).map(str::to_ascii_lowercase) else {
            return 0;
        };
        self.shared
            .store
            .remove_matching(|key| key::host_and_path(key).0 == host)
    }

    /// Removes every response stored for `host` (both schemes) whose
    /// path-and-query starts with `path_prefix` (a plain string prefix:
    /// `/img` also matches `/img2`; end it with `/` for a directory).
    /// Returns the number removed.
    pub fn purge_prefix(&self, host: &str, path_prefix: &str) -> u64 {
        let Some(host) = key::normalize_host(host).map(str::to_ascii_lowercase) else {
            return 0;
        };
        self.shared.store.remove_matching(|key| {
            let (h, path) = key::host_and_path(key);
            h == host && path.starts_with(path_prefix)
        })
    }
}
