//! The library as an embedder uses it, over real sockets: routing statuses,
//! the split, tunnels, the embedder's layers at each point, the pool alone,
//! and `Gateway::explain` agreeing with what the gateway answers.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use scalws_core::tls::{CertificateFiles, TlsCertificates};
use scalws_core::{Body, ConnInfo, Limits, ListenerProtocol, ListenerSpec, Scheme, Server};
use scalws_proxy::upstream::{UpstreamOptions, UpstreamPool, UpstreamService};
use scalws_proxy::{
    Action, Application, ApplicationBuilder, Backend, Backends, Gateway, HeaderModifier,
    HttpService, Outcome, PathModifier, PolicyLayer, Proxy, RequestHeaders, Respond, Rewrite,
    Route, Split, StaticFiles, StaticOptions, TimeoutLayer,
};
use scalws_router::RouteSpec;
use test_support::tls::{TestCa, https};
use test_support::upstream::{Upstream, echo, websocket_echo};
use test_support::{Proto, TestClient, request};
use tower::layer::layer_fn;
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceExt, service_fn};

fn text(body: &'static str) -> Action {
    Action::Respond(Respond::new(StatusCode::OK, body))
}

fn pool(addr: SocketAddr) -> UpstreamPool {
    UpstreamPool::new(
        "app",
        UpstreamOptions {
            addresses: vec![(addr, 1)],
            ..UpstreamOptions::default()
        },
    )
    .unwrap()
}

async fn serve<S>(listeners: Vec<ListenerSpec>, service: S) -> Vec<SocketAddr>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let server = Server::bind(&listeners, Limits::default()).unwrap();
    let addrs = server.local_addrs().into_iter().map(|(_, a)| a).collect();
    tokio::spawn(server.serve(service, std::future::pending()));
    addrs
}

/// A gateway of one listener, `http`, and one application.
fn one_app(app: ApplicationBuilder) -> Gateway {
    Gateway::builder()
        .listener("http")
        .application(app)
        .build()
        .unwrap()
}

fn plain() -> Vec<ListenerSpec> {
    vec![ListenerSpec::http("http", "127.0.0.1:0".parse().unwrap())]
}

#[tokio::test]
async fn routing_answers_400_404_405_and_421_itself() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let (a_cert, a_key) = ca.issue(dir.path(), "a", &["a.test"], false);
    let (b_cert, b_key) = ca.issue(dir.path(), "b", &["b.test"], false);
    let certificates = TlsCertificates::load(&[
        CertificateFiles {
            cert: a_cert,
            key: a_key,
        },
        CertificateFiles {
            cert: b_cert,
            key: b_key,
        },
    ])
    .unwrap();
    let app = |name: &'static str, domain: &str| {
        Application::builder(name)
            .domain(domain)
            .unwrap()
            .route(RouteSpec::prefix("/", text(name)).methods([Method::GET]))
            .unwrap()
    };
    let unrouted = Arc::new(scalws_proxy::metrics::RouteMetrics::default());
    let gateway = Gateway::builder()
        .listener("http")
        .listener("https")
        .unrouted_metrics(unrouted.clone())
        .application(app("a", "a.test"))
        .application(app("b", "b.test"))
        .build()
        .unwrap();
    let listeners = vec![
        ListenerSpec::http("http", "127.0.0.1:0".parse().unwrap()),
        ListenerSpec {
            name: "https".into(),
            address: "127.0.0.1:0".parse().unwrap(),
            protocol: ListenerProtocol::Https(certificates),
        },
    ];
    let addrs = serve(listeners, gateway).await;
    let (http, tls) = (addrs[0], addrs[1]);

    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        assert_eq!(client.get(http, "a.test", "/").await.text(), "a");
        assert_eq!(client.get(http, "c.test", "/").await.status, 404);
        assert_eq!(client.get(http, "a.test", "/../../x").await.status, 400);
        let post = request("POST", "a.test", "/")
            .body(Default::default())
            .unwrap();
        let refused = client.send(http, post).await;
        assert_eq!(
            (refused.status, refused.header("allow")),
            (405, Some("GET"))
        );
    }
    let raw =
        test_support::raw_exchange(http, b"GET / HTTP/1.0\r\n\r\n", Duration::from_secs(2)).await;
    assert!(raw.starts_with("HTTP/1.0 400"), "{raw}");

    // A connection for b.test asking for a.test: 421; for its own host: 200.
    for h2 in [false, true] {
        let config = ca.client_config(if h2 { &[b"h2"] } else { &[b"http/1.1"] });
        let get = |host: &str| {
            Request::get(format!("https://{host}/"))
                .header(header::HOST, host)
                .body(Default::default())
                .unwrap()
        };
        let own = https(config.clone(), tls, "b.test", h2, get("b.test")).await;
        assert_eq!(own.reply.text(), "b");
        let other = https(config, tls, "b.test", h2, get("a.test")).await;
        assert_eq!(other.reply.status, 421);
    }
    // Each of these answers (404, 400, 405 for each protocol, the raw 400,
    // and the two 421s) counted once as unrouted; the routed ones not.
    let counted = unrouted.snapshot();
    assert_eq!(counted.classes, [0, 0, 0, 9, 0]);
    assert_eq!(counted.count(), 9);
}

