//! From the file as written to the typed pieces: every reference resolved,
//! every value checked, every error located.

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
use super::schema::{
    ApplicationFile, BackendFile, CacheFile, File, HeadersFile, LimitsFile, ListenerFile,
    ListenerTlsFile, RedirectFile, RewriteFile, RouteFile,
};
use super::units::DurationValue;
use super::upstreams::Upstreams;
use super::{AccessLogTarget, Carried, Config, Inputs};

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

    fn limits(&mut self, file: &LimitsFile) -> Limits {
        let mut limits = Limits::default();
        let path = |key: &str| format!("limits.{key}");
        if let Some(v) = &file.max_connections {
            limits.max_connections = self.bounded(v, MAX_CONNECTIONS, &path("max_connections"));
        }
        if let Some(v) = &file.header_read_timeout {
            limits.header_read_timeout = self.positive(v, &path("header_read_timeout"));
        }
        if let Some(v) = &file.keepalive_timeout {
            limits.keepalive_timeout = self.positive(v, &path("keepalive_timeout"));
        }
        if let Some(v) = &file.max_header_bytes {
            if v.value.0 < 8192 {
                self.errors.at(
                    &v.referenced,
                    path("max_header_bytes"),
                    "must be at least 8KiB (the smallest read buffer the HTTP/1 parser takes)",
                );
            }
            limits.max_header_bytes = usize::try_from(v.value.0).unwrap_or(usize::MAX);
        }
        if let Some(v) = &file.max_headers {
            // The HTTP/1 parser reserves room for this many headers per request.
            limits.max_headers = self.bounded(v, MAX_HEADERS, &path("max_headers"));
        }
        if let Some(v) = &file.h2_max_concurrent_streams {
            match NonZeroU32::new(v.value) {
                Some(n) => limits.h2_max_concurrent_streams = n,
                None => self.errors.at(
                    &v.referenced,
                    path("h2_max_concurrent_streams"),
                    "must be at least 1",
                ),
            }
        }
        if let Some(v) = &file.max_request_body {
            limits.max_request_body = v.value.0;
        }
        if let Some(v) = &file.drain_timeout {
            limits.drain_timeout = v.value.0;
        }
        if let Some(v) = &file.tunnel_idle_timeout {
            limits.tunnel_idle_timeout = self.positive(v, &path("tunnel_idle_timeout"));
        }
        limits
    }

    fn listeners(&mut self, listeners: &[Spanned<ListenerFile>]) -> Vec<ListenerSpec> {
        let mut specs = Vec::new();
        let mut names: HashMap<&str, ()> = HashMap::new();
        let mut addresses: HashMap<(SocketAddr, bool), &str> = HashMap::new();
        for (i, listener) in listeners.iter().enumerate() {
            let l = &listener.value;
            let path = |key: &str| format!("listeners[{i}].{key}");
            if l.name.value.is_empty() {
                self.errors
                    .at(&l.name.referenced, path("name"), "must not be empty");
            } else if names.insert(l.name.value.as_str(), ()).is_some() {
                self.errors.at(
                    &l.name.referenced,
                    path("name"),
                    format!("listener name \"{}\" is used twice", l.name.value),
                );
            }
            let protocol_at = l
                .protocol
                .as_ref()
                .map_or(listener.referenced, |p| p.referenced);
            let kind = match l.protocol.as_ref().map(|p| p.value.as_str()) {
                None | Some("http") => Some(Kind::Http),
                Some("https") => Some(Kind::Https),
                Some("http3") => Some(Kind::Http3),
                Some(other) => {
                    let hint = did_you_mean(other, ["http", "https", "http3"]);
                    self.errors.at(
                        &protocol_at,
                        path("protocol"),
                        format!(
                            "unknown protocol \"{other}\"{hint}; expected http, https or http3"
                        ),
                    );
                    None
                }
            };
            let protocol = match (kind, &l.tls) {
                (Some(Kind::Http), Some(tls)) => {
                    self.errors.at(
                        &tls.referenced,
                        path("tls"),
                        "tls applies only to protocol https or http3",
                    );
                    None
                }
                (Some(Kind::Http), None) => Some(ListenerProtocol::Http),
                (Some(kind), None) => {
                    self.errors.at(
                        &protocol_at,
                        path("tls"),
                        format!("protocol {} needs tls.certificates", kind.name()),
                    );
                    None
                }
                (Some(kind), Some(tls)) => self
                    .certificates(&path("tls.certificates"), tls, matches!(kind, Kind::Http3))
                    .map(|certs| match kind {
                        Kind::Https => ListenerProtocol::Https(certs),
                        _ => ListenerProtocol::Http3(certs),
                    }),
                (None, _) => None,
            };
            match l.address.value.parse::<SocketAddr>() {
                Ok(address) => {
                    // Port 0 asks the OS for a free port: never a clash. TCP
                    // (http, https) and UDP (http3) may share a port.
                    let udp = matches!(kind, Some(Kind::Http3));
                    let clash = (address.port() != 0)
                        .then(|| addresses.insert((address, udp), l.name.value.as_str()))
                        .flatten();
                    if let Some(other) = clash {
                        self.errors.at(
                            &l.address.referenced,
                            path("address"),
                            format!("address {address} is already used by listener \"{other}\""),
                        );
                    }
                    if matches!(kind, Some(Kind::Https)) && self.https_port.is_none() {
                        self.https_port = Some(address.port());
                    }
                    if let Some(protocol) = protocol {
                        specs.push(ListenerSpec {
                            name: l.name.value.as_str().into(),
                            address,
                            protocol,
                        });
                    }
                }
                Err(_) => self.errors.at(
                    &l.address.referenced,
                    path("address"),
                    format!("invalid address \"{}\": expected IP:PORT, e.g. 127.0.0.1:8080 or [::1]:8080", l.address.value),
                ),
            }
        }
        specs
    }

    fn application(
        &mut self,
        path: &str,
        app: &ApplicationFile,
        listener_names: &[&str],
        claimed: &mut HashMap<(String, String), String>,
    ) -> Option<ApplicationBuilder> {
        let name = app.name.value.as_str();
        let mut builder = Application::builder(name);
        let mut ok = true;

        let mut bound: Vec<&str> = Vec::new();
        match &app.listeners {
            None => bound.extend_from_slice(listener_names),
            Some(list) => {
                if list.is_empty() {
                    self.errors.at(
                        &app.name.referenced,
                        format!("{path}.listeners"),
                        "must name at least one listener",
                    );
                    ok = false;
                }
                for (j, listener) in list.iter().enumerate() {
                    if listener_names.contains(&listener.value.as_str()) {
                        bound.push(listener.value.as_str());
                        builder = builder.listener(listener.value.as_str());
                    } else {
                        let hint = did_you_mean(&listener.value, listener_names.iter().copied());
                        self.errors.at(
                            &listener.referenced,
                            format!("{path}.listeners[{j}]"),
                            format!("unknown listener \"{}\"{hint}", listener.value),
                        );
                        ok = false;
                    }
                }
            }
        }

        if app.domains.is_empty() {
            self.errors.at(
                &app.name.referenced,
                format!("{path}.domains"),
                "must list at least one domain (\"*\" matches any)",
            );
            ok = false;
        }
        for (j, domain) in app.domains.iter().enumerate() {
            let at = format!("{path}.domains[{j}]");
            let pattern = match HostPattern::parse(&domain.value) {
                Ok(pattern) => pattern,
                Err(error) => {
                    self.errors.at(&domain.referenced, at, error.to_string());
                    ok = false;
                    continue;
                }
            };
            for listener in &bound {
                let key = ((*listener).to_owned(), pattern.to_string());
                if let Some(first) = claimed.get(&key) {
                    self.errors.at(
                        &domain.referenced,
                        at.clone(),
                        format!("domain \"{pattern}\" on listener \"{listener}\" is claimed by both \"{first}\" and \"{name}\""),
                    );
                    ok = false;
                } else {
                    claimed.insert(key, name.to_owned());
                }
            }
            builder = match builder.domain(&domain.value) {
                Ok(builder) => builder,
                Err(_) => return None,
            };
        }
        self.cache = app
            .cache
            .as_ref()
            .and_then(|c| self.cache(&format!("{path}.cache"), name, c));
        if self.https_redirect(path, &app.https_redirect) {
            builder = builder.https_redirect(true);
        }

        let mut labels: Vec<String> = Vec::new();
        for (k, route) in app.routes.iter().enumerate() {
            let route_path = format!("{path}.routes[{k}]");
            match self.route(&route_path, route) {
                Some(mut spec) => {
                    let mut label = route_label(&spec.path);
                    if labels.contains(&label) {
                        label = format!("{label} #{k}");
                    }
                    spec.target = spec
                        .target
                        .metrics(self.previous.metrics.route(name, &label));
                    labels.push(label);
                    if let Err(error) = builder.add_route(spec) {
                        let (at, key) = route_location(&route.value);
                        let at = at.unwrap_or(route.referenced);
                        self.errors
                            .at(&at, format!("{route_path}.{key}"), error.to_string());
                        ok = false;
                    }
                }
                None => ok = false,
            }
        }
        ok.then_some(builder)
    }

    fn route(&mut self, path: &str, route: &Spanned<RouteFile>) -> Option<RouteSpec<Route>> {
        let r = &route.value;
        let before = self.errors_len();

        let path_match = self.path_match(path, r);

        let (methods, headers, query) = match &r.matcher {
            None => (None, Vec::new(), Vec::new()),
            Some(m) => {
                let methods = m.methods.as_ref().map(|list| {
                    if list.is_empty() {
                        self.errors.at(
                            &route.referenced,
                            format!("{path}.match.methods"),
                            "must list at least one method",
                        );
                    }
                    list.iter()
                        .enumerate()
                        .filter_map(|(j, method)| {
                            self.method(&format!("{path}.match.methods[{j}]"), method)
                        })
                        .collect::<Vec<_>>()
                });
                let mut headers = Vec::new();
                for (name, value) in &m.headers {
                    let at = format!("{path}.match.headers.{name}");
                    match (
                        HeaderName::from_bytes(name.as_bytes()),
                        HeaderValue::from_str(&value.value),
                    ) {
                        (Ok(n), Ok(v)) => headers.push((n, v)),
                        (Err(_), _) => self.errors.at(
                            &value.referenced,
                            at,
                            format!("invalid header name \"{name}\""),
                        ),
                        (_, Err(_)) => {
                            self.errors
                                .at(&value.referenced, at, "invalid header value")
                        }
                    }
                }
                let query = m
                    .query
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value.clone()))
                    .collect();
                (methods, headers, query)
            }
        };

        let mut actions: Vec<&str> = Vec::new();
        let mut target = None;
        if let Some(respond) = &r.respond {
            actions.push("respond");
            target = self
                .respond(&format!("{path}.respond"), respond)
                .map(Action::Respond);
        }
        if let Some(files) = &r.static_files {
            actions.push("static");
            // Stripped in the form requests are matched in: `/static/` acts as `/static`.
            // A path rewrite says itself which path is looked up: nothing is stripped.
            let rewrites_path = r
                .rewrite
                .as_ref()
                .is_some_and(|w| w.value.path.is_some() || w.value.prefix.is_some());
            let prefix = match &path_match {
                Some(PathMatch::Prefix(prefix)) if !rewrites_path => {
                    scalws_router::normalize_path(prefix)
                        .map(|p| p.trim_end_matches('/').to_owned())
                        .unwrap_or_default()
                }
                _ => String::new(),
            };
            target = self
                .static_files(&format!("{path}.static"), files, prefix)
                .map(Action::Static);
        }
        if let Some(target_name) = &r.proxy {
            actions.push("proxy");
            target = self
                .upstreams
                .resolve(&format!("{path}.proxy"), target_name, self.errors)
                .map(|pool| {
                    let proxy = Proxy::new(pool);
                    match (&self.cache, r.cache.as_ref().map(|c| c.value)) {
                        (Some(cache), None | Some(true)) => {
                            // Named by what the route matches, not by its position,
                            // so reordering routes does not mix their entries.
                            let partition =
                                format!("{path_match:?}|{methods:?}|{headers:?}|{query:?}");
                            Action::Proxy(proxy.with_cache(cache, &partition))
                        }
                        _ => Action::Proxy(proxy),
                    }
                });
        }
        if let Some(list) = &r.backends {
            actions.push("backends");
            target = self
                .backends(&format!("{path}.backends"), list)
                .map(Action::Backends);
        }
        if let Some(redirect) = &r.redirect {
            actions.push("redirect");
            target = self
                .redirect(&format!("{path}.redirect"), redirect, path_match.as_ref())
                .map(Action::Redirect);
        }
        let rewrite = r.rewrite.as_ref().and_then(|rewrite| {
            if r.redirect.is_some() {
                self.errors.at(
                    &rewrite.referenced,
                    format!("{path}.rewrite"),
                    "a redirect answers before any rewrite; give one of redirect or rewrite",
                );
            }
            self.rewrite(&format!("{path}.rewrite"), rewrite, path_match.as_ref())
        });
        let request_headers = r.request_headers.as_ref().and_then(|headers| {
            self.header_modifier(&format!("{path}.request_headers"), headers, true)
        });
        let response_headers = r.response_headers.as_ref().and_then(|headers| {
            self.header_modifier(&format!("{path}.response_headers"), headers, false)
        });
        if let Some(flag) = &r.cache {
            if flag.value && self.cache.is_none() {
                self.errors.at(
                    &flag.referenced,
                    format!("{path}.cache"),
                    "cache: true needs a cache on the application (applications[].cache)",
                );
            }
            if r.proxy.is_none() {
                self.errors.at(
                    &flag.referenced,
                    format!("{path}.cache"),
                    "cache applies only to proxy routes",
                );
            }
        }
        let https_redirect = self.https_redirect(path, &r.https_redirect);
        match actions.len() {
            1 => {}
            0 => self.errors.at(
                &route.referenced,
                path,
                "a route needs an action: one of respond, static, proxy, redirect or backends",
            ),
            _ => self.errors.at(
                &route.referenced,
                path,
                format!(
                    "a route takes exactly one action, this one has {}",
                    actions.join(", ")
                ),
            ),
        }
        if self.errors_len() != before {
            return None;
        }
        let mut target = Route::new(target?).https_redirect(https_redirect);
        if let Some(timeout) = &r.timeout {
            target = target.timeout(timeout.value.0);
        }
        if let Some(rewrite) = rewrite {
            target = target.rewrite(rewrite);
        }
        if let Some(headers) = request_headers {
            target = target.request_headers(headers);
        }
        if let Some(headers) = response_headers {
            target = target.response_headers(headers);
        }
        Some(RouteSpec {
            path: path_match?,
            methods,
            headers,
            query,
            target,
        })
    }

    /// Whether `https_redirect` is on; on without an https listener is an error.
    fn https_redirect(&mut self, path: &str, flag: &Option<Spanned<bool>>) -> bool {
        let Some(flag) = flag.as_ref().filter(|f| f.value) else {
            return false;
        };
        if self.https_port.is_none() {
            self.errors.at(
                &flag.referenced,
                format!("{path}.https_redirect"),
                "https_redirect needs an https listener",
            );
            return false;
        }
        true
    }

    fn redirect(
        &mut self,
        path: &str,
        redirect: &Spanned<RedirectFile>,
        route_path: Option<&PathMatch>,
    ) -> Option<Redirect> {
        let f = &redirect.value;
        let before = self.errors_len();
        let mut out = Redirect::new();
        if let Some(scheme) = &f.scheme {
            match scheme.value.as_str() {
                "http" => out = out.scheme(Scheme::Http),
                "https" => out = out.scheme(Scheme::Https),
                other => {
                    let hint = did_you_mean(other, ["http", "https"]);
                    self.errors.at(
                        &scheme.referenced,
                        format!("{path}.scheme"),
                        format!("unknown scheme \"{other}\"{hint}; expected http or https"),
                    );
                }
            }
        }
        if let Some(host) = &f.host {
            match out.clone().host(&host.value) {
                Ok(with_host) => out = with_host,
                Err(error) => self.errors.at(
                    &host.referenced,
                    format!("{path}.host"),
                    format!("{error}: expected a name or an address without a port (the port goes in port)"),
                ),
            }
        }
        if let Some(port) = &f.port {
            match u16::try_from(port.value) {
                Ok(p) if p > 0 => out = out.port(p),
                _ => self.errors.at(
                    &port.referenced,
                    format!("{path}.port"),
                    "must be between 1 and 65535",
                ),
            }
        }
        if let Some(modifier) = self.path_modifier(path, &f.path, &f.prefix, route_path) {
            out = out.path(modifier);
        }
        if let Some(status) = &f.status {
            let code = StatusCode::from_u16(status.value).unwrap_or(StatusCode::OK);
            match out.clone().status(code) {
                Ok(with_status) => out = with_status,
                Err(_) => self.errors.at(
                    &status.referenced,
                    format!("{path}.status"),
                    format!(
                        "invalid redirect status {} (expected 301, 302, 303, 307 or 308)",
                        status.value
                    ),
                ),
            }
        }
        (self.errors_len() == before).then_some(out)
    }

    fn rewrite(
        &mut self,
        path: &str,
        rewrite: &Spanned<RewriteFile>,
        route_path: Option<&PathMatch>,
    ) -> Option<Rewrite> {
        let f = &rewrite.value;
        if f.path.is_none() && f.prefix.is_none() && f.host.is_none() {
            self.errors.at(
                &rewrite.referenced,
                path,
                "needs at least one of path, prefix or host",
            );
            return None;
        }
        let before = self.errors_len();
        let mut out = Rewrite::new();
        if let Some(modifier) = self.path_modifier(path, &f.path, &f.prefix, route_path) {
            out = out.path(modifier);
        }
        if let Some(host) = &f.host {
            match out.clone().host(&host.value) {
                Ok(with_host) => out = with_host,
                Err(error) => self.errors.at(
                    &host.referenced,
                    format!("{path}.host"),
                    format!("{error}: expected a name or an address, with an optional :port"),
                ),
            }
        }
        (self.errors_len() == before).then_some(out)
    }

    /// `path` (full replacement) or `prefix` (the matched prefix replaced, on prefix routes).
    fn path_modifier(
        &mut self,
        path: &str,
        full: &Option<Spanned<String>>,
        prefix: &Option<Spanned<String>>,
        route_path: Option<&PathMatch>,
    ) -> Option<PathModifier> {
        match (full, prefix) {
            (None, None) => None,
            (Some(_), Some(prefix)) => {
                self.errors.at(
                    &prefix.referenced,
                    format!("{path}.prefix"),
                    "give either path or prefix, not both",
                );
                None
            }
            (Some(full), None) => match PathModifier::full(&full.value) {
                Ok(modifier) => Some(modifier),
                Err(error) => {
                    self.errors
                        .at(&full.referenced, format!("{path}.path"), error.to_string());
                    None
                }
            },
            (None, Some(prefix)) => {
                let kind = match route_path {
                    Some(PathMatch::Exact(_)) => Some("an exact path"),
                    Some(PathMatch::Pattern(_)) => Some("a pattern"),
                    Some(PathMatch::Prefix(_)) | None => None,
                };
                if let Some(kind) = kind {
                    self.errors.at(
                        &prefix.referenced,
                        format!("{path}.prefix"),
                        format!("replaces the prefix the route matched, but this route matches {kind}; use path for a full replacement"),
                    );
                    return None;
                }
                match PathModifier::prefix(&prefix.value) {
                    Ok(modifier) => Some(modifier),
                    Err(error) => {
                        self.errors.at(
                            &prefix.referenced,
                            format!("{path}.prefix"),
                            error.to_string(),
                        );
                        None
                    }
                }
            }
        }
    }

    /// `set`, `add`, `remove`; names case-insensitive, each at most once per list.
    fn header_modifier(
        &mut self,
        path: &str,
        headers: &Spanned<HeadersFile>,
        request: bool,
    ) -> Option<HeaderModifier> {
        let f = &headers.value;
        let before = self.errors_len();
        let mut out = HeaderModifier::new();
        for (list, entries) in [("set", &f.set), ("add", &f.add)] {
            let mut seen: HashMap<HeaderName, ()> = HashMap::new();
            for (name, value) in entries {
                let at = format!("{path}.{list}.{name}");
                let Some(header) = self.modifiable_header(&at, name, &value.referenced, request)
                else {
                    continue;
                };
                if seen.insert(header.clone(), ()).is_some() {
                    self.errors.at(
                        &value.referenced,
                        at,
                        format!("header \"{header}\" is given twice (names are case-insensitive)"),
                    );
                    continue;
                }
                match HeaderValue::from_str(&value.value) {
                    Ok(v) if list == "set" => out = out.set(header, v),
                    Ok(v) => out = out.add(header, v),
                    Err(_) => self
                        .errors
                        .at(&value.referenced, at, "invalid header value"),
                }
            }
        }
        for (i, name) in f.remove.iter().enumerate() {
            match HeaderName::from_bytes(name.value.as_bytes()) {
                Ok(header) => out = out.remove(header),
                Err(_) => self.errors.at(
                    &name.referenced,
                    format!("{path}.remove[{i}]"),
                    format!("invalid header name \"{}\"", name.value),
                ),
            }
        }
        (self.errors_len() == before).then_some(out)
    }

    /// A header name `set` and `add` may change: not one that frames the message
    /// or belongs to the connection, which the proxy owns.
    fn modifiable_header(
        &mut self,
        at: &str,
        name: &str,
        location: &Location,
        request: bool,
    ) -> Option<HeaderName> {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            self.errors
                .at(location, at, format!("invalid header name \"{name}\""));
            return None;
        };
        const MANAGED: [&str; 8] = [
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "upgrade",
        ];
        if MANAGED.contains(&header.as_str()) {
            self.errors.at(
                location,
                at,
                format!("\"{header}\" frames the message or belongs to the connection; it cannot be changed"),
            );
            return None;
        }
        if request && header == http::header::HOST {
            self.errors.at(
                location,
                at,
                "the host is changed with rewrite.host, not request_headers",
            );
            return None;
        }
        Some(header)
    }

    fn backends(
        &mut self,
        path: &str,
        list: &Spanned<Vec<Spanned<BackendFile>>>,
    ) -> Option<Backends> {
        if list.value.is_empty() {
            self.errors
                .at(&list.referenced, path, "needs at least one backend");
            return None;
        }
        let before = self.errors_len();
        let mut shares = Vec::new();
        for (i, entry) in list.value.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let b = &entry.value;
            let backend = match (&b.proxy, &b.status) {
                (Some(target), None) => self
                    .upstreams
                    .resolve(&format!("{at}.proxy"), target, self.errors)
                    .map(|pool| Backend::Proxy(Proxy::new(pool))),
                (None, Some(status)) => match StatusCode::from_u16(status.value) {
                    Ok(code) if (200..=599).contains(&status.value) => Some(Backend::Status(code)),
                    _ => {
                        self.errors.at(
                            &status.referenced,
                            format!("{at}.status"),
                            format!("invalid status {} (expected 200 to 599)", status.value),
                        );
                        None
                    }
                },
                _ => {
                    self.errors.at(
                        &entry.referenced,
                        at,
                        "a backend takes exactly one of proxy or status",
                    );
                    None
                }
            };
            if let Some(backend) = backend {
                shares.push((backend, b.weight.value));
            }
        }
        (self.errors_len() == before).then(|| Backends::new(shares))
    }

    fn path_match(&mut self, path: &str, r: &RouteFile) -> Option<PathMatch> {
        let from_match = r.matcher.as_ref().and_then(|m| m.path.as_ref());
        match (&r.path, from_match) {
            (Some(prefix), None) => Some(PathMatch::Prefix(prefix.value.clone())),
            (None, None) => Some(PathMatch::Prefix("/".to_owned())),
            (Some(prefix), Some(_)) => {
                self.errors.at(
                    &prefix.referenced,
                    format!("{path}.path"),
                    "give either path or match.path, not both",
                );
                None
            }
            (None, Some(spanned)) => {
                let p = &spanned.value;
                let given: Vec<(&Spanned<String>, PathMatch)> = [
                    p.exact
                        .as_ref()
                        .map(|v| (v, PathMatch::Exact(v.value.clone()))),
                    p.prefix
                        .as_ref()
                        .map(|v| (v, PathMatch::Prefix(v.value.clone()))),
                    p.pattern
                        .as_ref()
                        .map(|v| (v, PathMatch::Pattern(v.value.clone()))),
                ]
                .into_iter()
                .flatten()
                .collect();
                match given.as_slice() {
                    [(_, matcher)] => Some(matcher.clone()),
                    [] => {
                        self.errors.at(
                            &spanned.referenced,
                            format!("{path}.match.path"),
                            "needs one of exact, prefix or pattern",
                        );
                        None
                    }
                    [_, (second, _), ..] => {
                        self.errors.at(
                            &second.referenced,
                            format!("{path}.match.path"),
                            "takes only one of exact, prefix or pattern",
                        );
                        None
                    }
                }
            }
        }
    }

    fn method(&mut self, path: &str, method: &Spanned<String>) -> Option<Method> {
        let text = method.value.as_str();
        let valid = !text.is_empty() && text.bytes().all(|b| b.is_ascii_uppercase() || b == b'-');
        match Method::from_bytes(text.as_bytes()) {
            Ok(m) if valid => Some(m),
            _ => {
                let upper = text.to_ascii_uppercase();
                let hint = if upper != text && Method::from_bytes(upper.as_bytes()).is_ok() {
                    format!(" (did you mean \"{upper}\"? methods are case-sensitive)")
                } else {
                    String::new()
                };
                self.errors.at(
                    &method.referenced,
                    path,
                    format!("invalid method \"{text}\"{hint}"),
                );
                None
            }
        }
    }

    fn respond(
        &mut self,
        path: &str,
        respond: &Spanned<super::schema::RespondFile>,
    ) -> Option<Respond> {
        let r = &respond.value;
        let status = match &r.status {
            None => StatusCode::OK,
            Some(s) => match StatusCode::from_u16(s.value) {
                Ok(status) if (200..=599).contains(&s.value) => status,
                _ => {
                    self.errors.at(
                        &s.referenced,
                        format!("{path}.status"),
                        format!("invalid status {} (expected 200 to 599)", s.value),
                    );
                    return None;
                }
            },
        };
        let mut out = Respond::new(status, r.body.clone().into_bytes());
        for (name, value) in &r.headers {
            let at = format!("{path}.headers.{name}");
            let header = match HeaderName::from_bytes(name.as_bytes()) {
                Ok(header) => header,
                Err(_) => {
                    self.errors.at(
                        &value.referenced,
                        at,
                        format!("invalid header name \"{name}\""),
                    );
                    continue;
                }
            };
            if header == http::header::CONTENT_LENGTH {
                self.errors.at(
                    &value.referenced,
                    at,
                    "content-length is set from the body; leave it out",
                );
                continue;
            }
            match HeaderValue::from_str(&value.value) {
                Ok(v) => out = out.header(header, v),
                Err(_) => self
                    .errors
                    .at(&value.referenced, at, "invalid header value"),
            }
        }
        Some(out)
    }

    fn static_files(
        &mut self,
        path: &str,
        files: &Spanned<super::schema::StaticFile>,
        strip_prefix: String,
    ) -> Option<StaticFiles> {
        let f = &files.value;
        let root = self.base_dir.join(&f.root.value);
        let options = StaticOptions {
            root,
            index: Some(f.index.clone().unwrap_or_else(|| "index.html".to_owned()))
                .filter(|i| !i.is_empty()),
            listing: f.listing,
            strip_prefix,
        };
        match StaticFiles::new(options) {
            Ok(files) => Some(files),
            Err(error) => {
                let hint = if Path::new(&f.root.value).is_relative() {
                    format!(
                        " (relative roots are resolved from the config file's directory, {})",
                        self.base_dir.display()
                    )
                } else {
                    String::new()
                };
                self.errors.at(
                    &f.root.referenced,
                    format!("{path}.root"),
                    format!("{error}{hint}"),
                );
                None
            }
        }
    }

    /// Loads a listener's certificates, or reuses the set loaded for the same
    /// files. No set is shared by two `http3` listeners (`quic`): a reload
    /// pours an `http3` listener's new certificates into the set its QUIC
    /// endpoint was opened with, and another `http3` listener reading that
    /// set would serve them too. (`https` listeners take new sets.)
    fn certificates(
        &mut self,
        path: &str,
        tls: &Spanned<ListenerTlsFile>,
        quic: bool,
    ) -> Option<TlsCertificates> {
        if tls.value.certificates.is_empty() {
            self.errors.at(
                &tls.referenced,
                path,
                "needs at least one { cert, key } pair",
            );
            return None;
        }
        let files: Vec<CertificateFiles> = tls
            .value
            .certificates
            .iter()
            .map(|c| CertificateFiles {
                cert: self.base_dir.join(&c.value.cert.value),
                key: self.base_dir.join(&c.value.key.value),
            })
            .collect();
        let mut seen = false;
        for (loaded_files, loaded, taken_by_quic) in &mut self.certificates {
            if *loaded_files == files {
                seen = true;
                if !(quic && *taken_by_quic) {
                    *taken_by_quic |= quic;
                    return Some(loaded.clone());
                }
            }
        }
        let inputs = self.inputs;
        match TlsCertificates::load_with(&files, &|path| inputs.read(path)) {
            Ok(loaded) => {
                if !seen {
                    self.warnings.extend(loaded.warnings());
                }
                self.certificates.push((files, loaded.clone(), quic));
                Some(loaded)
            }
            Err(error) => {
                // Point at the pair the error is about.
                let text = error.to_string();
                let (i, pair) = tls
                    .value
                    .certificates
                    .iter()
                    .enumerate()
                    .find(|(_, c)| {
                        let cert = self.base_dir.join(&c.value.cert.value);
                        let key = self.base_dir.join(&c.value.key.value);
                        text.contains(&cert.display().to_string())
                            || text.contains(&key.display().to_string())
                    })
                    .unwrap_or((0, &tls.value.certificates[0]));
                self.errors
                    .at(&pair.referenced, format!("{path}[{i}]"), text);
                None
            }
        }
    }

    /// The application's response cache: the previous configuration's when
    /// the application had one with the same settings.
    fn cache(&mut self, path: &str, app: &str, file: &Spanned<CacheFile>) -> Option<Cache> {
        let defaults = CacheOptions::default();
        let f = &file.value;
        let max_size = f.max_size.as_ref().map_or(defaults.max_size, |v| v.value.0);
        let max_object = f
            .max_object
            .as_ref()
            .map_or(defaults.max_object, |v| v.value.0);
        let before = self.errors_len();
        if let Some(v) = &f.max_size
            && v.value.0 == 0
        {
            self.errors.at(
                &v.referenced,
                format!("{path}.max_size"),
                "must be more than 0",
            );
        }
        if max_object > max_size {
            let at = f
                .max_object
                .as_ref()
                .map_or(file.referenced, |v| v.referenced);
            self.errors.at(
                &at,
                format!("{path}.max_object"),
                "must not be larger than max_size",
            );
        }
        if self.errors_len() != before {
            return None;
        }
        let options = CacheOptions {
            max_size,
            max_object,
            default_ttl: f
                .default_ttl
                .as_ref()
                .map_or(defaults.default_ttl, |v| v.value.0),
            ..defaults
        };
        let cache = match self.previous.caches.get(app) {
            Some((old, cache)) if *old == options => cache.clone(),
            _ => Cache::new(options.clone()),
        };
        self.caches.insert(app.to_owned(), (options, cache.clone()));
        Some(cache)
    }

    fn errors_len(&self) -> usize {
        self.errors.len()
    }
}

/// A route's label in metrics: its path as written; `=` before an exact path.
fn route_label(path: &PathMatch) -> String {
    match path {
        PathMatch::Exact(path) => format!("={path}"),
        PathMatch::Prefix(path) | PathMatch::Pattern(path) => path.clone(),
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
