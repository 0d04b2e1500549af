//! The `static` action: files under a root directory (SPEC section 5).
//!
//! The life of a request, in [`StaticFiles::serve`]:
//!
//! 1. **Method**: GET or HEAD, else 405 with `Allow: GET, HEAD`.
//! 2. **Path** ([`request_path`]): the route's prefix is stripped segment-wise and each
//!    segment percent-decoded once. NUL is 400; an encoded `/`, `.`, `..`, a dotfile
//!    (other than those [`StaticOptions::allow_dotfiles`] names, `.well-known` by default) or
//!    invalid UTF-8 is 404.
//! 3. **Memory** ([`cache`]): a small file (up to 64 KiB; 64 MiB per route in all) is
//!    answered from memory with precomputed headers, no system call.
//! 4. **Disk** ([`resolve`], in `spawn_blocking`): the path is canonicalised and must
//!    stay inside the canonical root (a symlink leaving it is 404, like a missing file);
//!    a directory gives its `index`, else a [`listing`] if enabled, else 404. A small
//!    file is read and cached; a larger one streams in 64 KiB chunks ([`body`]). Of
//!    concurrent requests for a file not cached, one reads it; the others wait for
//!    that read (up to `scalws_core::coalesce::FOLLOW_TIMEOUT`, 5 s), then look in memory again
//!    (`scalws_core::coalesce`, as the response cache does).
//!    Permission denied on a file inside the root is 403.
//! 5. **Response** ([`response`]): `If-None-Match` / `If-Modified-Since` give 304, one
//!    `Range` 206 (416 if unsatisfiable, honoured only if `If-Range` matches); HEAD
//!    gets GET's headers without the body.
//!
//! # Staleness
//!
//! A cached file is trusted for **1 second** after the disk last agreed with it: within
//! that window a change to the file (or its removal) may not be seen. The first request
//! after the window re-checks the file (canonical path, length, mtime) with a few
//! `stat` calls, then serves the entry or drops it and reads the file again. So most
//! hits cost no system call, and a change is visible at most about a second later.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use scalws_proxy::{StaticFiles, StaticOptions};
//!
//! let files = StaticFiles::new(StaticOptions {
//!     root: "/srv/www".into(),
//!     index: Some("index.html".into()),
//!     listing: false,
//!     strip_prefix: "/static".into(),
//!     ..StaticOptions::default()
//! })?;
//! let response = files
//!     .serve(&http::Method::GET, "/static/app.css", &http::HeaderMap::new())
//!     .await;
//! # let _ = response; Ok(()) }
//! ```

mod body;
mod cache;
mod conditional;
mod error;
mod listing;
mod range;
mod representation;
mod request_path;
mod resolve;
mod response;

use std::borrow::Cow;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use scalws_core::Body;
use scalws_core::coalesce::{FOLLOW_TIMEOUT, Role};
use scalws_core::error::error_response;
use scalws_router::normalize_path;

use super::ActionFuture;

use cache::{CachedFile, FileCache, Lookup};
use request_path::Prefix;
use resolve::Loaded;
use response::Content;

pub use error::InvalidStaticRoot;

/// Options of one `static` route.
#[derive(Clone, Debug)]
pub struct StaticOptions {
    /// The directory served.
    pub root: PathBuf,
    /// The file served for a directory, e.g. `index.html`; `None` for none.
    pub index: Option<String>,
    /// An HTML listing for a directory without an index.
    pub listing: bool,
    /// A prefix stripped from the path (`"/"` or `""`: nothing) when the
    /// files are served alone, by [`StaticFiles::serve`] or as a `Service`.
    /// As a route's action this is ignored: a prefix route strips its own
    /// prefix, and nothing is stripped on `exact` and `pattern` routes or
    /// when the route rewrites the path.
    pub strip_prefix: String,
    /// Names starting with `.` that may be served (as any segment of the
    /// path). Every other dotfile and dot-directory is 404, as are `.` and
    /// `..`. Default: `.well-known` (RFC 8615: ACME challenges, security.txt).
    pub allow_dotfiles: Vec<String>,
}

