//! The YAML file as written: serde types that mirror `docs/configuration.md`.
//!
//! Every struct denies unknown keys. Values that later checks may reject are
//! `Spanned`, so an error can point at their line and column.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::units::{DurationValue, SizeValue};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) workers: Option<Spanned<usize>>,
    pub(super) scheduler: Option<Spanned<String>>,
    pub(super) admin: Option<Spanned<String>>,
    pub(super) access_log: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) limits: LimitsFile,
    pub(super) listeners: Spanned<Vec<Spanned<ListenerFile>>>,
    #[serde(default)]
    pub(super) upstreams: BTreeMap<String, Spanned<UpstreamFile>>,
    #[serde(default)]
    pub(super) applications: Vec<Spanned<ApplicationFile>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub(super) max_connections: Option<Spanned<usize>>,
    pub(super) header_read_timeout: Option<Spanned<DurationValue>>,
    pub(super) keepalive_timeout: Option<Spanned<DurationValue>>,
    pub(super) max_header_bytes: Option<Spanned<SizeValue>>,
    pub(super) max_headers: Option<Spanned<usize>>,
    pub(super) h2_max_concurrent_streams: Option<Spanned<u32>>,
    pub(super) max_request_body: Option<Spanned<SizeValue>>,
    pub(super) drain_timeout: Option<Spanned<DurationValue>>,
    pub(super) tunnel_idle_timeout: Option<Spanned<DurationValue>>,
    pub(super) send_timeout: Option<Spanned<DurationValue>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListenerFile {
    pub(super) name: Spanned<String>,
    pub(super) address: Spanned<String>,
    pub(super) protocol: Option<Spanned<String>>,
    pub(super) tls: Option<Spanned<ListenerTlsFile>>,
}

// Parsed even when the part is not built, so a file using it gets a
// located "not built" error rather than an unknown-field one.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListenerTlsFile {
    pub(super) certificates: Vec<Spanned<CertificateFile>>,
    /// `refuse` (the default) or `default`.
    pub(super) unknown_sni: Option<Spanned<String>>,
}

#[cfg_attr(not(feature = "tls"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CertificateFile {
    pub(super) cert: Spanned<String>,
    pub(super) key: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ApplicationFile {
    pub(super) name: Spanned<String>,
    pub(super) domains: Vec<Spanned<String>>,
    pub(super) listeners: Option<Vec<Spanned<String>>>,
    pub(super) https_redirect: Option<Spanned<bool>>,
    pub(super) cache: Option<Spanned<CacheFile>>,
    #[serde(default)]
    pub(super) routes: Vec<Spanned<RouteFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteFile {
    /// Shorthand for `match.path.prefix`.
    pub(super) path: Option<Spanned<String>>,
    #[serde(rename = "match")]
    pub(super) matcher: Option<MatchFile>,

    pub(super) respond: Option<Spanned<RespondFile>>,
    #[serde(rename = "static")]
    pub(super) static_files: Option<Spanned<StaticFile>>,
    pub(super) proxy: Option<Spanned<String>>,
    pub(super) backends: Option<Spanned<Vec<Spanned<BackendFile>>>>,
    pub(super) redirect: Option<Spanned<RedirectFile>>,

    pub(super) https_redirect: Option<Spanned<bool>>,
    pub(super) rewrite: Option<Spanned<RewriteFile>>,
    pub(super) request_headers: Option<Spanned<HeadersFile>>,
    pub(super) response_headers: Option<Spanned<HeadersFile>>,
    pub(super) timeout: Option<Spanned<DurationValue>>,
    pub(super) cache: Option<Spanned<bool>>,
}

/// `redirect: { scheme, host, port, path | prefix, status }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RedirectFile {
    pub(super) scheme: Option<Spanned<String>>,
    pub(super) host: Option<Spanned<String>>,
    pub(super) port: Option<Spanned<u32>>,
    pub(super) path: Option<Spanned<String>>,
    pub(super) prefix: Option<Spanned<String>>,
    pub(super) status: Option<Spanned<u16>>,
}

/// `rewrite: { path | prefix, host }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RewriteFile {
    pub(super) path: Option<Spanned<String>>,
    pub(super) prefix: Option<Spanned<String>>,
    pub(super) host: Option<Spanned<String>>,
}

/// `request_headers` / `response_headers: { set: {name: value}, add: {name: value}, remove: [name] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HeadersFile {
    #[serde(default)]
    pub(super) set: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub(super) add: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub(super) remove: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MatchFile {
    pub(super) path: Option<Spanned<PathFile>>,
    pub(super) methods: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub(super) query: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PathFile {
    pub(super) exact: Option<Spanned<String>>,
    pub(super) prefix: Option<Spanned<String>>,
    pub(super) pattern: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RespondFile {
    pub(super) status: Option<Spanned<u16>>,
    #[serde(default)]
    pub(super) body: String,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, Spanned<String>>,
}

// Parsed even when the part is not built, so a file using it gets a
// located "not built" error rather than an unknown-field one.
#[cfg_attr(not(feature = "static-files"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StaticFile {
    pub(super) root: Spanned<String>,
    pub(super) index: Option<String>,
    #[serde(default)]
    pub(super) listing: bool,
    /// Dot-names that may be served; absent: `.well-known` only.
    pub(super) allow_dotfiles: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BackendFile {
    pub(super) proxy: Option<Spanned<String>>,
    pub(super) status: Option<Spanned<u16>>,
    pub(super) weight: Spanned<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UpstreamFile {
    pub(super) addresses: Spanned<Vec<Spanned<AddressFile>>>,
    pub(super) balance: Option<Spanned<String>>,
    pub(super) hash_header: Option<Spanned<String>>,
    pub(super) protocol: Option<Spanned<String>>,
    pub(super) tls: Option<UpstreamTlsFile>,
    pub(super) connect_timeout: Option<Spanned<DurationValue>>,
    pub(super) request_timeout: Option<Spanned<DurationValue>>,
    pub(super) idle_timeout: Option<Spanned<DurationValue>>,
    pub(super) max_idle_per_address: Option<Spanned<usize>>,
    pub(super) retries: Option<Spanned<u32>>,
    pub(super) health_check: Option<HealthCheckFile>,
    pub(super) passive: Option<PassiveFile>,
}

/// `127.0.0.1:9001` or `{ address: 127.0.0.1:9001, weight: 3 }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum AddressFile {
    Plain(String),
    Weighted(WeightedAddressFile),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WeightedAddressFile {
    pub(super) address: String,
    #[serde(default = "one")]
    pub(super) weight: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UpstreamTlsFile {
    pub(super) sni: Option<Spanned<String>>,
    pub(super) ca: Option<Spanned<String>>,
    pub(super) verify: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HealthCheckFile {
    pub(super) path: Spanned<String>,
    pub(super) interval: Option<Spanned<DurationValue>>,
    pub(super) timeout: Option<Spanned<DurationValue>>,
    pub(super) unhealthy_after: Option<Spanned<u32>>,
    pub(super) healthy_after: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PassiveFile {
    pub(super) failures: Option<Spanned<u32>>,
    pub(super) cooldown: Option<Spanned<DurationValue>>,
}

// Parsed even when the part is not built, so a file using it gets a
// located "not built" error rather than an unknown-field one.
#[cfg_attr(not(feature = "cache"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CacheFile {
    pub(super) max_size: Option<Spanned<SizeValue>>,
    pub(super) max_object: Option<Spanned<SizeValue>>,
    pub(super) default_ttl: Option<Spanned<DurationValue>>,
}
