//! # scalwsd
//!
//! The ScalWS binary's library. Always: the YAML configuration ([`config`]:
//! the schema, checks with `FILE:LINE:COLUMN: key.path: message` errors,
//! and the translation into [`scalws_core::Limits`], listeners and a
//! [`scalws_proxy::Gateway`]). With the `binary` feature (default): the
//! command line, `scalwsd explain`, and the process life (bind, serve,
//! reload on SIGHUP or `POST /reload`, the admin listener with Prometheus
//! metrics, the access log, drain on SIGTERM/SIGINT); `main.rs` only calls
//! `run::main`. With `kubernetes` (default): `scalwsd translate` and the
//! controller. With `http3` (default): `http3` listeners.
//!
//! ```
//! use std::path::Path;
//!
//! let yaml = "listeners: [{ name: http, address: 127.0.0.1:0 }]\n\
//!             applications:\n  - { name: a, domains: ['*'], routes: [{ path: /, respond: { body: hi } }] }\n";
//! let config = scalwsd::config::load("inline.yaml", yaml, Path::new(".")).expect("valid");
//! assert_eq!(config.listeners.len(), 1);
//!
//! let bad = "listeners: [{ name: http, adress: 127.0.0.1:0 }]\n";
//! let errors = scalwsd::config::load("bad.yaml", bad, Path::new(".")).unwrap_err();
//! assert_eq!(errors.to_string(), "bad.yaml:1:27: listeners[0].adress: unknown key \"adress\" (did you mean \"address\"?)");
//! ```
#![forbid(unsafe_code)]

#[cfg(feature = "binary")]
mod access_log;
#[cfg(feature = "binary")]
mod admin;
#[cfg(feature = "binary")]
pub mod cli;
pub mod config;
#[cfg(feature = "binary")]
pub mod explain;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
#[cfg(feature = "binary")]
mod metrics;
#[cfg(feature = "binary")]
pub mod run;
#[cfg(feature = "binary")]
mod serve;