impl Default for StaticOptions {
    /// No root yet; `index.html`, no listing, nothing stripped, `.well-known` served.
    fn default() -> Self {
        Self {
            root: PathBuf::new(),
            index: Some("index.html".into()),
            listing: false,
            strip_prefix: String::new(),
            allow_dotfiles: vec![".well-known".into()],
        }
    }
}

/// The `static` action: serves the files under a root. Clones share one cache.
#[derive(Clone)]
pub struct StaticFiles {
    shared: Arc<Shared>,
}

struct Shared {
    /// Canonical.
    root: PathBuf,
    index: Option<Box<str>>,
    listing: bool,
    prefix: Prefix,
    /// Dot-names that may be served.
    dotfiles: Box<[Box<str>]>,
    cache: FileCache,
}

// === impl StaticFiles ===

impl StaticFiles {
    /// Canonicalises `root`; fails if it is missing, not a directory, or unreadable.
    pub fn new(options: StaticOptions) -> Result<Self, InvalidStaticRoot> {
        let invalid = |reason: String| InvalidStaticRoot {
            path: options.root.clone(),
            reason,
        };
        let root = std::fs::canonicalize(&options.root).map_err(|e| invalid(e.to_string()))?;
        if !root.is_dir() {
            return Err(invalid("not a directory".into()));
        }
        std::fs::read_dir(&root).map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            shared: Arc::new(Shared {
                root,
                index: options.index.map(String::into_boxed_str),
                listing: options.listing,
                prefix: Prefix::new(&options.strip_prefix),
                dotfiles: options
                    .allow_dotfiles
                    .into_iter()
                    .map(String::into_boxed_str)
                    .collect(),
                cache: FileCache::new(),
            }),
        })
    }

    /// Answers a request for `path`: the request path after the router's normalisation
    /// (unreserved escapes decoded, dot segments removed), other escapes still in it.
    /// A raw path is safe too: nothing here relies on the router's checks.
    pub async fn serve(&self, method: &Method, path: &str, headers: &HeaderMap) -> Response<Body> {
        match self.answer_from_memory(method, path, headers) {
            Step::Answered(response) => response,
            Step::Disk { head, rel, recheck } => {
                self.answer_from_disk(head, path, &rel, recheck, headers)
                    .await
            }
        }
    }

    /// What can be done without the disk: the method and path checks, and a
    /// fresh cached file's answer. A cache hit needs no future of its own.
    #[inline]
    fn answer_from_memory<'a>(
        &self,
        method: &Method,
        path: &'a str,
        headers: &HeaderMap,
    ) -> Step<'a> {
        let head = match *method {
            Method::GET => false,
            Method::HEAD => true,
            _ => return Step::Answered(response::method_not_allowed()),
        };
        let shared = &*self.shared;
        let Some(rest) = shared.prefix.strip(path) else {
            return Step::Answered(error_response(StatusCode::NOT_FOUND));
        };
        let rel = match request_path::relative(rest, &shared.dotfiles) {
            Ok(rel) => rel,
            Err(status) => return Step::Answered(error_response(status)),
        };
        let recheck = match shared.cache.lookup(&rel) {
            Lookup::Fresh(file) => return Step::Answered(cached(head, headers, &file)),
            Lookup::Recheck(file) => Some(file),
            Lookup::Miss => None,
        };
        Step::Disk { head, rel, recheck }
    }

    /// The rest of [`Self::serve`]: a cached file checked against the disk,
    /// or the file read. Of concurrent requests for a file not cached, the
    /// first reads it and the others wait for it, then look in memory again.
    async fn answer_from_disk(
        &self,
        head: bool,
        path: &str,
        rel: &str,
        recheck: Option<Arc<CachedFile>>,
        headers: &HeaderMap,
    ) -> Response<Body> {
        if let Some(file) = recheck {
            return self.recheck(head, path, rel, &file, headers).await;
        }
        // The leader's outcome is not reported: the followers look in memory
        // again either way.
        let _leading = match self.shared.cache.flights.join(rel) {
            Role::Leader(guard) => guard,
            Role::Follower(waiter) => {
                waiter.wait(FOLLOW_TIMEOUT).await;
                return match self.shared.cache.lookup(rel) {
                    Lookup::Fresh(file) => cached(head, headers, &file),
                    Lookup::Recheck(file) => self.recheck(head, path, rel, &file, headers).await,
                    // Not cached (a large file, a directory, an error), its
                    // reader went away, or it took too long: read as if alone.
                    Lookup::Miss => self.load(head, path, rel, headers).await,
                };
            }
        };
        // The guard goes after the read, which has put a small file in memory.
        self.load(head, path, rel, headers).await
    }

    /// A cached file whose trust ran out, checked against the disk: served,
    /// or dropped and read again.
    async fn recheck(
        &self,
        head: bool,
        path: &str,
        rel: &str,
        file: &Arc<CachedFile>,
        headers: &HeaderMap,
    ) -> Response<Body> {
        if self.unchanged(rel, file).await {
            return cached(head, headers, file);
        }
        self.shared.cache.invalidate(rel);
        self.load(head, path, rel, headers).await
    }

    /// The same files served under `prefix` (stripped from request paths),
    /// with a cache of their own: what a prefix route makes of its action.
    pub(crate) fn mounted_at(&self, prefix: &str) -> Self {
        let shared = &self.shared;
        Self {
            shared: Arc::new(Shared {
                root: shared.root.clone(),
                index: shared.index.clone(),
                listing: shared.listing,
                prefix: Prefix::new(prefix),
                dotfiles: shared.dotfiles.clone(),
                cache: FileCache::new(),
            }),
        }
    }

    /// Serves a request the gateway routed, by its normalised path.
    pub(crate) fn serve_routed(&self, parts: Parts) -> ActionFuture {
        // Normalised again rather than copied out: the gateway already
        // accepted this path, so this cannot fail.
        let Ok(path) = normalize_path(parts.uri.path()) else {
            return ActionFuture::error(StatusCode::BAD_REQUEST);
        };
        let (head, rel, recheck) =
            match self.answer_from_memory(&parts.method, &path, &parts.headers) {
                Step::Answered(response) => return ActionFuture::ready(response),
                Step::Disk { head, rel, recheck } => (head, rel.into_owned(), recheck),
            };
        let path = path.into_owned();
        let files = self.clone();
        ActionFuture::boxed(async move {
            files
                .answer_from_disk(head, &path, &rel, recheck, &parts.headers)
                .await
        })
    }

    /// Whether a cached file still matches the disk.
    async fn unchanged(&self, rel: &str, file: &Arc<CachedFile>) -> bool {
        let (shared, rel, file) = (self.shared.clone(), rel.to_owned(), file.clone());
        tokio::task::spawn_blocking(move || {
            resolve::unchanged(&shared.root, &rel, shared.index.as_deref(), &file)
        })
        .await
        .unwrap_or(false)
    }

    async fn load(&self, head: bool, path: &str, rel: &str, headers: &HeaderMap) -> Response<Body> {
        let shared = self.shared.clone();
        let key = rel.to_owned();
        let listing_base = shared.listing.then(|| path.to_owned());
        #[cfg(test)]
        shared
            .cache
            .disk_loads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let loaded = tokio::task::spawn_blocking(move || {
            let now = scalws_core::clock::now_ms();
            let index = shared.index.as_deref();
            let loaded = resolve::load(&shared.root, &key, index, listing_base.as_deref(), now);
            if let Ok(Loaded::Small(file)) = &loaded {
                shared.cache.insert(&key, file.clone());
            }
            loaded
        })
        .await;
        match loaded {
            Ok(Ok(Loaded::Small(file))) => cached(head, headers, &file),
            Ok(Ok(Loaded::Large(file, handle))) => {
                response::file(head, headers, &file, Content::Disk(handle))
            }
            Ok(Ok(Loaded::Listing(html))) => response::listing(head, html),
            Ok(Err(status)) => error_response(status),
            Err(_) => error_response(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }
}

/// Where [`StaticFiles::answer_from_memory`] left a request.
enum Step<'a> {
    Answered(Response<Body>),
    /// The disk is needed: to recheck a cached file, or to read one.
    Disk {
        head: bool,
        rel: Cow<'a, str>,
        recheck: Option<Arc<CachedFile>>,
    },
}