#[tokio::test]
async fn a_split_over_the_embedders_services_honours_weights() {
    let counted = |hits: Arc<AtomicUsize>, body: &'static str| {
        scalws_proxy::boxed(service_fn(move |_request: Request<Body>| {
            hits.fetch_add(1, Ordering::Relaxed);
            async move { Ok::<_, Infallible>(Response::new(Body::from(body))) }
        }))
    };
    let (blue, green, never) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let split: Split<HttpService> = Split::new([
        (counted(blue.clone(), "blue"), 3),
        (counted(green.clone(), "green"), 1),
        (counted(never.clone(), "never"), 0),
    ]);
    let addr = serve(plain(), split).await[0];
    let client = TestClient::new(Proto::Http1);
    for _ in 0..200 {
        let reply = client.get(addr, "any.test", "/").await;
        assert!(
            ["blue", "green"].contains(&reply.text()),
            "{}",
            reply.text()
        );
    }
    let (blue, green) = (blue.load(Ordering::Relaxed), green.load(Ordering::Relaxed));
    assert_eq!(blue + green, 200);
    assert_eq!(never.load(Ordering::Relaxed), 0);
    assert_eq!(blue, 150, "blue {blue} of 200: 3 of every 4");

    // The backends action's own split: proxies and statuses.
    let upstream = Upstream::named("up").await;
    let backends = Backends::new([
        (Backend::Proxy(Proxy::new(pool(upstream.addr))), 1),
        (Backend::Status(StatusCode::IM_A_TEAPOT), 0),
    ]);
    let addr = serve(plain(), backends).await[0];
    assert_eq!(client.get(addr, "x.test", "/").await.text(), "up");
}

#[tokio::test]
async fn a_proxy_alone_tunnels_a_websocket_on_101() {
    use futures_util::{SinkExt, StreamExt};
    let upstream = websocket_echo().await;
    let proxy = Proxy::new(pool(upstream));
    let addr = serve(plain(), proxy).await[0];
    let (mut socket, response) = tokio_tungstenite::connect_async(format!("ws://{addr}/chat"))
        .await
        .unwrap();
    assert_eq!(response.status(), 101);
    socket.send("ping".into()).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(echoed.into_text().unwrap().as_str(), "ping");
}

/// A layer that appends `name` to the `x-trail` response header.
fn trail(
    name: &'static str,
) -> impl Layer<
    HttpService,
    Service: Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
                 + Clone
                 + Send
                 + Sync,
> + Clone
+ Send
+ Sync
+ 'static {
    layer_fn(move |inner: HttpService| {
        service_fn(move |request: Request<Body>| {
            let inner = inner.clone();
            async move {
                let mut response = inner.oneshot(request).await?;
                let before = response
                    .headers()
                    .get("x-trail")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let value = match before {
                    Some(before) => format!("{before},{name}"),
                    None => name.to_owned(),
                };
                response
                    .headers_mut()
                    .insert("x-trail", HeaderValue::from_str(&value).unwrap());
                Ok::<_, Infallible>(response)
            }
        })
    })
}

