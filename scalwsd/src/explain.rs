//! `scalwsd explain`: what the gateway a configuration describes does with
//! one request, step by step, without serving it (the gateway's own
//! [`Gateway::explain`](scalws_proxy::Gateway::explain), printed).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Method, Request, Uri};
use scalws_core::{ConnInfo, ListenerSpec, Scheme};
use scalws_proxy::{Action, Backend, Outcome};
use scalws_router::Verdict;

use crate::cli::ExplainArgs;
use crate::config::Config;
use crate::run::{EXIT_CONFIG, Source};

/// Exit status when no route answers the request.
const EXIT_NO_ROUTE: u8 = 1;

/// Runs `scalwsd explain`.
pub fn run(args: &ExplainArgs) -> ExitCode {
    let source = match &args.config {
        Some(path) => Source::File(path.clone()),
        None if std::path::Path::new("scalws.yaml").exists() => Source::File("scalws.yaml".into()),
        None => Source::Embedded,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("scalwsd explain: cannot start a runtime: {error}");
            return ExitCode::from(crate::run::EXIT_RUNTIME);
        }
    };
    runtime.block_on(async {
        let config = match crate::run::load(&source) {
            Ok(config) => config,
            Err(errors) => {
                eprint!("{errors}");
                return ExitCode::from(EXIT_CONFIG);
            }
        };
        match explain(&config, args) {
            Ok((text, answered)) => {
                print!("{text}");
                ExitCode::from(if answered { 0 } else { EXIT_NO_ROUTE })
            }
            Err(message) => {
                eprintln!("scalwsd explain: {message}");
                ExitCode::from(EXIT_CONFIG)
            }
        }
    })
}

/// The explanation as text, and whether a route answers.
pub(crate) fn explain(config: &Config, args: &ExplainArgs) -> Result<(String, bool), String> {
    let uri: Uri = args
        .url
        .parse()
        .map_err(|error| format!("invalid URL {:?}: {error}", args.url))?;
    let scheme = match uri.scheme_str() {
        Some("http") => Scheme::Http,
        Some("https") => Scheme::Https,
        _ => {
            return Err(format!(
                "the URL {:?} must start with http:// or https://",
                args.url
            ));
        }
    };
    let authority = uri
        .authority()
        .ok_or_else(|| format!("the URL {:?} has no host", args.url))?;
    let port = authority.port_u16();
    let listener = choose_listener(&config.listeners, args.listener.as_deref(), scheme, port)?;
    let method = Method::from_bytes(args.method.as_bytes())
        .map_err(|_| format!("invalid method {:?}", args.method))?;

    // As an HTTP/1.1 client sends it: origin-form, the URL's authority as
    // `Host` unless a `-H 'Host: ...'` says otherwise.
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = Request::builder().method(method).uri(target);
    let mut host_given = false;
    for header in &args.headers {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| format!("invalid header {header:?} (expected 'NAME: VALUE')"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("invalid header name in {header:?}"))?;
        let value = HeaderValue::from_str(value.trim())
            .map_err(|_| format!("invalid header value in {header:?}"))?;
        host_given |= name == http::header::HOST;
        request = request.header(name, value);
    }
    if !host_given {
        request = request.header(http::header::HOST, authority.as_str());
    }
    let (mut parts, ()) = request
        .body(())
        .map_err(|error| format!("invalid request: {error}"))?
        .into_parts();

    // The connection's scheme is the listener's (the URL's only chose it).
    let scheme = match listener.protocol.certificates() {
        None => Scheme::Http,
        Some(_) => Scheme::Https,
    };
    let local = listener.address;
    let peer: SocketAddr = ([127, 0, 0, 1], 40000).into();
    let mut conn = ConnInfo::new(listener.name.clone(), scheme, peer, local, None);
    let mut sni_note = String::new();
    if scheme == Scheme::Https {
        // Clients send no SNI for an IP address (RFC 6066 3).
        let host = authority.host();
        let by_address = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok();
        let sni: Option<Arc<str>> = match args.sni.as_deref() {
            Some(sni) => Some(sni.into()),
            None if by_address => None,
            None => Some(host.into()),
        };
        sni_note = match &sni {
            Some(sni) => format!(" (SNI {sni})"),
            None => " (no SNI: the host is an IP address)".to_owned(),
        };
        conn = ConnInfo::new(listener.name.clone(), scheme, peer, local, sni);
        if let Some(certificates) = listener.protocol.certificates() {
            conn = conn.with_tls(certificates.clone());
        }
    }
    parts.extensions.insert(conn);

    let explanation = config.gateway.explain(&parts);
    let mut out = String::new();
    let _ = writeln!(out, "request:     {} {}", parts.method, uri);
    let _ = writeln!(
        out,
        "listener:    {} ({} on {}){sni_note}",
        listener.name,
        listener.protocol.as_str(),
        listener.address
    );
    match &explanation.host {
        Some(host) => {
            let _ = writeln!(out, "host:        {host}");
        }
        None => {
            let _ = writeln!(out, "host:        (missing or invalid)");
        }
    }
    match &explanation.application {
        Some((entry, application)) => {
            let _ = writeln!(out, "host entry:  {entry}");
            let _ = writeln!(out, "application: {}", application.name());
        }
        None => {
            let _ = writeln!(out, "host entry:  (none)");
        }
    }
    if !explanation.routes.is_empty() {
        let _ = writeln!(out, "routes, in precedence order:");
        for considered in &explanation.routes {
            let mark = match considered.verdict {
                Verdict::Matched => "=>",
                _ => "  ",
            };
            let _ = writeln!(
                out,
                "  {mark} {}. {}: {}",
                considered.rank + 1,
                considered.conditions,
                considered.verdict
            );
        }
    }
    let answered = match &explanation.outcome {
        Outcome::Route(route) => {
            let _ = writeln!(out, "action:      {}", describe(route.action()));
            let policies = route.policy_names();
            if !policies.is_empty() {
                let _ = writeln!(out, "policies:    {}", policies.join(", "));
            }
            if let Some(timeout) = route.timeout_limit() {
                let _ = writeln!(out, "timeout:     {}", humanize(timeout));
            }
            true
        }
        Outcome::Refused(status, why) => {
            let _ = writeln!(out, "answer:      {status} ({why})");
            false
        }
        Outcome::HttpsRedirect(location) => {
            let location = location
                .as_ref()
                .and_then(|value| value.to_str().ok())
                .unwrap_or("?");
            let _ = writeln!(
                out,
                "answer:      308 Permanent Redirect to {location} (https_redirect)"
            );
            false
        }
        Outcome::ApplicationLayers => {
            let _ = writeln!(out, "answer:      the application's layers decide");
            true
        }
    };
    Ok((out, answered))
}

