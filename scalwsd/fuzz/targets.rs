#![allow(dead_code)] // each fuzz binary uses one target

//! The fuzz targets' bodies, shared by the cargo-fuzz binaries
//! (`scalwsd/fuzz/fuzz_targets/*.rs`) and by the test that replays every
//! corpus and every crash found (`scalwsd/tests/adversarial/fuzz_corpora.rs`).
//!
//! Each takes any bytes and must not panic, hang or allocate without bound;
//! where a property is cheap to state, it is asserted too (a normalised host
//! or path is a fixed point; a route matches only the paths its kind says;
//! a cached answer is never given for another host, nor for a response that
//! may not be stored).

use std::convert::Infallible;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use scalws_router::{PathMatch, RouteSpec, RouteTableBuilder, normalize_host, normalize_path};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, ServiceExt};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// The configuration loader: any text is a configuration or located errors.
pub(crate) fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Inside a runtime: a loaded configuration may start its pools' timers.
    let _guard = runtime().enter();
    match scalwsd::config::load("fuzz.yaml", text, Path::new("/nonexistent-fuzz-dir")) {
        Ok(config) => drop(config),
        Err(errors) => {
            let shown = errors.to_string();
            assert!(!shown.is_empty(), "an error with no message");
        }
    }
}

/// Host normalisation: a normalised host is lower case, has no trailing
/// dot, and normalises to itself.
pub(crate) fn host(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(host) = normalize_host(raw) else {
        return;
    };
    assert!(!host.is_empty(), "{raw:?} normalised to nothing");
    assert!(
        !host.bytes().any(|b| b.is_ascii_uppercase()),
        "{raw:?} -> {host:?}"
    );
    assert!(!host.ends_with('.'), "{raw:?} -> {host:?}");
    assert_eq!(
        normalize_host(&host).as_deref(),
        Ok(&*host),
        "{raw:?} is not a fixed point"
    );
}

/// Path normalisation: a normalised path starts with `/`, has no `.` or
/// `..` segment (however escaped), and normalises to itself.
pub(crate) fn path(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(path) = normalize_path(raw) else {
        return;
    };
    assert!(path.starts_with('/'), "{raw:?} -> {path:?}");
    for segment in path.split('/') {
        let lowered = segment.to_ascii_lowercase();
        assert!(
            !matches!(
                lowered.as_str(),
                "." | ".." | "%2e" | "%2e%2e" | ".%2e" | "%2e."
            ),
            "{raw:?} -> {path:?} keeps a dot segment"
        );
    }
    assert_eq!(
        normalize_path(&path).as_deref(),
        Ok(&*path),
        "{raw:?} is not a fixed point"
    );
}

/// The route table. Lines starting `e `, `p ` or `t ` are exact, prefix and
/// pattern routes (16 at most); every other line is a request path (16 at
/// most). A path that an exact-and-prefix table routes must go where the
/// rule says: the exact route, else the longest prefix (both normalised like
/// request paths, a prefix's trailing slash ignored), else the first in the
/// file among equals.
pub(crate) fn routes(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut builder = RouteTableBuilder::new();
    let mut accepted: Vec<PathMatch> = Vec::new();
    let mut requests = Vec::new();
    let mut patterns = false;
    for line in text.split('\n').take(64) {
        let spec = match line.split_at_checked(2) {
            Some(("e ", p)) => Some(PathMatch::Exact(p.to_owned())),
            Some(("p ", p)) => Some(PathMatch::Prefix(p.to_owned())),
            Some(("t ", p)) => Some(PathMatch::Pattern(p.to_owned())),
            _ => None,
        };
        match spec {
            Some(spec)
                if accepted.len() < 16
                    && builder
                        .route(RouteSpec::new(spec.clone(), accepted.len()))
                        .is_ok() =>
            {
                patterns |= matches!(spec, PathMatch::Pattern(_));
                // The table normalises exact and prefix paths like request paths.
                accepted.push(match spec {
                    PathMatch::Exact(p) => PathMatch::Exact(normalized(&p)),
                    PathMatch::Prefix(p) => PathMatch::Prefix(normalized(&p)),
                    pattern => pattern,
                });
            }
            Some(_) => {}
            None if requests.len() < 16 => requests.push(line.to_owned()),
            None => {}
        }
    }
    let table = builder.build();
    let headers = HeaderMap::new();
    for raw in requests {
        let Ok(path) = normalize_path(&raw) else {
            continue;
        };
        let found = table.route(&Method::GET, &path, None, &headers);
        if patterns {
            continue;
        }
        let expected = reference_route(&accepted, &path);
        let got = found.ok().map(|m| *m.target);
        assert_eq!(got, expected, "{path:?} against {accepted:?}");
    }
}

