//! Embedding ScalWS, way (b): the gateway a YAML file describes, mounted in
//! your own axum `Router` beside your own routes.
//!
//! ```text
//! cargo run -p scalws-examples --example axum_mount
//! curl http://127.0.0.1:8083/mine          # the embedder's own route
//! curl http://127.0.0.1:8083/hello         # answered by the YAML gateway
//! ```
//!
//! The YAML is loaded by the `scalwsd` library with its default features
//! off: the configuration loader alone, without the binary's command line,
//! Prometheus exposition, allocator or Kubernetes controller. The file's
//! `limits` stay in effect through [`RequestLimitsLayer`] (body size,
//! header count and size, a panic answered 500); axum's own server owns the
//! connections, so the file's listeners and connection timeouts are not used.

use std::path::Path;

use axum::Router;
use axum::routing::get;
use scalws_core::{BoxError, RequestLimitsLayer};
use tower::ServiceBuilder;

/// The gateway's configuration: any scalwsd file works. Its `listeners`
/// name the host tables; the address is not bound here.
const CONFIG: &str = r#"
limits:
  max_request_body: 1KiB
  max_headers: 20
listeners:
  - { name: http, address: 127.0.0.1:8080 }
applications:
  - name: site
    domains: ["*"]
    routes:
      - path: /hello
        respond: { body: "hello from the YAML gateway\n" }
      - match: { path: { exact: /upload }, methods: [POST] }
        respond: { status: 204 }
"#;

/// Your application: your routes first, the gateway for everything else.
fn app() -> Result<Router, BoxError> {
    let config = scalwsd::config::load("gateway.yaml", CONFIG, Path::new("."))?;
    let gateway = ServiceBuilder::new()
        .layer(RequestLimitsLayer::new(&config.limits))
        .service(config.gateway);
    Ok(Router::new()
        .route("/mine", get(|| async { "the embedder's own route\n" }))
        .fallback_service(gateway))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8083").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app()?)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use test_support::{Proto, TestClient, request};

    #[tokio::test]
    async fn the_yaml_gateway_answers_beside_axum_routes_with_its_limits() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app().unwrap()).await });
        let client = TestClient::new(Proto::Http1);

        let mine = client.get(addr, "localhost", "/mine").await;
        assert_eq!(
            (mine.status, mine.text()),
            (200, "the embedder's own route\n")
        );
        let hello = client.get(addr, "localhost", "/hello").await;
        assert_eq!(
            (hello.status, hello.text()),
            (200, "hello from the YAML gateway\n")
        );
        let missing = client.get(addr, "localhost", "/nothing").await;
        assert_eq!((missing.status, missing.text()), (404, "404 Not Found\n"));
        let wrong_method = client.get(addr, "localhost", "/upload").await;
        assert_eq!(wrong_method.status, 405);
        assert_eq!(wrong_method.header("allow"), Some("POST"));

        // The file's limits, end to end.
        let small = request("POST", "localhost", "/upload")
            .body(vec![b'x'; 512].into())
            .unwrap();
        assert_eq!(client.send(addr, small).await.status, 204);
        let large = request("POST", "localhost", "/upload")
            .body(vec![b'x'; 2048].into())
            .unwrap();
        let refused = client.send(addr, large).await;
        assert_eq!(
            (refused.status, refused.text()),
            (413, "413 Payload Too Large\n")
        );
        let mut crowded = request("GET", "localhost", "/hello");
        for i in 0..25 {
            crowded = crowded.header(format!("x-extra-{i}"), "1");
        }
        let crowded = client
            .send(addr, crowded.body(Default::default()).unwrap())
            .await;
        assert_eq!(crowded.status, 431);
    }
}