#[inline]
fn cached(head: bool, headers: &HeaderMap, file: &CachedFile) -> Response<Body> {
    response::file(
        head,
        headers,
        &file.representation,
        Content::Memory(file.bytes.clone()),
    )
}

impl fmt::Debug for StaticFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticFiles")
            .field("root", &self.shared.root)
            .field("index", &self.shared.index)
            .field("listing", &self.shared.listing)
            .field("prefix", &self.shared.prefix)
            .field("allow_dotfiles", &self.shared.dotfiles)
            .field("cache", &self.shared.cache)
            .finish()
    }
}

// === impl Service ===

/// For embedders: serves a request by its URI path.
impl<B> tower::Service<Request<B>> for StaticFiles {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let files = self.clone();
        let (parts, _body) = request.into_parts();
        Box::pin(async move {
            Ok(files
                .serve(&parts.method, parts.uri.path(), &parts.headers)
                .await)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use bytes::Bytes;
    use futures_util::FutureExt;
    use futures_util::future::join_all;
    use http_body_util::BodyExt;

    use super::*;

    /// A root holding `name` with `contents`, and its files (the folder
    /// lives as long as the first).
    fn site(name: &str, contents: &[u8]) -> (tempfile::TempDir, StaticFiles) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(name), contents).unwrap();
        let files = StaticFiles::new(StaticOptions {
            root: dir.path().into(),
            ..StaticOptions::default()
        })
        .unwrap();
        (dir, files)
    }

