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
#[cfg(feature = "cache")]
use scalws_cache::{Cache, CacheOptions};
#[cfg(feature = "tls")]
use scalws_core::tls::{CertificateFiles, TlsCertificates, UnknownServerName};
use scalws_core::{Limits, ListenerProtocol, ListenerSpec, Scheme};
use scalws_proxy::{
    Action, Application, ApplicationBuilder, Backend, Backends, ClaimedTwice, Gateway,
    HeaderModifier, InvalidGateway, PathModifier, Proxy, Redirect, Respond, Rewrite, Route,
};
#[cfg(feature = "static-files")]
use scalws_proxy::{StaticFiles, StaticOptions};
use scalws_router::{HostPattern, PathMatch, RouteSpec};
use serde_saphyr::{Location, Spanned};

use super::error::{ConfigErrors, Errors, did_you_mean};
use super::units::DurationValue;
use super::upstreams::Upstreams;
use super::{AccessLogTarget, Carried, Config, Inputs, Scheduler};
#[cfg(feature = "cache")]
use crate::config::schema::CacheFile;
use crate::config::schema::{
    ApplicationFile, BackendFile, File, HeadersFile, LimitsFile, ListenerFile, ListenerTlsFile,
    RedirectFile, RewriteFile, RouteFile,
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
        #[cfg(feature = "cache")]
        caches: HashMap::new(),
        errors: &mut errors,
        #[cfg(any(feature = "tls", feature = "static-files"))]
        base_dir,
        #[cfg(feature = "tls")]
        inputs,
        upstreams,
        // Set from the first https listener.
        https_port: None,
        #[cfg(feature = "tls")]
        certificates: Vec::new(),
        warnings: Vec::new(),
        #[cfg(feature = "cache")]
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
    let scheduler = file.scheduler.as_ref().and_then(|s| {
        let scheduler = Scheduler::from_name(&s.value);
        if scheduler.is_none() {
            compiler.errors.at(
                &s.referenced,
                "scheduler",
                format!(
                    "unknown scheduler \"{}\"; expected one of {}",
                    s.value,
                    Scheduler::NAMES.join(", ")
                ),
            );
        }
        scheduler
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
        if let Some(builder) = compiler.application(&path, &app.value, &names) {
            gateway = gateway.application(builder);
        }
    }
    let warnings = std::mem::take(&mut compiler.warnings);
    let carried = Carried {
        pools: std::mem::take(&mut compiler.upstreams.pools),
        #[cfg(feature = "cache")]
        caches: std::mem::take(&mut compiler.caches),
        metrics: previous.metrics.clone(),
    };
    // Built even when other errors were found, so that every domain
    // claimed twice among the applications that compiled is reported too.
    let gateway = match gateway.build() {
        Ok(gateway) => Some(gateway),
        Err(InvalidGateway::DuplicateDomains(claims)) => {
            for claim in &claims {
                locate_claim(&mut errors, &file.applications, claim);
            }
            None
        }
        // The checks above catch the others with positions; a backstop.
        Err(error) if errors.is_empty() => {
            errors.at(&Location::UNKNOWN, "applications", error.to_string());
            None
        }
        Err(_) => None,
    };
    let Some(gateway) = gateway.filter(|_| errors.is_empty()) else {
        return Err(errors.finish());
    };
    errors.into_result(Config {
        workers,
        scheduler,
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

/// Reports a domain the host table refused at the later claim: the last
/// domain of the second application that is the same pattern.
fn locate_claim(
    errors: &mut Errors,
    applications: &[Spanned<ApplicationFile>],
    claim: &ClaimedTwice,
) {
    let duplicate = &claim.duplicate;
    let found = applications
        .iter()
        .enumerate()
        .filter(|(_, app)| app.value.name.value == duplicate.second)
        .flat_map(|(i, app)| {
            app.value
                .domains
                .iter()
                .enumerate()
                .filter_map(move |(j, domain)| {
                    HostPattern::parse(&domain.value)
                        .is_ok_and(|p| p.to_string() == duplicate.domain)
                        .then_some((i, j, domain.referenced))
                })
        })
        .last();
    let (at, path) = match found {
        Some((i, j, at)) => (at, format!("applications[{i}].domains[{j}]")),
        None => (Location::UNKNOWN, "applications".to_owned()),
    };
    errors.at(
        &at,
        path,
        format!(
            "domain \"{}\" on listener \"{}\" is claimed by both \"{}\" and \"{}\"",
            duplicate.domain, claim.listener, duplicate.first, duplicate.second
        ),
    );
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
    /// What relative certificate and static-root paths are resolved against.
    #[cfg(any(feature = "tls", feature = "static-files"))]
    base_dir: &'a Path,
    /// Certificate files held in memory.
    #[cfg(feature = "tls")]
    inputs: &'a Inputs,
    /// What the configuration in use carries: pools, caches, counters.
    previous: &'a Carried,
    /// The caches this configuration uses, by application, for the next one.
    #[cfg(feature = "cache")]
    caches: HashMap<String, (CacheOptions, Cache)>,
    upstreams: Upstreams,
    /// Where `https_redirect` sends requests: the first https listener's port.
    /// `None` (no https listener) makes `https_redirect: true` an error.
    https_port: Option<u16>,
    /// Certificate sets already loaded, by their files: listeners naming the
    /// same files share one set, except that no two `http3` listeners do
    /// (`true`: an `http3` listener has this one).
    #[cfg(feature = "tls")]
    certificates: Vec<(
        (Vec<CertificateFiles>, UnknownServerName),
        TlsCertificates,
        bool,
    )>,
    /// Problems that do not stop the load (expired certificates).
    warnings: Vec<String>,
    /// The response cache of the application being compiled, if it has one.
    #[cfg(feature = "cache")]
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

    /// A part of the configuration this build leaves out (a Cargo feature off).
    #[cfg(not(all(
        feature = "tls",
        feature = "http3",
        feature = "cache",
        feature = "static-files"
    )))]
    fn not_built(&mut self, at: &Location, path: String, what: &str, feature: &str) {
        self.errors.at(
            at,
            path,
            format!("{what} is not built into this scalwsd (build it with --features {feature})"),
        );
    }

    /// Whether the application being compiled has a response cache.
    fn has_cache(&self) -> bool {
        #[cfg(feature = "cache")]
        if self.cache.is_some() {
            return true;
        }
        false
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

/// A build without a part refuses a file that uses it, where it uses it.
/// (Run by CI with `--no-default-features`.)
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod not_built {
    /// The errors of loading `yaml`, as printed.
    #[allow(dead_code)]
    fn refused(yaml: &str) -> String {
        match crate::config::load("parts.yaml", yaml, std::path::Path::new(".")) {
            Ok(_) => panic!("loaded:\n{yaml}"),
            Err(errors) => errors.to_string(),
        }
    }

    #[cfg(not(feature = "tls"))]
    #[tokio::test]
    async fn https_listeners_and_upstreams() {
        let listener = refused(
            "listeners:\n  - { name: s, address: 127.0.0.1:0, protocol: https, tls: { certificates: [{ cert: c.pem, key: k.pem }] } }\n",
        );
        assert!(listener.contains("parts.yaml:2:"), "{listener}");
        assert!(listener.contains("listeners[0].protocol"), "{listener}");
        assert!(
            listener
                .contains("HTTPS is not built into this scalwsd (build it with --features tls)"),
            "{listener}"
        );
        let upstream = refused(
            "listeners: [{ name: h, address: 127.0.0.1:0 }]\nupstreams:\n  s: { addresses: [127.0.0.1:9], protocol: https }\napplications:\n  - { name: a, domains: ['*'], routes: [{ path: /, proxy: s }] }\n",
        );
        assert!(upstream.contains("\"tls\" feature is off"), "{upstream}");
    }

    #[cfg(not(feature = "http3"))]
    #[tokio::test]
    async fn http3_listeners() {
        let errors = refused(
            "listeners:\n  - { name: q, address: 127.0.0.1:0, protocol: http3, tls: { certificates: [{ cert: c.pem, key: k.pem }] } }\n",
        );
        assert!(errors.contains("listeners[0].protocol"), "{errors}");
        assert!(
            errors
                .contains("HTTP/3 is not built into this scalwsd (build it with --features http3)"),
            "{errors}"
        );
    }

    #[cfg(not(feature = "cache"))]
    #[tokio::test]
    async fn response_caches() {
        let errors = refused(
            "listeners: [{ name: h, address: 127.0.0.1:0 }]\napplications:\n  - { name: a, domains: ['*'], cache: {}, routes: [{ path: /, respond: { status: 200 } }] }\n",
        );
        assert!(errors.contains("applications[0].cache"), "{errors}");
        assert!(
            errors.contains(
                "The response cache is not built into this scalwsd (build it with --features cache)"
            ),
            "{errors}"
        );
    }

    #[cfg(not(feature = "static-files"))]
    #[tokio::test]
    async fn static_routes() {
        let errors = refused(
            "listeners: [{ name: h, address: 127.0.0.1:0 }]\napplications:\n  - { name: a, domains: ['*'], routes: [{ path: /, static: { root: . } }] }\n",
        );
        assert!(
            errors.contains("applications[0].routes[0].static"),
            "{errors}"
        );
        assert!(errors.contains("Serving static files is not built into this scalwsd (build it with --features static-files)"), "{errors}");
    }
}