/// The listener named, or the first one the URL fits: same scheme (an
/// http3 listener counts as https), same port when the URL gives one.
fn choose_listener<'a>(
    listeners: &'a [ListenerSpec],
    named: Option<&str>,
    scheme: Scheme,
    port: Option<u16>,
) -> Result<&'a ListenerSpec, String> {
    if let Some(name) = named {
        return listeners
            .iter()
            .find(|listener| &*listener.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = listeners.iter().map(|l| &*l.name).collect();
                format!(
                    "no listener \"{name}\" (the configuration has: {})",
                    names.join(", ")
                )
            });
    }
    let fits_scheme = |listener: &&ListenerSpec| {
        matches!(
            (listener.protocol.certificates().is_some(), scheme),
            (false, Scheme::Http) | (true, Scheme::Https)
        )
    };
    let default_port = match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    };
    let wanted = port.unwrap_or(default_port);
    listeners
        .iter()
        .filter(fits_scheme)
        .find(|listener| listener.address.port() == wanted)
        .or_else(|| listeners.iter().find(fits_scheme))
        .ok_or_else(|| format!("no {} listener in the configuration", scheme.as_str()))
}

fn describe(action: &Action) -> String {
    match action {
        Action::Respond(_) => "respond (a fixed response)".into(),
        Action::Redirect(_) => "redirect".into(),
        Action::Static(_) => "static (files)".into(),
        Action::Proxy(proxy) => proxy_text(proxy),
        Action::Backends(backends) => {
            let shares: Vec<String> = backends
                .shares()
                .map(|(backend, weight)| match backend {
                    Backend::Proxy(proxy) => format!("{} weight {weight}", proxy_text(proxy)),
                    Backend::Status(status) => {
                        format!("status {} weight {weight}", status.as_u16())
                    }
                })
                .collect();
            format!("backends: {}", shares.join("; "))
        }
        Action::Service(_) => "an embedder's service".into(),
    }
}

fn proxy_text(proxy: &scalws_proxy::Proxy) -> String {
    let cached = if proxy.is_cached() {
        ", through the cache"
    } else {
        ""
    };
    format!("proxy to upstream \"{}\"{cached}", proxy.pool().name())
}

fn humanize(duration: std::time::Duration) -> String {
    format!("{duration:?}")
}
