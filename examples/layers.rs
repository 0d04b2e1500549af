//! Embedding ScalWS, way (c): your own tower layers at the four named points
//! of the standard stack.
//!
//! ```text
//! cargo run -p scalws-examples --example layers -- 127.0.0.1:9000   # an upstream of yours
//! curl -H 'Host: api.example.com' http://127.0.0.1:8082/admin             # 401
//! curl -H 'Host: api.example.com' -H 'Authorization: Bearer let-me-in' \
//!      http://127.0.0.1:8082/admin                                          # proxied, signed
//! ```
//!
//! - **Around everything**: a layer that adds `x-served-by` to every answer,
//!   404s included (wrap the gateway: `ServiceBuilder::new().layer(..).service(gateway)`).
//! - **Per application**: a layer counting the application's requests
//!   (`ApplicationBuilder::layer`).
//! - **Per route**: bearer-token authentication on `/admin` only (`Route::layer`).
//! - **Around the upstream call**: a layer that signs each request the
//!   upstream gets with `x-signature` (`Proxy::upstream_layer`): it sees the
//!   request as the upstream will, after the proxy's header clean-up.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::{HeaderValue, Request, Response, StatusCode, header};
use scalws_core::{Body, BoxError, Limits, ListenerSpec, Server};
use scalws_proxy::upstream::{UpstreamOptions, UpstreamPool, UpstreamService};
use scalws_proxy::{Action, Application, Gateway, HttpService, Proxy, Route};
use scalws_router::RouteSpec;
use tower::layer::layer_fn;
use tower::{ServiceBuilder, ServiceExt, service_fn};

/// The signature `x-signature` carries: a stand-in for an HMAC of the
/// method and path with a key shared with the upstream.
fn signature(key: &str, request: &Request<Body>) -> String {
    let text = format!("{key} {} {}", request.method(), request.uri().path());
    format!("{:016x}", fnv1a(text.as_bytes()))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Builds the gateway with three of the four layers; `requests` counts the
/// application's requests.
fn gateway(upstream: SocketAddr, requests: Arc<AtomicU64>) -> Result<Gateway, BoxError> {
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            addresses: vec![(upstream, 1)],
            ..UpstreamOptions::default()
        },
    )?;

    // Around the upstream call: sign what the upstream gets.
    let sign = layer_fn(|inner: UpstreamService| {
        service_fn(move |mut request: Request<Body>| {
            let inner = inner.clone();
            async move {
                let signed = signature("shared-key", &request);
                request
                    .headers_mut()
                    .insert("x-signature", HeaderValue::from_str(&signed)?);
                inner.oneshot(request).await
            }
        })
    });
    let proxy = Proxy::new(pool).upstream_layer(sign);

    // Per route: a bearer token on /admin.
    let authenticate = layer_fn(|inner: HttpService| {
        service_fn(move |request: Request<Body>| {
            let inner = inner.clone();
            async move {
                let authorized = request
                    .headers()
                    .get(header::AUTHORIZATION)
                    .is_some_and(|value| value == "Bearer let-me-in");
                if !authorized {
                    let mut denied = Response::new(Body::from("401 Unauthorized\n"));
                    *denied.status_mut() = StatusCode::UNAUTHORIZED;
                    denied
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    return Ok::<_, Infallible>(denied);
                }
                inner.oneshot(request).await
            }
        })
    });
    let admin = Route::new(Action::Proxy(proxy.clone())).layer(authenticate);

    // Per application: count every request the application gets.
    let count = layer_fn(move |inner: HttpService| {
        let requests = requests.clone();
        service_fn(move |request: Request<Body>| {
            requests.fetch_add(1, Ordering::Relaxed);
            inner.clone().oneshot(request)
        })
    });

    let api = Application::builder("api")
        .domain("api.example.com")?
        .layer(count)
        .route(RouteSpec::prefix("/admin", admin))?
        .route(RouteSpec::prefix("/", Action::Proxy(proxy)))?;
    Ok(Gateway::builder()
        .listener("main")
        .application(api)
        .build()?)
}

/// Around everything: `x-served-by` on every answer.
fn served_by(gateway: Gateway) -> HttpService {
    let stack = ServiceBuilder::new()
        .map_response(|mut response: Response<Body>| {
            response
                .headers_mut()
                .insert("x-served-by", HeaderValue::from_static("scalws-example"));
            response
        })
        .service(gateway);
    // Boxed as tower's own BoxCloneService would be: the server takes either.
    scalws_proxy::boxed(stack)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let upstream: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into())
        .parse()?;
    let requests = Arc::new(AtomicU64::new(0));
    let listeners = [ListenerSpec::http("main", "127.0.0.1:8082".parse()?)];
    let server = Server::bind(&listeners, Limits::default())?;
    for (name, address) in server.local_addrs() {
        println!("{name}: listening on http://{address}, proxying to {upstream}");
    }
    let service = served_by(gateway(upstream, requests.clone())?);
    server
        .serve(service, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    println!(
        "the application answered {} requests",
        requests.load(Ordering::Relaxed)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use test_support::upstream::echo;
    use test_support::{Proto, TestClient, request};

    #[tokio::test]
    async fn each_layer_takes_effect_where_it_was_put() {
        let upstream = echo(&[]).await;
        let requests = Arc::new(AtomicU64::new(0));
        let listeners = [ListenerSpec::http("main", "127.0.0.1:0".parse().unwrap())];
        let server = Server::bind(&listeners, Limits::default()).unwrap();
        let addr = server.local_addrs()[0].1;
        let service = served_by(gateway(upstream.addr, requests.clone()).unwrap());
        tokio::spawn(server.serve(service, std::future::pending()));

        for proto in [Proto::Http1, Proto::H2c] {
            let client = TestClient::new(proto);
            // Route layer: /admin needs the token; the upstream never sees the refusal.
            let hits = upstream.hits();
            let denied = client.get(addr, "api.example.com", "/admin/users").await;
            assert_eq!(denied.status, 401);
            assert_eq!(denied.header("www-authenticate"), Some("Bearer"));
            assert_eq!(denied.header("x-served-by"), Some("scalws-example"));
            assert_eq!(upstream.hits(), hits);

            let allowed = client
                .send(
                    addr,
                    request("GET", "api.example.com", "/admin/users")
                        .header("authorization", "Bearer let-me-in")
                        .body(Default::default())
                        .unwrap(),
                )
                .await;
            assert_eq!(allowed.status, 200);
            assert!(
                allowed.text().starts_with("GET /admin/users\n"),
                "{}",
                allowed.text()
            );

            // Upstream layer: the request the upstream got is signed, and
            // after the proxy's clean-up (it has X-Forwarded-For).
            let other = client.get(addr, "api.example.com", "/items?x=1").await;
            assert_eq!(other.status, 200);
            let text = other.text().to_owned();
            assert!(text.contains("x-forwarded-for: 127.0.0.1\n"), "{text}");
            let expected = {
                let request = Request::get("/items").body(Body::empty()).unwrap();
                signature("shared-key", &request)
            };
            assert!(
                text.contains(&format!("x-signature: {expected}\n")),
                "{text}"
            );

            // Around everything: even the 404 of an unknown host is marked.
            let unknown = client.get(addr, "other.org", "/").await;
            assert_eq!(unknown.status, 404);
            assert_eq!(unknown.header("x-served-by"), Some("scalws-example"));
        }
        // Application layer: three requests per protocol reached the application.
        assert_eq!(requests.load(Ordering::Relaxed), 6);
    }
}