    async fn body(response: Response<Body>) -> Bytes {
        assert_eq!(response.status(), StatusCode::OK);
        response.into_body().collect().await.unwrap().to_bytes()
    }

    /// `n` GETs of `path` at once: their bodies.
    async fn burst(files: &StaticFiles, path: &str, n: usize) -> Vec<Bytes> {
        let headers = HeaderMap::new();
        let answers = join_all((0..n).map(|_| files.serve(&Method::GET, path, &headers)));
        let answers = tokio::time::timeout(Duration::from_secs(10), answers)
            .await
            .unwrap();
        join_all(answers.into_iter().map(body)).await
    }

    fn disk_loads(files: &StaticFiles) -> usize {
        files.shared.cache.disk_loads.load(Ordering::Relaxed)
    }

    #[tokio::test]
    async fn a_burst_on_a_cold_cache_reads_a_small_file_once() {
        let (_dir, files) = site("a.txt", b"hello");
        for answer in burst(&files, "/a.txt", 32).await {
            assert_eq!(answer, "hello");
        }
        assert_eq!(disk_loads(&files), 1);
        // Cached now: no more reads.
        assert_eq!(burst(&files, "/a.txt", 1).await, ["hello"]);
        assert_eq!(disk_loads(&files), 1);
    }

    #[tokio::test]
    async fn a_burst_for_a_large_file_reads_it_once_per_request() {
        let large = vec![b'x'; cache::MAX_CACHED_FILE as usize + 1];
        let (_dir, files) = site("large.bin", &large);
        for answer in burst(&files, "/large.bin", 8).await {
            assert_eq!(answer.len(), large.len());
        }
        // Each streams from a handle of its own, after the first's open.
        assert_eq!(disk_loads(&files), 8);
    }

    #[tokio::test]
    async fn requests_waiting_for_a_reader_that_went_away_are_answered() {
        let (_dir, files) = site("a.txt", b"hello");
        let headers = HeaderMap::new();
        let mut reader = Box::pin(files.serve(&Method::GET, "/a.txt", &headers));
        assert!(
            (&mut reader).now_or_never().is_none(),
            "the read is under way"
        );
        let mut waiting: Vec<_> = (0..4)
            .map(|_| Box::pin(files.serve(&Method::GET, "/a.txt", &headers)))
            .collect();
        for waiter in &mut waiting {
            assert!(waiter.now_or_never().is_none(), "waits for the reader");
        }
        drop(reader);
        let answers = tokio::time::timeout(Duration::from_secs(10), join_all(waiting))
            .await
            .expect("the waiting requests go on without the reader");
        for answer in answers {
            assert_eq!(body(answer).await, "hello");
        }
    }
}
