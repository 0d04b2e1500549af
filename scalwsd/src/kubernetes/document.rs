//! The configuration the translation produces, as the YAML file would say it.
//!
//! These types serialize to exactly the schema of `docs/configuration.md`, so
//! `scalwsd translate` prints a file that `scalwsd --check` reads, and the
//! controller loads what it translates through the same checks as a file.

use std::collections::BTreeMap;

use serde::Serialize;

/// A whole configuration file.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Document {
    /// The listeners, one per Gateway port (and the Ingress ports in use).
    pub listeners: Vec<Listener>,
    /// Upstream pools, one per Service port with ready endpoints.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub upstreams: BTreeMap<String, Upstream>,
    /// One application per listener and hostname.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<Application>,
}

/// `listeners[]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Listener {
    /// `http-PORT` or `https-PORT`, PORT being the port clients see.
    pub name: String,
    /// Where the socket binds.
    pub address: String,
    /// `http` or `https`.
    pub protocol: &'static str,
    /// The certificates of an `https` listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
}

/// `listeners[].tls`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListenerTls {
    /// Certificate and key files, chosen by SNI; the first is the default.
    pub certificates: Vec<CertificatePair>,
}

/// `listeners[].tls.certificates[]`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CertificatePair {
    /// The chain's PEM file.
    pub cert: String,
    /// The key's PEM file.
    pub key: String,
}

/// `upstreams.NAME`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Upstream {
    /// `IP:PORT` of every ready endpoint.
    pub addresses: Vec<String>,
}

/// `applications[]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Application {
    /// `LISTENER HOST`: unique, and says where it answers.
    pub name: String,
    /// One domain pattern.
    pub domains: Vec<String>,
    /// The one listener it answers on.
    pub listeners: Vec<String>,
    /// In precedence order for ties (the router orders by specificity first).
    pub routes: Vec<Route>,
}

/// `applications[].routes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Route {
    /// The conditions.
    #[serde(rename = "match")]
    pub matcher: Match,
    /// A fixed answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub respond: Option<Respond>,
    /// One upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// A weighted split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<Backend>>,
    /// A redirect answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Redirect>,
    /// Path and host changes before the action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Rewrite>,
    /// Request header changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<Headers>,
    /// Response header changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<Headers>,
    /// `timeouts.request`, as `NNNms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The resource this route comes from (not part of the file).
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// Which resource a route was made from, to report problems found later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// `HTTPRoute` or `Ingress`.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Origin {
    /// The origin of a route made from `kind` `meta`.
    pub(crate) fn of(
        kind: &'static str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Self {
        Self {
            kind,
            namespace: meta
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_owned()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

/// `routes[].match`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Match {
    /// Exactly one kind.
    pub path: PathMatch,
    /// One method, when the rule names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
    /// Exact header values.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Exact query parameter values.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
}

/// `match.path`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PathMatch {
    /// Whole segments.
    Prefix(String),
    /// The path alone.
    Exact(String),
}

impl Default for PathMatch {
    fn default() -> Self {
        Self::Prefix("/".to_owned())
    }
}

/// `respond`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Respond {
    /// The status.
    pub status: u16,
    /// A short plain-text body.
    pub body: String,
}

impl Respond {
    /// `status` with its reason phrase as the body, as ScalWS's own errors say it.
    pub fn status(status: u16) -> Self {
        let reason = http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("error")
            .to_ascii_lowercase();
        Self {
            status,
            body: format!("{reason}\n"),
        }
    }
}

/// `backends[]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Backend {
    /// An upstream name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// A fixed status share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Its share.
    pub weight: u32,
}

/// `redirect`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Redirect {
    /// `http` or `https`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// The new host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The new port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The whole new path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The new prefix in place of the matched one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// 301, 302, 303, 307 or 308.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// `rewrite`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rewrite {
    /// The whole new path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The new prefix in place of the matched one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The new Host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// `request_headers` / `response_headers`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Headers {
    /// Replace.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Append.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Remove.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl Headers {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}
