//! The time from an EndpointSlice event to the new endpoint serving: a
//! release `scalwsd --kubernetes` against test-support's fake API server on
//! 127.0.0.1; each round moves the Service to a new endpoint (an upstream
//! that answers with its name) and polls until that name answers. The
//! controller debounces changes by 100 ms, so that is the floor.
//!
//! ```text
//! cargo build --release -p scalwsd -p scalws-benches --features scalws-benches/kubernetes
//! target/release/kube_endpoints [ROUNDS]      # SCALWSD=path to use another binary
//! ```
#![allow(missing_docs, clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::apiserver::FakeApiServer;
use test_support::upstream::Upstream;
use test_support::{Proto, TestClient};

fn slice(addr: SocketAddr) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: echo-1, namespace: apps, labels: {{ kubernetes.io/service-name: echo }} }}\naddressType: IPv4\nports: [{{ name: http, port: {} }}]\nendpoints: [{{ addresses: [\"{}\"] }}]\n",
        addr.port(),
        addr.ip()
    )
}

fn free() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let binary = std::env::var("SCALWSD").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/scalwsd").to_owned()
    });
    let names: Vec<&'static str> = (0..=rounds)
        .map(|i| &*Box::leak(format!("endpoint-{i}").into_boxed_str()))
        .collect();
    let mut upstreams = Vec::new();
    for name in &names {
        upstreams.push(Upstream::named(name).await);
    }
    let api = FakeApiServer::start().await;
    api.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{ name: scalws }}\nspec: {{ controllerName: scalws.io/gateway-controller }}
---
apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: web, namespace: apps }}\nspec: {{ gatewayClassName: scalws, listeners: [{{ name: http, port: 80, protocol: HTTP }}] }}
---
apiVersion: v1\nkind: Service\nmetadata: {{ name: echo, namespace: apps }}\nspec: {{ ports: [{{ name: http, port: 8080 }}] }}
---
apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: echo, namespace: apps }}\nspec: {{ parentRefs: [{{ name: web }}], rules: [{{ backendRefs: [{{ name: echo, port: 8080 }}] }}] }}
---
{}",
        slice(upstreams[0].addr)
    ));
    let dir = std::env::temp_dir().join(format!("kube-endpoints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = api.kubeconfig(&dir);
    let (http, admin) = (free(), free());
    let mut child = Command::new(&binary)
        .args([
            "--kubernetes",
            "--workers",
            "1",
            "--admin",
            &admin.to_string(),
            "--listen",
            &format!("80={http}"),
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("SCALWS_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {binary}: {e} (build it with cargo build --release -p scalwsd)")
        });
    let client = TestClient::new(Proto::Http1);
    let answer = async |client: &TestClient| match tokio::net::TcpStream::connect(http).await {
        Ok(_) => client
            .get(http, "echo.example", "/")
            .await
            .text()
            .to_owned(),
        Err(_) => String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while answer(&client).await != names[0] {
        assert!(
            Instant::now() < deadline,
            "scalwsd did not serve within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut times = Vec::new();
    for (i, upstream) in upstreams.iter().enumerate().skip(1) {
        let started = Instant::now();
        api.apply(&slice(upstream.addr));
        let deadline = started + Duration::from_secs(10);
        while answer(&client).await != names[i] {
            assert!(
                Instant::now() < deadline,
                "round {i}: the new endpoint did not serve within 10 s"
            );
        }
        times.push(started.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "EndpointSlice event -> new endpoint serving, {} rounds: min {:.0} ms, median {:.0} ms, p90 {:.0} ms, max {:.0} ms (debounce 100 ms included)",
        times.len(),
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() * 9 / 10]),
        ms(times[times.len() - 1])
    );
}
