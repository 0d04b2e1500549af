//! Route policies through `Gateway::handle`: the `redirect` action, `rewrite`,
//! request and response header modifiers, and `https_redirect`, with the
//! Gateway API tables where the Gateway API has them. Proxied requests go to a
//! real upstream on 127.0.0.1 that echoes what it received.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use tower::ServiceExt;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, header};
use http_body_util::BodyExt;
use scalws_core::{Body, ConnInfo, Scheme};
use scalws_proxy::upstream::{UpstreamOptions, UpstreamPool};
use scalws_proxy::{
    Action, Application, Gateway, HeaderModifier, InvalidGateway, PathModifier, Proxy, Redirect,
    Respond, Rewrite, Route, StaticFiles, StaticOptions,
};
use scalws_router::{PathMatch, RouteSpec};
use test_support::upstream::{Upstream, ok, refused_addr};

// === helpers ===

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    /// The upstream's echo: the lines starting with `name: `.
    fn echoed(&self, name: &str) -> Vec<&str> {
        let prefix = format!("{name}: ");
        self.text()
            .lines()
            .filter_map(|line| line.strip_prefix(prefix.as_str()))
            .collect()
    }

    /// The upstream's echo: the request line.
    fn request_line(&self) -> &str {
        self.text().lines().next().unwrap()
    }
}

fn conn(scheme: Scheme, local: &str) -> ConnInfo {
    ConnInfo::new(
        "http".into(),
        scheme,
        "127.0.0.1:40000".parse().unwrap(),
        local.parse().unwrap(),
        None,
    )
}

/// GET `target` with `Host: host`, on a connection `conn` (none: no `ConnInfo`).
fn get(host: &str, target: &str, conn: Option<ConnInfo>) -> Request<Body> {
    let mut request = Request::get(target)
        .header(header::HOST, host)
        .body(Body::empty())
        .unwrap();
    if let Some(conn) = conn {
        request.extensions_mut().insert(conn);
    }
    request
}

