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

use std::path::Path;

use scalws_core::{Limits, ListenerSpec};
use scalws_proxy::Gateway;

pub use error::{ConfigError, ConfigErrors};
pub use units::{parse_duration, parse_size};

/// The embedded demo served when no file is given and `scalws.yaml` is absent.
pub const DEFAULT_CONFIG: &str = include_str!("default.yaml");

/// A checked configuration, ready to serve.
#[derive(Debug)]
pub struct Config {
    /// `workers`, if the file sets it.
    pub workers: Option<usize>,
    /// The connection and request limits.
    pub limits: Limits,
    /// The listeners to bind, in file order.
    pub listeners: Vec<ListenerSpec>,
    /// The service that answers every listener.
    pub gateway: Gateway,
    /// Problems that do not stop serving (an expired certificate), for `--check`.
    pub warnings: Vec<String>,
}

/// Parses and checks `text`. `file_name` appears in errors; relative paths in
/// the file (static roots) are resolved against `base_dir`.
pub fn load(file_name: &str, text: &str, base_dir: &Path) -> Result<Config, ConfigErrors> {
    let file = parse::parse(file_name, text).map_err(|e| ConfigErrors(vec![e]))?;
    compile::compile(file_name, file, base_dir)
}

/// Reads and checks a file; relative paths in it are relative to its directory.
pub fn load_file(path: &Path) -> Result<Config, ConfigErrors> {
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
    load(&name, &text, base)
}
