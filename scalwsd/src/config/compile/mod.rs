//! From the file as written to the typed pieces: every reference resolved,
//! every value checked, every error located. One file per concept, in the
//! order of the file: `limits.rs` (settings and limits), `listeners.rs`
//! (listeners and certificates), `applications.rs` (applications, domains,
//! caches), `routes.rs` (routes and matches), `actions.rs`, `policies.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::Path;

use http::{HeaderName, HeaderValue, Method, StatusCode};
use scalws_cache::{Cache, CacheOptions};
use scalws_core::tls::{CertificateFiles, TlsCertificates};
use scalws_core::{Limits, ListenerProtocol, ListenerSpec, Scheme};
use scalws_proxy::{
    Action, Application, ApplicationBuilder, Backend, Backends, Gateway, HeaderModifier,
    PathModifier, Proxy, Redirect, Respond, Rewrite, Route, StaticFiles, StaticOptions,
};
use scalws_router::{HostPattern, PathMatch, RouteSpec};
use serde_saphyr::{Location, Spanned};

use super::error::{ConfigErrors, Errors, did_you_mean};
use super::units::DurationValue;
use super::upstreams::Upstreams;
use super::{AccessLogTarget, Carried, Config, Inputs};
use crate::config::schema::{
    ApplicationFile, BackendFile, CacheFile, File, HeadersFile, LimitsFile, ListenerFile,
    ListenerTlsFile, RedirectFile, RewriteFile, RouteFile,
};

mod actions;
mod applications;
mod limits;
mod listeners;
mod policies;
mod routes;

pub(crate) fn compile(
    file_name: &str,
    file: File,
    base_dir: &Path,
    previous: &Carried,
    inputs: &Inputs,
) -> Result<Config, ConfigErrors> {
    let mut errors = Errors::new(file_name);
    let upstreams = Upstreams::compile(&file.upstreams, base_dir, &previous.pools, &mut errors);
    let mut compiler = Compiler {
        previous,
        caches: HashMap::new(),
        errors: &mut errors,
        base_dir,
        inputs,
        upstreams,
        // Set from the first https listener.
        https_port: None,
        certificates: Vec::new(),
        warnings: Vec::new(),
        cache: None,
    };

    let workers = file.workers.as_ref().and_then(|w| {
        if w.value == 0 {
            compiler
                .errors
                .at(&w.referenced, "workers", "must be at least 1");
            None
        } else {
            Some(w.value)
        }
    });
    let admin = file.admin.as_ref().and_then(|admin| {
        admin
            .value
            .parse::<SocketAddr>()
            .map_err(|_| {
                compiler.errors.at(
                    &admin.referenced,
                    "admin",
                    format!(
                        "invalid address \"{}\" (expected IP:PORT, e.g. 127.0.0.1:9901)",
                        admin.value
                    ),
                );
            })
            .ok()
    });
    let access_log = match file.access_log.as_ref() {
        None => AccessLogTarget::Off,
        Some(log) => match log.value.as_str() {
            "off" => AccessLogTarget::Off,
            "stdout" => AccessLogTarget::Stdout,
            "" => {
                compiler.errors.at(
                    &log.referenced,
                    "access_log",
                    "expected off, stdout or a file path",
                );
                AccessLogTarget::Off
            }
            path => AccessLogTarget::File(base_dir.join(path)),
        },
    };
    let limits = compiler.limits(&file.limits);
    if file.listeners.value.is_empty() && !inputs.allow_no_listeners {
        compiler.errors.at(
            &file.listeners.referenced,
            "listeners",
            "at least one listener is needed",
        );
    }
    let listeners = compiler.listeners(&file.listeners.value);
    let names: Vec<&str> = file
        .listeners
        .value
        .iter()
        .map(|l| l.value.name.value.as_str())
        .collect();

    let mut gateway = Gateway::builder().unrouted_metrics(previous.metrics.route("", ""));
    for name in &names {
        gateway = gateway.listener(*name);
    }
    if let Some(port) = compiler.https_port {
        gateway = gateway.https_port(port);
    }
    let mut apps_seen: HashMap<&str, ()> = HashMap::new();
    let mut claimed: HashMap<(String, String), String> = HashMap::new();
    for (i, app) in file.applications.iter().enumerate() {
        let path = format!("applications[{i}]");
        let name = &app.value.name;
        if apps_seen.insert(name.value.as_str(), ()).is_some() {
            compiler.errors.at(
                &name.referenced,
                format!("{path}.name"),
                format!("application name \"{}\" is used twice", name.value),
            );
        }
        if let Some(builder) = compiler.application(&path, &app.value, &names, &mut claimed) {
            gateway = gateway.application(builder);
        }
    }
    let warnings = std::mem::take(&mut compiler.warnings);
    let carried = Carried {
        pools: std::mem::take(&mut compiler.upstreams.pools),
        caches: std::mem::take(&mut compiler.caches),
        metrics: previous.metrics.clone(),
    };
    if !errors.is_empty() {
        return Err(errors.finish());
    }
    let gateway = match gateway.build() {
        Ok(gateway) => gateway,
        Err(error) => {
            // The checks above catch these with positions; this is a backstop.
            errors.at(&Location::UNKNOWN, "applications", error.to_string());
            return Err(errors.finish());
        }
    };
    errors.into_result(Config {
        workers,
        limits,
        listeners,
        gateway,
        warnings,
        admin,
        access_log,
        // Set by `load_after`, which has the text.
        hash: String::new(),
        carried,
    })
}