fn normalized(path: &str) -> String {
    normalize_path(path).map_or_else(|_| path.to_owned(), |p| p.into_owned())
}

/// The precedence rule for exact and prefix routes, written plainly.
fn reference_route(routes: &[PathMatch], path: &str) -> Option<usize> {
    if let Some(i) = routes
        .iter()
        .position(|r| matches!(r, PathMatch::Exact(p) if p == path))
    {
        return Some(i);
    }
    let mut best: Option<(usize, usize)> = None;
    for (i, route) in routes.iter().enumerate() {
        let PathMatch::Prefix(prefix) = route else {
            continue;
        };
        let trimmed = prefix.trim_end_matches('/');
        let matches = trimmed.is_empty()
            || path == trimmed
            || path
                .strip_prefix(trimmed)
                .is_some_and(|rest| rest.starts_with('/'));
        if matches && best.is_none_or(|(_, len)| trimmed.len() > len) {
            best = Some((i, trimmed.len()));
        }
    }
    best.map(|(i, _)| i)
}

/// The response cache, whole: its `Cache-Control` and `Vary` parsers, its
/// key and its storage rules, through its public layer. The input is a
/// request target and header lines, a blank line, then a status and the
/// response's header lines. The same request is made twice, then once for
/// another host: a cached answer is given only for a storable status and
/// never for a response that sets a cookie, and never for the other host.
pub(crate) fn cache(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (request, response) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut request_lines = request.split('\n');
    let target = request_lines.next().unwrap_or("/");
    let request_headers = header_lines(request_lines);
    let mut response_lines = response.split('\n');
    let status = response_lines
        .next()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let response_headers = header_lines(response_lines);
    let Ok(first) = format!("http://a.test{target}").parse::<http::Uri>() else {
        return;
    };
    let Ok(other) = format!("http://b.test{target}").parse::<http::Uri>() else {
        return;
    };
    if first.path_and_query().is_none() {
        return;
    }

    runtime().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let origin = {
            let calls = calls.clone();
            let headers = response_headers.clone();
            tower::service_fn(move |_request: Request<scalws_core::Body>| {
                calls.fetch_add(1, Ordering::Relaxed);
                let mut response = Response::new(scalws_core::Body::new(Full::new(
                    Bytes::from_static(b"origin body"),
                )));
                *response.status_mut() = status;
                *response.headers_mut() = headers.clone();
                async move { Ok::<_, Infallible>(response) }
            })
        };
        let cache = scalws_cache::Cache::new(scalws_cache::CacheOptions::default());
        let service = cache.layer().layer(origin);
        let send = |uri: http::Uri| {
            let mut request = Request::new(scalws_core::Body::empty());
            *request.uri_mut() = uri;
            *request.headers_mut() = request_headers.clone();
            let service = service.clone();
            async move {
                let answer = tokio::time::timeout(Duration::from_secs(5), async move {
                    let response = service.oneshot(request).await.ok()?;
                    response.into_body().collect().await.ok().map(|_| ())
                })
                .await;
                assert!(answer.is_ok(), "the cache did not answer in 5 s");
            }
        };
        send(first.clone()).await;
        send(first).await;
        let after_two = calls.load(Ordering::Relaxed);
        if after_two == 1 {
            assert!(
                matches!(
                    status.as_u16(),
                    200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414
                ),
                "a {status} was served from the cache"
            );
            assert!(
                !response_headers.contains_key(http::header::SET_COOKIE),
                "a response setting a cookie was served from the cache"
            );
        }
        send(other).await;
        assert_eq!(
            calls.load(Ordering::Relaxed),
            after_two + 1,
            "another host was answered from the cache"
        );
    });
}