async fn send(gateway: &Gateway, request: Request<Body>) -> Reply {
    let response = gateway.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

fn route(path: PathMatch, target: impl Into<Route>) -> RouteSpec<Route> {
    RouteSpec {
        path,
        methods: None,
        headers: vec![],
        query: vec![],
        target: target.into(),
    }
}

fn prefix(path: &str, target: impl Into<Route>) -> RouteSpec<Route> {
    route(PathMatch::Prefix(path.into()), target)
}

/// One application for every host, on listener `http`.
fn gateway(routes: Vec<RouteSpec<Route>>) -> Gateway {
    let mut site = Application::builder("site").domain("*").unwrap();
    for spec in routes {
        site.add_route(spec).unwrap();
    }
    Gateway::builder()
        .listener("http")
        .application(site)
        .build()
        .unwrap()
}

fn respond(body: &'static str) -> Action {
    Action::Respond(Respond::new(StatusCode::OK, body))
}

fn proxy_to(addr: SocketAddr) -> Action {
    let options = UpstreamOptions {
        addresses: vec![(addr, 1)],
        ..UpstreamOptions::default()
    };
    Action::Proxy(Proxy::new(UpstreamPool::new("echo", options).unwrap()))
}

fn name(n: &str) -> HeaderName {
    HeaderName::from_bytes(n.as_bytes()).unwrap()
}

fn value(v: &'static str) -> HeaderValue {
    HeaderValue::from_static(v)
}

/// An upstream that answers with its request line and headers, one per line,
/// and with response headers a test can modify.
async fn echo() -> Upstream {
    Upstream::start(|req| async move {
        let mut text = format!("{} {}\n", req.method(), req.uri());
        for (name, value) in req.headers() {
            text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
        }
        let mut response = ok(text);
        let headers = response.headers_mut();
        headers.insert("x-up-set", value("old"));
        headers.append("x-up-add", value("a"));
        headers.insert("x-up-remove", value("1"));
        headers.insert("server", value("upstream"));
        response
    })
    .await
}

// === redirect ===

/// (redirect, connection, Host, request target, status, Location)
type RedirectCase = (
    Redirect,
    Option<ConnInfo>,
    &'static str,
    &'static str,
    u16,
    &'static str,
);

#[tokio::test]
async fn redirect_table() {
    let http = |port: u16| Some(conn(Scheme::Http, &format!("127.0.0.1:{port}")));
    let https = |port: u16| Some(conn(Scheme::Https, &format!("127.0.0.1:{port}")));
    let full = |p: &str| PathModifier::full(p).unwrap();
    let replace = |p: &str| PathModifier::prefix(p).unwrap();
    let status = |s: u16| StatusCode::from_u16(s).unwrap();
    #[rustfmt::skip]
    let table: Vec<RedirectCase> = vec![
        // Defaults: 302, the request's scheme and host, the listener's port.
        (Redirect::new(), http(8080), "example.com:8080", "/foo/bar?x=1", 302, "http://example.com:8080/foo/bar?x=1"),
        (Redirect::new(), http(80), "Example.COM", "/foo", 302, "http://example.com/foo"),
        (Redirect::new(), https(8443), "example.com", "/foo", 302, "https://example.com:8443/foo"),
        (Redirect::new(), https(443), "example.com", "/foo", 302, "https://example.com/foo"),
        // No connection info: the port the client wrote.
        (Redirect::new(), None, "example.com:8080", "/foo", 302, "http://example.com:8080/foo"),
        // A scheme without a port: the scheme's well-known port, left out.
        (Redirect::new().scheme(Scheme::Https), http(8080), "example.com:8080", "/foo/bar?x=1", 302, "https://example.com/foo/bar?x=1"),
        (Redirect::new().scheme(Scheme::Http), https(8443), "example.com", "/foo", 302, "http://example.com/foo"),
        // A port: kept unless it is the scheme's well-known one.
        (Redirect::new().scheme(Scheme::Https).port(8443), http(80), "example.com", "/foo", 302, "https://example.com:8443/foo"),
        (Redirect::new().scheme(Scheme::Https).port(443), http(80), "example.com", "/foo", 302, "https://example.com/foo"),
        (Redirect::new().scheme(Scheme::Http).port(80), http(8080), "example.com", "/foo", 302, "http://example.com/foo"),
        (Redirect::new().port(443), http(8080), "example.com", "/foo", 302, "http://example.com:443/foo"),
        (Redirect::new().port(9000), http(8080), "example.com", "/foo", 302, "http://example.com:9000/foo"),
        // A host: the listener's port still applies without a scheme.
        (Redirect::new().host("www.example.org").unwrap(), http(8080), "example.com:8080", "/foo?q", 302, "http://www.example.org:8080/foo?q"),
        (Redirect::new().host("WWW.example.org").unwrap().scheme(Scheme::Https), http(8080), "example.com", "/foo", 302, "https://www.example.org/foo"),
        // Paths: full replacement and ReplacePrefixMatch; the query is kept.
        (Redirect::new().path(full("/new")), http(80), "example.com", "/foo/bar?x=1&y=2", 302, "http://example.com/new?x=1&y=2"),
        (Redirect::new().path(replace("/xyz")), http(80), "example.com", "/foo/bar?x=1", 302, "http://example.com/xyz/bar?x=1"),
        (Redirect::new().path(replace("/xyz/")), http(80), "example.com", "/foo/bar", 302, "http://example.com/xyz/bar"),
        (Redirect::new().path(replace("/xyz")), http(80), "example.com", "/foo", 302, "http://example.com/xyz"),
        (Redirect::new().path(replace("/xyz")), http(80), "example.com", "/foo/", 302, "http://example.com/xyz/"),
        (Redirect::new().path(replace("")), http(80), "example.com", "/foo/bar", 302, "http://example.com/bar"),
        (Redirect::new().path(replace("")), http(80), "example.com", "/foo", 302, "http://example.com/"),
        (Redirect::new().path(replace("/")), http(80), "example.com", "/foo/bar", 302, "http://example.com/bar"),
        (Redirect::new().path(replace("/")), http(80), "example.com", "/foo/", 302, "http://example.com/"),
        // Statuses.
        (Redirect::new().status(status(301)).unwrap(), http(80), "example.com", "/foo", 301, "http://example.com/foo"),
        (Redirect::new().status(status(303)).unwrap(), http(80), "example.com", "/foo", 303, "http://example.com/foo"),
        (Redirect::new().status(status(307)).unwrap(), http(80), "example.com", "/foo", 307, "http://example.com/foo"),
        (Redirect::new().status(status(308)).unwrap(), http(80), "example.com", "/foo", 308, "http://example.com/foo"),
        // Everything at once.
        (Redirect::new().scheme(Scheme::Https).host("www.example.com").unwrap().port(8443).path(replace("/v2")).status(status(301)).unwrap(), http(8080), "example.com:8080", "/foo/a/b?c=d", 301, "https://www.example.com:8443/v2/a/b?c=d"),
    ];
    for (redirect, conn, host, target, want_status, want_location) in table {
        let case = format!("{redirect:?} for {host}{target}");
        let gateway = gateway(vec![prefix("/foo", Action::Redirect(redirect))]);
        let reply = send(&gateway, get(host, target, conn)).await;
        assert_eq!(reply.status.as_u16(), want_status, "{case}");
        assert_eq!(reply.header("location"), Some(want_location), "{case}");
        assert_eq!(reply.header("content-length"), Some("0"), "{case}");
        assert!(reply.body.is_empty(), "{case}");
    }
}

#[tokio::test]
async fn redirect_on_the_root_prefix_and_an_exact_path() {
    let gateway = gateway(vec![
        route(
            PathMatch::Exact("/old".into()),
            Action::Redirect(Redirect::new().path(PathModifier::full("/new").unwrap())),
        ),
        prefix(
            "/",
            Action::Redirect(Redirect::new().path(PathModifier::prefix("/v2").unwrap())),
        ),
    ]);
    let http = || Some(conn(Scheme::Http, "127.0.0.1:80"));
    let reply = send(&gateway, get("example.com", "/old?a=1", http())).await;
    assert_eq!(reply.header("location"), Some("http://example.com/new?a=1"));
    let reply = send(&gateway, get("example.com", "/a/b", http())).await;
    assert_eq!(reply.header("location"), Some("http://example.com/v2/a/b"));
}

#[test]
fn redirect_status_and_host_are_checked() {
    let error = Redirect::new().status(StatusCode::OK).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid redirect status 200 (expected 301, 302, 303, 307 or 308)"
    );
    for bad in ["example.com:8080", "a b", "user@example.com", ""] {
        assert!(Redirect::new().host(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_prefix_replacement_needs_a_prefix_route() {
    let redirect = Redirect::new().path(PathModifier::prefix("/x").unwrap());
    let mut site = Application::builder("site").domain("*").unwrap();
    let error = site
        .add_route(route(
            PathMatch::Exact("/login".into()),
            Action::Redirect(redirect),
        ))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid route path \"/login\": a prefix replacement needs a prefix route"
    );
    let rewrite = Rewrite::new().path(PathModifier::prefix("/x").unwrap());
    let error = site
        .add_route(route(
            PathMatch::Pattern("/users/{id}".into()),
            Route::new(respond("hi")).rewrite(rewrite),
        ))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid route path \"/users/{id}\": a prefix replacement needs a prefix route"
    );
    // A full replacement is fine anywhere.
    let rewrite = Rewrite::new().path(PathModifier::full("/x").unwrap());
    site.add_route(route(
        PathMatch::Exact("/login".into()),
        Route::new(respond("hi")).rewrite(rewrite),
    ))
    .unwrap();
}

// === rewrite ===

#[tokio::test]
async fn rewrite_table_seen_by_the_upstream() {
    let upstream = echo().await;
    let to = |modifier: PathModifier| {
        Route::new(proxy_to(upstream.addr)).rewrite(Rewrite::new().path(modifier))
    };
    let replace = |p: &str| PathModifier::prefix(p).unwrap();
    let gateway = gateway(vec![
        prefix("/foo", to(replace("/xyz"))),
        prefix("/trailing/", to(replace("/xyz/"))),
        prefix("/empty", to(replace(""))),
        prefix("/slash", to(replace("/"))),
        prefix("/full", to(PathModifier::full("/replaced").unwrap())),
        route(
            PathMatch::Exact("/exact".into()),
            to(PathModifier::full("/other/path").unwrap()),
        ),
        prefix("/", proxy_to(upstream.addr)),
    ]);
    // (request target, what the upstream receives)
    let table = [
        ("/foo/bar", "/xyz/bar"),
        ("/foo/bar?x=1&y", "/xyz/bar?x=1&y"),
        ("/foo", "/xyz"),
        ("/foo/", "/xyz/"),
        ("/foo/a/b/", "/xyz/a/b/"),
        ("/trailing/bar", "/xyz/bar"),
        ("/trailing", "/xyz"),
        ("/empty/bar", "/bar"),
        ("/empty/", "/"),
        ("/empty", "/"),
        ("/slash/bar", "/bar"),
        ("/slash", "/"),
        ("/slash/", "/"),
        // Matched after normalisation, so replaced after it too.
        ("/foo/./a/../b", "/xyz/b"),
        ("/full/a/b?q=1", "/replaced?q=1"),
        ("/exact?q=2", "/other/path?q=2"),
        // Not rewritten.
        ("/foobar", "/foobar"),
    ];
    for (target, want) in table {
        let reply = send(&gateway, get("app.test", target, None)).await;
        assert_eq!(reply.status, StatusCode::OK, "{target}");
        assert_eq!(reply.request_line(), format!("GET {want}"), "{target}");
    }
}

#[tokio::test]
async fn rewrite_host_sets_host_and_authority() {
    let upstream = echo().await;
    let rewrite = Rewrite::new().host("internal.example:9000").unwrap();
    let gateway = gateway(vec![prefix(
        "/",
        Route::new(proxy_to(upstream.addr)).rewrite(rewrite),
    )]);
    // HTTP/1.1: Host.
    let reply = send(&gateway, get("app.test", "/x?y=1", None)).await;
    assert_eq!(reply.request_line(), "GET /x?y=1");
    assert_eq!(reply.echoed("host"), ["internal.example:9000"]);
    // HTTP/2 (the host in the URI): the authority too, and Host for the upstream.
    let mut request = Request::get("http://app.test/x")
        .version(http::Version::HTTP_2)
        .body(Body::empty())
        .unwrap();
    request
        .extensions_mut()
        .insert(conn(Scheme::Http, "127.0.0.1:80"));
    let reply = send(&gateway, request).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.echoed("host"), ["internal.example:9000"]);

    for bad in ["a b", "user@host", ""] {
        assert!(Rewrite::new().host(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn rewrite_before_static_serves_the_rewritten_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("v2")).unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello").unwrap();
    std::fs::write(dir.path().join("v2/hello.txt"), "hello v2").unwrap();
    let files = StaticFiles::new(StaticOptions {
        root: dir.path().to_path_buf(),
        index: None,
        listing: false,
        strip_prefix: String::new(),
        ..StaticOptions::default()
    })
    .unwrap();
    let to = |replacement: &str| {
        Route::new(Action::Static(files.clone()))
            .rewrite(Rewrite::new().path(PathModifier::prefix(replacement).unwrap()))
    };
    let gateway = gateway(vec![prefix("/assets", to("/")), prefix("/new", to("/v2"))]);
    let reply = send(&gateway, get("app.test", "/assets/hello.txt", None)).await;
    assert_eq!((reply.status, reply.text()), (StatusCode::OK, "hello"));
    let reply = send(&gateway, get("app.test", "/new/hello.txt", None)).await;
    assert_eq!((reply.status, reply.text()), (StatusCode::OK, "hello v2"));
}

// === header modifiers ===

#[tokio::test]
async fn request_headers_set_add_remove_seen_by_the_upstream() {
    let upstream = echo().await;
    let modifier = HeaderModifier::new()
        .set(name("X-Set"), value("new"))
        .add(name("X-Add"), value("2"))
        .add(name("x-fresh"), value("fresh"))
        .remove(name("X-REMOVE"));
    let gateway = gateway(vec![
        prefix(
            "/modified",
            Route::new(proxy_to(upstream.addr)).request_headers(modifier),
        ),
        prefix("/", proxy_to(upstream.addr)),
    ]);
    let request = |path: &str| {
        let mut request = get("app.test", path, None);
        let headers = request.headers_mut();
        headers.append("x-set", value("old1"));
        headers.append("x-set", value("old2"));
        headers.insert("x-add", value("1"));
        headers.insert("x-remove", value("gone"));
        headers.insert("x-other", value("kept"));
        request
    };
    let reply = send(&gateway, request("/modified")).await;
    assert_eq!(reply.echoed("x-set"), ["new"], "{}", reply.text());
    assert_eq!(reply.echoed("x-add"), ["1,2"]);
    assert_eq!(reply.echoed("x-fresh"), ["fresh"]);
    assert!(reply.echoed("x-remove").is_empty());
    assert_eq!(reply.echoed("x-other"), ["kept"]);
    // Another route of the same application is untouched.
    let reply = send(&gateway, request("/plain")).await;
    assert_eq!(reply.echoed("x-set"), ["old1", "old2"]);
    assert_eq!(reply.echoed("x-remove"), ["gone"]);
}

#[tokio::test]
async fn response_headers_on_every_response_of_the_route() {
    let upstream = echo().await;
    let modifier = || {
        HeaderModifier::new()
            .set(name("X-Up-Set"), value("new"))
            .add(name("X-UP-ADD"), value("b"))
            .add(name("x-policy"), value("yes"))
            .remove(name("Server"))
            .remove(name("x-up-remove"))
    };
    let gateway = gateway(vec![
        prefix(
            "/proxied",
            Route::new(proxy_to(upstream.addr)).response_headers(modifier()),
        ),
        prefix(
            "/down",
            Route::new(proxy_to(refused_addr())).response_headers(modifier()),
        ),
        prefix(
            "/fixed",
            Route::new(respond("hi")).response_headers(modifier()),
        ),
        prefix("/", proxy_to(upstream.addr)),
    ]);
    let reply = send(&gateway, get("app.test", "/proxied", None)).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("x-up-set"), Some("new"));
    assert_eq!(reply.header("x-up-add"), Some("a,b"));
    assert_eq!(reply.header("x-policy"), Some("yes"));
    assert_eq!(reply.header("server"), None);
    assert_eq!(reply.header("x-up-remove"), None);
    // An error of the action.
    let reply = send(&gateway, get("app.test", "/down", None)).await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert_eq!(reply.header("x-policy"), Some("yes"));
    // A response that is ready at once.
    let reply = send(&gateway, get("app.test", "/fixed", None)).await;
    assert_eq!((reply.status, reply.text()), (StatusCode::OK, "hi"));
    assert_eq!(reply.header("x-policy"), Some("yes"));
    // Another route: untouched.
    let reply = send(&gateway, get("app.test", "/other", None)).await;
    assert_eq!(reply.header("server"), Some("upstream"));
    assert_eq!(reply.header("x-policy"), None);
}

// === https_redirect ===

fn redirecting(application_flag: bool, https_port: u16) -> Gateway {
    let site = Application::builder("site")
        .domain("*")
        .unwrap()
        .https_redirect(application_flag)
        .route(prefix(
            "/secure",
            Route::new(respond("secure")).https_redirect(true),
        ))
        .unwrap()
        .route(prefix("/", respond("open")))
        .unwrap();
    Gateway::builder()
        .listener("http")
        .https_port(https_port)
        .application(site)
        .build()
        .unwrap()
}

#[tokio::test]
async fn https_redirect_for_an_application() {
    for (port, want) in [
        (443, "https://example.com/a/b?q=1&r"),
        (8443, "https://example.com:8443/a/b?q=1&r"),
    ] {
        let gateway = redirecting(true, port);
        for conn in [Some(conn(Scheme::Http, "127.0.0.1:8080")), None] {
            let plain = conn.is_some();
            let reply = send(&gateway, get("Example.com:8080", "/a/b?q=1&r", conn)).await;
            assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT, "{plain}");
            assert_eq!(reply.header("location"), Some(want));
            assert!(reply.body.is_empty());
        }
        // Never on https.
        let https = Some(conn(Scheme::Https, &format!("127.0.0.1:{port}")));
        let reply = send(&gateway, get("example.com", "/a/b?q=1", https)).await;
        assert_eq!((reply.status, reply.text()), (StatusCode::OK, "open"));
    }
}

#[tokio::test]
async fn https_redirect_for_an_application_comes_before_routing() {
    let site = Application::builder("site")
        .domain("*")
        .unwrap()
        .https_redirect(true)
        .route(prefix("/only", respond("only")))
        .unwrap();
    let gateway = Gateway::builder()
        .listener("http")
        .https_port(443)
        .application(site)
        .build()
        .unwrap();
    let reply = send(&gateway, get("example.com", "/elsewhere", None)).await;
    assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(
        reply.header("location"),
        Some("https://example.com/elsewhere")
    );
}

#[tokio::test]
async fn https_redirect_for_a_route() {
    let gateway = redirecting(false, 8443);
    let http = || Some(conn(Scheme::Http, "127.0.0.1:8080"));
    let reply = send(&gateway, get("example.com:8080", "/secure/x?y=2", http())).await;
    assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(
        reply.header("location"),
        Some("https://example.com:8443/secure/x?y=2")
    );
    let reply = send(&gateway, get("example.com", "/secure", None)).await;
    assert_eq!(
        reply.header("location"),
        Some("https://example.com:8443/secure")
    );
    // Other routes of the application answer on plain HTTP.
    let reply = send(&gateway, get("example.com", "/open", http())).await;
    assert_eq!((reply.status, reply.text()), (StatusCode::OK, "open"));
    // The route itself answers on https.
    let https = Some(conn(Scheme::Https, "127.0.0.1:8443"));
    let reply = send(&gateway, get("example.com", "/secure/x", https)).await;
    assert_eq!((reply.status, reply.text()), (StatusCode::OK, "secure"));

    let gateway = redirecting(false, 443);
    let reply = send(&gateway, get("example.com", "/secure/x", http())).await;
    assert_eq!(
        reply.header("location"),
        Some("https://example.com/secure/x")
    );
}

#[test]
fn https_redirect_needs_an_https_port() {
    for (app_flag, route_flag) in [(true, false), (false, true)] {
        let site = Application::builder("site")
            .domain("*")
            .unwrap()
            .https_redirect(app_flag)
            .route(prefix(
                "/",
                Route::new(respond("hi")).https_redirect(route_flag),
            ))
            .unwrap();
        let error = Gateway::builder()
            .listener("http")
            .application(site)
            .build()
            .unwrap_err();
        assert!(matches!(error, InvalidGateway::NoHttpsPort { .. }));
        assert_eq!(
            error.to_string(),
            "application \"site\" uses https_redirect, but the gateway has no https port"
        );
    }
}