/// Upper bounds that keep a typo from exhausting memory at start or per request.
const MAX_CONNECTIONS: usize = 1_000_000;
const MAX_HEADERS: usize = 1_000;

/// A listener's protocol before its certificates are loaded.
#[derive(Clone, Copy)]
enum Kind {
    Http,
    Https,
    Http3,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Https => "https",
            Kind::Http3 => "http3",
        }
    }
}

struct Compiler<'a> {
    errors: &'a mut Errors,
    base_dir: &'a Path,
    /// Certificate files held in memory.
    inputs: &'a Inputs,
    /// What the configuration in use carries: pools, caches, counters.
    previous: &'a Carried,
    /// The caches this configuration uses, by application, for the next one.
    caches: HashMap<String, (CacheOptions, Cache)>,
    upstreams: Upstreams,
    /// Where `https_redirect` sends requests: the first https listener's port.
    /// `None` (no https listener) makes `https_redirect: true` an error.
    https_port: Option<u16>,
    /// Certificate sets already loaded, by their files: listeners naming the
    /// same files share one set, except that no two `http3` listeners do
    /// (`true`: an `http3` listener has this one).
    certificates: Vec<(Vec<CertificateFiles>, TlsCertificates, bool)>,
    /// Problems that do not stop the load (expired certificates).
    warnings: Vec<String>,
    /// The response cache of the application being compiled, if it has one.
    cache: Option<Cache>,
}

impl Compiler<'_> {
    /// `value`, reported unless it is in `1..=max` (and clamped, so later checks go on).
    fn bounded(&mut self, value: &Spanned<usize>, max: usize, path: &str) -> usize {
        if !(1..=max).contains(&value.value) {
            self.errors.at(
                &value.referenced,
                path,
                format!("must be between 1 and {max}"),
            );
        }
        value.value.clamp(1, max)
    }

    /// A duration that must not be zero.
    fn positive(&mut self, value: &Spanned<DurationValue>, path: &str) -> std::time::Duration {
        if value.value.0.is_zero() {
            self.errors
                .at(&value.referenced, path, "must be more than 0s");
        }
        value.value.0
    }

    fn errors_len(&self) -> usize {
        self.errors.len()
    }
}

/// Where a route's path is written, and under which key, for errors about it.
fn route_location(route: &RouteFile) -> (Option<Location>, &'static str) {
    if let Some(path) = &route.path {
        return (Some(path.referenced), "path");
    }
    let Some(p) = route.matcher.as_ref().and_then(|m| m.path.as_ref()) else {
        return (None, "match.path");
    };
    let written = [
        (&p.value.exact, "match.path.exact"),
        (&p.value.prefix, "match.path.prefix"),
        (&p.value.pattern, "match.path.pattern"),
    ]
    .into_iter()
    .find_map(|(v, key)| v.as_ref().map(|v| (v.referenced, key)));
    match written {
        Some((at, key)) => (Some(at), key),
        None => (Some(p.referenced), "match.path"),
    }
}
