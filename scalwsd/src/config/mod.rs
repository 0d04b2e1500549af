//! The configuration file: parse, check everything, and build the typed pieces
//! the library crates take. Nothing here binds a socket.
//!
//! Checks run to the end and report every error they find (a YAML syntax or
//! type error stops the parse, so that one comes alone).

mod compile;
mod error;
mod parse;
mod schema;
mod units;
mod upstreams;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[cfg(feature = "cache")]
use scalws_cache::{Cache, CacheOptions};
use scalws_core::{Limits, ListenerSpec};
use scalws_proxy::Gateway;
use scalws_proxy::metrics::Metrics;

pub use error::{ConfigError, ConfigErrors};
pub use units::{parse_duration, parse_size};

/// The embedded demo served when no file is given and `scalws.yaml` is absent.
pub const DEFAULT_CONFIG: &str = include_str!("default.yaml");

/// How more than one worker shares the work (`scheduler`, `--scheduler`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheduler {
    /// One current-thread event loop per worker, each with its own
    /// `SO_REUSEPORT` sockets: a connection stays on the worker that
    /// accepted it (nginx's and Envoy's model).
    #[default]
    PerWorker,
    /// tokio's multi-thread scheduler with `workers` threads: any thread
    /// runs any connection's next step, and idle threads steal work.
    WorkStealing,
}

impl Scheduler {
    /// The names the file and the command line take.
    pub const NAMES: [&str; 2] = ["per_worker", "work_stealing"];

    /// The scheduler named `name`, as the file spells it.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "per_worker" => Some(Self::PerWorker),
            "work_stealing" => Some(Self::WorkStealing),
            _ => None,
        }
    }
}

/// A checked configuration, ready to serve.
#[derive(Debug)]
pub struct Config {
    /// `workers`, if the file sets it.
    pub workers: Option<usize>,
    /// `scheduler`, if the file sets it.
    pub scheduler: Option<Scheduler>,
    /// The connection and request limits.
    pub limits: Limits,
    /// The listeners to bind, in file order.
    pub listeners: Vec<ListenerSpec>,
    /// The service that answers every listener.
    pub gateway: Gateway,
    /// Problems that do not stop serving (an expired certificate), for `--check`.
    pub warnings: Vec<String>,
    /// Where the admin listener binds, if anywhere.
    pub admin: Option<SocketAddr>,
    /// Where access log lines go.
    pub access_log: AccessLogTarget,
    /// SHA-256 of the file's text, in hex: which configuration is loaded.
    pub hash: String,
    /// What the next configuration loaded in this process may keep.
    pub carried: Carried,
}

/// `access_log:` in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// `off` (the default): no access log.
    #[default]
    Off,
    /// `stdout`: one JSON line per request on standard output.
    Stdout,
    /// A file path: appended to, reopened on SIGUSR1.
    File(PathBuf),
}

/// What one configuration hands to the next one loaded in the same process:
/// upstream pools and response caches (kept when their definitions are
/// unchanged, with their connections, health state and stored responses),
/// and the registry of route counters (so counters survive reloads).
#[derive(Clone, Debug, Default)]
pub struct Carried {
    pub(crate) pools: upstreams::Pools,
    /// Response caches by application name, with their settings.
    #[cfg(feature = "cache")]
    pub(crate) caches: HashMap<String, (CacheOptions, Cache)>,
    /// Route counters, shared by every configuration of the process.
    pub metrics: Metrics,
}

impl Carried {
    /// The response cache of application `name`, for purges and statistics
    /// (feature `cache`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let yaml = "listeners: [{ name: http, address: 127.0.0.1:0 }]\n\
    ///             applications:\n  - { name: shop, domains: ['*'], cache: {}, routes: [{ path: /, proxy: '127.0.0.1:9' }] }\n";
    /// let config = scalwsd::config::load("shop.yaml", yaml, std::path::Path::new(".")).expect("valid");
    /// let cache = config.carried.cache("shop").expect("shop has a cache");
    /// assert_eq!(cache.stats().entries, 0);
    /// assert!(config.carried.cache("other").is_none());
    /// # }
    /// ```
    #[cfg(feature = "cache")]
    pub fn cache(&self, name: &str) -> Option<&Cache> {
        self.caches.get(name).map(|(_, cache)| cache)
    }
}

/// What a configuration may take from outside its text: certificate and key
/// files held in memory (by the path the text names them with; the Kubernetes
/// controller's Secrets), and whether a configuration without listeners is
/// acceptable (a controller that has nothing to serve yet).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// File contents by path; other paths are read from disk.
    pub files: HashMap<PathBuf, Vec<u8>>,
    /// Accept `listeners: []`.
    pub allow_no_listeners: bool,
}

impl Inputs {
    /// The bytes of `path`: from memory if held there, else from disk.
    #[cfg(feature = "tls")]
    pub(crate) fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        match self.files.get(path) {
            Some(bytes) => Ok(bytes.clone()),
            None => std::fs::read(path),
        }
    }
}

/// Parses and checks `text`. `file_name` appears in errors; relative paths in
/// the file (static roots) are resolved against `base_dir`.
pub fn load(file_name: &str, text: &str, base_dir: &Path) -> Result<Config, ConfigErrors> {
    load_after(file_name, text, base_dir, &Carried::default())
}

/// [`load`], keeping from `previous` (what the configuration in use carries)
/// every upstream pool and response cache whose definition is unchanged.
pub fn load_after(
    file_name: &str,
    text: &str,
    base_dir: &Path,
    previous: &Carried,
) -> Result<Config, ConfigErrors> {
    load_with(file_name, text, base_dir, previous, &Inputs::default())
}

/// [`load_after`], with certificate files and other inputs from `inputs`.
pub fn load_with(
    file_name: &str,
    text: &str,
    base_dir: &Path,
    previous: &Carried,
    inputs: &Inputs,
) -> Result<Config, ConfigErrors> {
    let file = parse::parse(file_name, text).map_err(|e| ConfigErrors(vec![e]))?;
    let mut config = compile::compile(file_name, file, base_dir, previous, inputs)?;
    config.hash = sha256_hex(text.as_bytes());
    Ok(config)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest
        .as_ref()
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// Reads and checks a file; relative paths in it are relative to its directory.
pub fn load_file(path: &Path) -> Result<Config, ConfigErrors> {
    load_file_after(path, &Carried::default())
}

/// [`load_file`], keeping what `previous` carries where unchanged (a reload).
pub fn load_file_after(path: &Path, previous: &Carried) -> Result<Config, ConfigErrors> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigErrors(vec![ConfigError {
            file: name.clone(),
            line: 0,
            column: 0,
            path: String::new(),
            message: format!("cannot read the file: {error}"),
        }])
    })?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    load_after(&name, &text, base, previous)
}