/// `name: value` lines as a header map, the ones that are not valid left out.
fn header_lines<'a>(lines: impl Iterator<Item = &'a str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in lines.take(32) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value.trim()),
        ) {
            headers.append(name, value);
        }
    }
    headers
}

/// A gateway with hosts, routes and policies, as an HTTP/1 head meets it:
/// hyper's parser, then the limits, host and route selection, rewrites and
/// answers. Whatever the bytes, the connection ends (within a second of the
/// client closing its side) and every answer is an HTTP/1 response.
pub(crate) fn http1(data: &[u8]) {
    type Gateway = tower::util::BoxCloneService<
        Request<scalws_core::Body>,
        Response<scalws_core::Body>,
        Infallible,
    >;
    thread_local! {
        static GATEWAY: Gateway = {
            let _guard = runtime().enter();
            let config = scalwsd::config::load("fuzz.yaml", HTTP1_CONFIG, Path::new("."))
                .expect("the fuzz configuration loads");
            let limits = scalws_core::RequestLimitsLayer::new(&config.limits);
            tower::util::BoxCloneService::new(limits.layer(config.gateway))
        };
    }
    let gateway = GATEWAY.with(Gateway::clone);
    runtime().block_on(async {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let conn = scalws_core::ConnInfo::new(
            "http".into(),
            scalws_core::Scheme::Http,
            "127.0.0.1:40000".parse().expect("an address"),
            "127.0.0.1:8080".parse().expect("an address"),
            None,
        );
        let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let (mut parts, body) = request.into_parts();
            parts.extensions.insert(conn.clone());
            let request = Request::from_parts(parts, scalws_core::Body::incoming(body, 1 << 20));
            gateway.clone().oneshot(request)
        });
        let served = tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(server);
            let _ = hyper::server::conn::http1::Builder::new()
                .max_buf_size(16 * 1024)
                .serve_connection(io, service)
                .with_upgrades()
                .await;
        });
        let exchange = async {
            let _ = client.write_all(data).await;
            let _ = client.shutdown().await;
            let mut out = Vec::new();
            let _ = client.read_to_end(&mut out).await;
            out
        };
        let out = tokio::time::timeout(Duration::from_secs(1), exchange)
            .await
            .expect("the connection did not end within 1 s of the client closing");
        assert!(
            out.is_empty() || out.starts_with(b"HTTP/1.1 ") || out.starts_with(b"HTTP/1.0 "),
            "not an HTTP/1 answer: {:?}",
            String::from_utf8_lossy(&out[..out.len().min(200)])
        );
        served.abort();
    });
}

const HTTP1_CONFIG: &str = r#"
limits: { max_headers: 32, max_header_bytes: 8KiB, max_request_body: 1KiB }
listeners: [{ name: http, address: "127.0.0.1:8080" }]
applications:
  - name: exact
    domains: [a.test, "[::1]"]
    routes:
      - { path: /, respond: { body: root } }
      - { match: { path: { exact: /login }, methods: [POST] }, respond: { status: 204 } }
      - { match: { path: { pattern: "/users/{id}" } }, respond: { body: user } }
      - { path: /old, redirect: { host: a.test, path: /new, status: 301 } }
  - name: wild
    domains: ["*.b.test"]
    routes:
      - path: /api
        rewrite: { prefix: /v2 }
        request_headers: { set: { x-from: fuzz } }
        response_headers: { set: { x-frame-options: DENY } }
        respond: { body: api }
      - { path: /, respond: { status: 404 } }
  - name: any
    domains: ["*"]
    routes: [{ path: /, respond: { body: any } }]
"#;