#[tokio::test]
async fn the_embedders_layers_run_where_they_are_put() {
    let upstream = echo(&[]).await;
    let upstream_calls = Arc::new(AtomicUsize::new(0));
    let calls = upstream_calls.clone();
    let count_upstream = layer_fn(move |inner: UpstreamService| {
        let calls = calls.clone();
        service_fn(move |mut request: Request<Body>| {
            calls.fetch_add(1, Ordering::Relaxed);
            // It sees the request as the upstream will: X-Forwarded-For is set.
            let forwarded = request.headers().contains_key("x-forwarded-for");
            request.headers_mut().insert(
                "x-layer-saw-forwarding",
                HeaderValue::from_static(if forwarded { "yes" } else { "no" }),
            );
            inner.clone().oneshot(request)
        })
    });
    let proxy = Proxy::new(pool(upstream.addr)).upstream_layer(count_upstream);
    let route = Route::new(Action::Proxy(proxy))
        .request_headers(HeaderModifier::new().set(
            header::HeaderName::from_static("x-policy"),
            HeaderValue::from_static("ran"),
        ))
        .layer(trail("route"));
    let app = Application::builder("app")
        .domain("*")
        .unwrap()
        .layer(trail("application"))
        .route(RouteSpec::prefix("/proxied", route))
        .unwrap()
        .route(RouteSpec::prefix("/", text("plain")))
        .unwrap();
    let gateway = one_app(app);
    // Around everything, boxed as tower's own BoxCloneService (not Sync).
    let everything: BoxCloneService<Request<Body>, Response<Body>, Infallible> =
        BoxCloneService::new(trail("everything").layer(gateway.boxed()));
    let addr = serve(plain(), everything).await[0];

    let client = TestClient::new(Proto::H2c);
    let proxied = client.get(addr, "x.test", "/proxied/a").await;
    assert_eq!(proxied.status, 200);
    assert_eq!(
        proxied.header("x-trail"),
        Some("route,application,everything")
    );
    let seen = proxied.text();
    assert!(seen.contains("x-policy: ran\n"), "{seen}");
    assert!(seen.contains("x-layer-saw-forwarding: yes\n"), "{seen}");
    assert_eq!(upstream_calls.load(Ordering::Relaxed), 1);

    let plain_route = client.get(addr, "x.test", "/other").await;
    assert_eq!(
        plain_route.header("x-trail"),
        Some("application,everything")
    );
    assert_eq!(upstream_calls.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn an_upstream_layer_added_after_the_cache_runs_on_misses() {
    let upstream = echo(&[("cache-control", "max-age=60")]).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let count = layer_fn(move |inner: UpstreamService| {
        let counted = counted.clone();
        service_fn(move |request: Request<Body>| {
            counted.fetch_add(1, Ordering::Relaxed);
            inner.clone().oneshot(request)
        })
    });
    let cache = scalws_cache::Cache::new(scalws_cache::CacheOptions::default());
    let proxy = Proxy::new(pool(upstream.addr))
        .with_cache(&cache, "p")
        .upstream_layer(count);
    let addr = serve(plain(), proxy).await[0];
    let client = TestClient::new(Proto::Http1);
    for _ in 0..3 {
        assert_eq!(client.get(addr, "x.test", "/cached").await.status, 200);
    }
    // One miss went through the layer to the upstream; the rest were hits.
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(upstream.hits(), 1);
}

#[tokio::test]
async fn policy_layers_work_outside_a_gateway() {
    let upstream = echo(&[]).await;
    let service = tower::ServiceBuilder::new()
        .layer(scalws_proxy::ResponseHeadersLayer::new(
            HeaderModifier::new().set(
                header::HeaderName::from_static("x-response"),
                HeaderValue::from_static("set"),
            ),
        ))
        .layer(TimeoutLayer::new(Duration::from_secs(5)))
        .layer(PolicyLayer::new(RequestHeaders(HeaderModifier::new().set(
            header::HeaderName::from_static("x-request"),
            HeaderValue::from_static("set"),
        ))))
        .service(Proxy::new(pool(upstream.addr)));
    let addr = serve(plain(), service).await[0];
    let reply = TestClient::new(Proto::Http1)
        .get(addr, "x.test", "/p")
        .await;
    assert_eq!(reply.header("x-response"), Some("set"));
    assert!(
        reply.text().contains("x-request: set\n"),
        "{}",
        reply.text()
    );
}

#[tokio::test]
async fn the_pool_alone_balances_and_fails_over() {
    let (a, b) = (Upstream::named("a").await, Upstream::named("b").await);
    let pool = UpstreamPool::new(
        "two",
        UpstreamOptions {
            addresses: vec![
                (a.addr, 1),
                (b.addr, 1),
                (test_support::upstream::refused_addr(), 1),
            ],
            retries: 2,
            ..UpstreamOptions::default()
        },
    )
    .unwrap();
    for _ in 0..12 {
        let request = Request::get("/")
            .header(header::HOST, "x")
            .body(Body::empty())
            .unwrap();
        let response = pool.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(a.hits() + b.hits(), 12);
    assert!(
        a.hits() >= 4 && b.hits() >= 4,
        "a {} b {}",
        a.hits(),
        b.hits()
    );
}

#[tokio::test]
async fn explain_agrees_with_the_answer() {
    let app = Application::builder("app")
        .domain("**.example.com")
        .unwrap()
        .route(RouteSpec::exact("/login", text("login")).methods([Method::POST]))
        .unwrap()
        .route(RouteSpec::prefix("/api", text("canary")).header(
            header::HeaderName::from_static("x-canary"),
            HeaderValue::from_static("1"),
        ))
        .unwrap()
        .route(RouteSpec::prefix("/api", text("api")))
        .unwrap();
    let gateway = one_app(app);
    /// Method, host, path, headers, the status expected.
    type Case<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a str)], u16);
    let cases: &[Case<'_>] = &[
        ("GET", "a.b.example.com", "/api/x", &[], 200),
        ("GET", "b.example.com", "/api/x", &[("x-canary", "1")], 200),
        ("GET", "x.example.com", "/login", &[], 405),
        ("POST", "x.example.com", "/login", &[], 200),
        ("GET", "other.org", "/", &[], 404),
        ("GET", "x.example.com", "/nothing", &[], 404),
    ];
    for &(method, host, path, headers, status) in cases {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, host);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(Body::empty()).unwrap();
        request.extensions_mut().insert(ConnInfo::new(
            "http".into(),
            Scheme::Http,
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
            None,
        ));
        let (parts, body) = request.into_parts();
        let explained = match gateway.explain(&parts).outcome {
            Outcome::Route(route) => {
                let request = Request::from_parts(parts.clone(), Body::empty());
                let response = route.action().clone().oneshot(request).await.unwrap();
                (response.status().as_u16(), body_text(response).await)
            }
            Outcome::Refused(status, _) => (status.as_u16(), String::new()),
            other => panic!("{other:?}"),
        };
        let answered = gateway
            .clone()
            .oneshot(Request::from_parts(parts, body))
            .await
            .unwrap();
        let answered_status = answered.status().as_u16();
        let answered_body = body_text(answered).await;
        assert_eq!(explained.0, status, "{method} {host}{path}");
        assert_eq!(answered_status, status, "{method} {host}{path}");
        if status == 200 {
            assert_eq!(explained.1, answered_body, "{method} {host}{path}");
        }
        if !headers.is_empty() {
            assert_eq!(answered_body, "canary");
        }
    }
}

