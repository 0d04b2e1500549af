//! Embedding ScalWS, way (a): a gateway built in Rust, without YAML, served
//! by the ScalWS server runtime.
//!
//! ```text
//! cargo run -p scalws-examples --example embed
//! curl -H 'Host: api.example.com' http://127.0.0.1:8081/hello
//! ```
//!
//! It builds one application for `example.com` and its subdomains with two
//! routes (an exact `/healthz` for GET and HEAD, and a catch-all prefix), and
//! serves it until Ctrl-C.

use http::{HeaderValue, Method, StatusCode, header};
use scalws_core::{Limits, ListenerSpec, Server};
use scalws_proxy::{Action, Application, Gateway, Respond};
use scalws_router::RouteSpec;

/// Builds the gateway: the part an embedder writes.
fn gateway() -> Result<Gateway, Box<dyn std::error::Error>> {
    let text = |body: &'static str| {
        Respond::new(StatusCode::OK, body).header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )
    };
    let app = Application::builder("example")
        .domain("example.com")?
        .domain("*.example.com")?
        .route(
            RouteSpec::exact("/healthz", Action::Respond(text("ok\n")))
                .methods([Method::GET, Method::HEAD]),
        )?
        .route(RouteSpec::prefix(
            "/",
            Action::Respond(text("hello from an embedded ScalWS\n")),
        ))?;
    Ok(Gateway::builder()
        .listener("main")
        .application(app)
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listeners = [ListenerSpec::http("main", "127.0.0.1:8081".parse()?)];
    let server = Server::bind(&listeners, Limits::default())?;
    for (name, address) in server.local_addrs() {
        println!("{name}: listening on http://{address}");
    }
    server
        .serve(gateway()?, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use test_support::{Proto, TestClient};

    #[tokio::test]
    async fn the_embedded_gateway_answers_over_a_real_socket() {
        let listeners = [ListenerSpec::http("main", "127.0.0.1:0".parse().unwrap())];
        let server = Server::bind(&listeners, Limits::default()).unwrap();
        let addr = server.local_addrs()[0].1;
        tokio::spawn(server.serve(gateway().unwrap(), std::future::pending()));
        let client = TestClient::new(Proto::Http1);
        let hello = client.get(addr, "api.example.com", "/anything").await;
        assert_eq!(hello.text(), "hello from an embedded ScalWS\n");
        let health = client.get(addr, "example.com", "/healthz").await;
        assert_eq!(health.text(), "ok\n");
        assert_eq!(client.get(addr, "other.org", "/").await.status, 404);
    }
}
