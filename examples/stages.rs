//! Embedding ScalWS, way (d): stages used alone.
//!
//! ```text
//! cargo run -p scalws-examples --example stages -- 127.0.0.1:9000   # an upstream of yours
//! curl -H 'Host: api.example.com' http://127.0.0.1:8084/users/7
//! curl -H 'Host: www.example.com' http://127.0.0.1:8084/
//! curl http://127.0.0.1:8085/users/7
//! ```
//!
//! - The host and route selection of ScalWS in front of services of your
//!   own: a [`HostRouter`] picks by host (400, 404, 421 answered for you), a
//!   [`RouteRouter`] by path, method, headers and query (404, 405), and
//!   your `service_fn`s answer, with the route's path parameters in
//!   [`Params`].
//! - A gateway route whose action is your own service ([`Action::service`]).
//! - The upstream pool as a client: balanced, health-checked, retrying,
//!   pooled; here it fetches from the upstream on the command line.

use std::convert::Infallible;
use std::net::SocketAddr;

use http::{Request, Response, StatusCode, header};
use scalws_core::{Body, BoxError, Limits, ListenerSpec, Server};
use scalws_proxy::upstream::{UpstreamAddress, UpstreamOptions, UpstreamPool};
use scalws_proxy::{Action, Application, Gateway, HostRouter, HttpService, RouteRouter, boxed};
use scalws_router::{Params, RouteSpec};
use tower::{ServiceExt, service_fn};

/// A service of your own: answers with the `id` the route captured.
fn user() -> HttpService {
    boxed(service_fn(|request: Request<Body>| async move {
        let id = request
            .extensions()
            .get::<Params>()
            .and_then(|params| params.get("id"))
            .unwrap_or("?")
            .to_owned();
        Ok::<_, Infallible>(Response::new(Body::from(format!("user {id}\n"))))
    }))
}

/// Another: a fixed text.
fn text(body: &'static str) -> HttpService {
    boxed(service_fn(move |_request: Request<Body>| async move {
        Ok::<_, Infallible>(Response::new(Body::from(body)))
    }))
}

/// ScalWS's host and route selection in front of your services.
fn routers() -> Result<HostRouter<RouteRouter<HttpService>>, BoxError> {
    let api = RouteRouter::builder()
        .route(RouteSpec::pattern("/users/{id}", user()).methods([http::Method::GET]))?
        .route(RouteSpec::exact("/", text("the api\n")))?
        .build();
    let www = RouteRouter::builder()
        .route(RouteSpec::prefix("/", text("the site\n")))?
        .build();
    Ok(HostRouter::builder()
        .listener("main")
        .host("api.example.com", "api", api)?
        .host("**.example.com", "www", www)?
        .build()?)
}

/// A gateway route whose action is your own service.
fn gateway() -> Result<Gateway, BoxError> {
    let site = Application::builder("site")
        .domain("*")?
        .route(RouteSpec::pattern("/users/{id}", Action::Service(user())))?;
    Ok(Gateway::builder()
        .listener("main")
        .application(site)
        .build()?)
}

/// The pool as a client: one GET, and which address answered.
async fn fetch(upstream: SocketAddr, path: &str) -> Result<(StatusCode, SocketAddr), BoxError> {
    let pool = UpstreamPool::new(
        "origin",
        UpstreamOptions {
            addresses: vec![(upstream, 1)],
            retries: 1,
            ..UpstreamOptions::default()
        },
    )?;
    let request = Request::get(path)
        .header(header::HOST, "origin.example.com")
        .body(Body::empty())?;
    let response = pool.oneshot(request).await?;
    let address = response
        .extensions()
        .get::<UpstreamAddress>()
        .map(|address| address.0)
        .ok_or("no UpstreamAddress")?;
    Ok((response.status(), address))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    if let Some(upstream) = std::env::args().nth(1) {
        let (status, address) = fetch(upstream.parse()?, "/").await?;
        println!("the pool fetched / from {address}: {status}");
    }
    // The gateway whose route runs your service, on a port of its own.
    let listeners = [ListenerSpec::http("main", "127.0.0.1:8085".parse()?)];
    let site = Server::bind(&listeners, Limits::default())?;
    println!("gateway: curl http://127.0.0.1:8085/users/7");
    tokio::spawn(site.serve(gateway()?, std::future::pending()));

    let listeners = [ListenerSpec::http("main", "127.0.0.1:8084".parse()?)];
    let server = Server::bind(&listeners, Limits::default())?;
    for (name, address) in server.local_addrs() {
        println!("routers: listening on http://{address} ({name})");
    }
    server
        .serve(routers()?, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use test_support::upstream::Upstream;
    use test_support::{Proto, TestClient, request};

    async fn serve<S>(service: S) -> SocketAddr
    where
        S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        let listeners = [ListenerSpec::http("main", "127.0.0.1:0".parse().unwrap())];
        let server = Server::bind(&listeners, Limits::default()).unwrap();
        let addr = server.local_addrs()[0].1;
        tokio::spawn(server.serve(service, std::future::pending()));
        addr
    }

    #[tokio::test]
    async fn host_and_route_selection_front_the_embedders_services() {
        let addr = serve(routers().unwrap()).await;
        let client = TestClient::new(Proto::Http1);
        let user = client.get(addr, "api.example.com", "/users/7").await;
        assert_eq!((user.status, user.text()), (200, "user 7\n"));
        let site = client.get(addr, "deep.www.example.com", "/any").await;
        assert_eq!((site.status, site.text()), (200, "the site\n"));
        assert_eq!(
            client.get(addr, "api.example.com", "/nope").await.status,
            404
        );
        assert_eq!(client.get(addr, "other.org", "/").await.status, 404);
        let post = request("POST", "api.example.com", "/users/7")
            .body(Default::default())
            .unwrap();
        let refused = client.send(addr, post).await;
        assert_eq!(
            (refused.status, refused.header("allow")),
            (405, Some("GET"))
        );
        // HTTP/1.0 without Host: no host to select by.
        let raw = test_support::raw_exchange(
            addr,
            b"GET / HTTP/1.0\r\n\r\n",
            std::time::Duration::from_secs(2),
        )
        .await;
        assert!(raw.starts_with("HTTP/1.0 400"), "{raw}");
    }

    #[tokio::test]
    async fn a_gateway_route_runs_the_embedders_service() {
        let addr = serve(gateway().unwrap()).await;
        let client = TestClient::new(Proto::H2c);
        let user = client.get(addr, "example.com", "/users/42").await;
        assert_eq!((user.status, user.text()), (200, "user 42\n"));
    }

    #[tokio::test]
    async fn the_pool_alone_is_a_client() {
        let upstream = Upstream::named("origin").await;
        let (status, address) = fetch(upstream.addr, "/x").await.unwrap();
        assert_eq!((status, address), (StatusCode::OK, upstream.addr));
        assert_eq!(upstream.hits(), 1);
        // Nothing listening: the pool's own 502 error, as an error.
        let refused = fetch(test_support::upstream::refused_addr(), "/").await;
        let error = refused.unwrap_err();
        let upstream_error = error
            .downcast_ref::<scalws_proxy::upstream::UpstreamError>()
            .unwrap();
        assert_eq!(upstream_error.status(), StatusCode::BAD_GATEWAY);
    }
}