async fn body_text(response: Response<Body>) -> String {
    use http_body_util::BodyExt;
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn an_applications_routes_are_counted_under_their_labels() {
    let registry = scalws_proxy::metrics::Metrics::new();
    let app = Application::builder("shop")
        .domain("*")
        .unwrap()
        .metrics(&registry)
        .route(RouteSpec::exact("/login", text("login")))
        .unwrap()
        .route(RouteSpec::prefix("/api", text("canary")).query("canary", "1"))
        .unwrap()
        .route(RouteSpec::prefix("/api", text("api")))
        .unwrap();
    let gateway = one_app(app);
    let addr = serve(plain(), gateway).await[0];
    let client = TestClient::new(Proto::Http1);
    assert_eq!(client.get(addr, "x", "/api/a").await.text(), "api");
    assert_eq!(
        client.get(addr, "x", "/api/a?canary=1").await.text(),
        "canary"
    );
    assert_eq!(client.get(addr, "x", "/login").await.text(), "login");
    let mut counted: Vec<(String, u64)> = registry
        .snapshot()
        .into_iter()
        .filter(|(app, _, _)| app == "shop")
        .map(|(_, label, snapshot)| (label, snapshot.count()))
        .collect();
    counted.sort();
    let expected = [("/api", 1), ("/api #2", 1), ("=/login", 1)];
    let expected: Vec<(String, u64)> = expected.iter().map(|(l, n)| (l.to_string(), *n)).collect();
    assert_eq!(counted, expected);
}

#[tokio::test]
async fn https_redirect_and_metrics_layers_work_outside_a_gateway() {
    let counters = Arc::new(scalws_proxy::metrics::RouteMetrics::default());
    let service = tower::ServiceBuilder::new()
        .layer(scalws_proxy::metrics::MetricsLayer::new(counters.clone()))
        .layer(PolicyLayer::new(scalws_proxy::HttpsRedirect::to_port(8443)))
        .service(Respond::new(StatusCode::OK, "secure"));
    let addr = serve(plain(), service).await[0];
    let client = TestClient::new(Proto::Http1);
    let redirected = client.get(addr, "shop.test", "/cart?id=1").await;
    assert_eq!(redirected.status, 308);
    assert_eq!(
        redirected.header("location"),
        Some("https://shop.test:8443/cart?id=1")
    );
    let raw =
        test_support::raw_exchange(addr, b"GET / HTTP/1.0\r\n\r\n", Duration::from_secs(2)).await;
    assert!(raw.starts_with("HTTP/1.0 400"), "{raw}");
    // Both answers were counted, as 3xx and 4xx.
    let snapshot = counters.snapshot();
    assert_eq!(snapshot.count(), 2);
    assert_eq!(snapshot.classes, [0, 0, 1, 1, 0]);
}

/// A static action is mounted at its prefix route's prefix (whatever
/// `strip_prefix` says), looked up whole on an exact route, and by the
/// rewritten path when the route rewrites it.
#[tokio::test]
async fn a_static_route_serves_from_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.css"), "top").unwrap();
    std::fs::create_dir(dir.path().join("assets")).unwrap();
    std::fs::write(dir.path().join("assets").join("app.css"), "nested").unwrap();
    let files = StaticFiles::new(StaticOptions {
        root: dir.path().into(),
        index: None,
        listing: false,
        strip_prefix: "/ignored".into(),
        ..StaticOptions::default()
    })
    .unwrap();
    let app = Application::builder("site")
        .domain("*")
        .unwrap()
        .route(RouteSpec::prefix("/assets/", Action::Static(files.clone())))
        .unwrap()
        .route(RouteSpec::exact("/app.css", Action::Static(files.clone())))
        .unwrap()
        .route(RouteSpec::prefix(
            "/v1",
            Route::new(Action::Static(files))
                .rewrite(Rewrite::new().path(PathModifier::ReplacePrefixMatch("/assets".into()))),
        ))
        .unwrap();
    let gateway = one_app(app);
    let http = serve(plain(), gateway).await[0];
    let client = TestClient::new(Proto::Http1);
    assert_eq!(
        client.get(http, "s.test", "/assets/app.css").await.text(),
        "top"
    );
    assert_eq!(client.get(http, "s.test", "/assets").await.status, 404);
    assert_eq!(
        client.get(http, "s.test", "/v1/app.css").await.text(),
        "nested"
    );
    assert_eq!(client.get(http, "s.test", "/app.css").await.text(), "top");
}

/// A proxy used without the gateway (whose host check refuses a second
/// `Host` line) sends the upstream one `Host`: the one it routed on.
#[tokio::test]
async fn a_proxy_alone_sends_one_host_when_a_request_has_two() {
    let upstream = echo(&[]).await;
    let proxy = Proxy::new(pool(upstream.addr));
    let one_host = |request: Request<Body>| async {
        let response = proxy.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        String::from_utf8(body.to_vec())
            .unwrap()
            .lines()
            .filter(|line| line.starts_with("host: "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let twice = Request::get("/")
        .header(header::HOST, "first.test")
        .header(header::HOST, "second.test")
        .body(Body::empty())
        .unwrap();
    assert_eq!(one_host(twice).await, ["host: first.test"]);
    let once = Request::get("/")
        .header(header::HOST, "only.test")
        .body(Body::empty())
        .unwrap();
    assert_eq!(one_host(once).await, ["host: only.test"]);
}
