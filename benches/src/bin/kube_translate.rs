//! How long translating and loading a large cluster takes, and its peak memory:
//! 10,000 HTTPRoutes over 5,000 hostnames on one Gateway, 500 Services with an
//! EndpointSlice each, translated (`scalwsd::kubernetes::translate`) and then
//! loaded through the configuration's checks (`check::load`), as the
//! controller does at every change.
//!
//! ```text
//! cargo run --release -p scalws-benches --features kubernetes --bin kube_translate [-- ROUTES HOSTS RUNS]
//! ```
#![allow(missing_docs, clippy::unwrap_used)]

use std::path::Path;
use std::time::Instant;

use scalwsd::config::{Carried, Inputs};
use scalwsd::kubernetes::{Options, Resources, check, manifests, translate};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let routes = args.first().copied().unwrap_or(10_000);
    let hosts = args.get(1).copied().unwrap_or(5_000);
    let runs = args.get(2).copied().unwrap_or(3);
    let services = 500;

    let mut yaml = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: scalws }\nspec: { controllerName: scalws.io/gateway-controller }\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: web, namespace: apps }\nspec: { gatewayClassName: scalws, listeners: [{ name: http, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: All } } }] }\n",
    );
    for s in 0..services {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{ name: svc{s}, namespace: apps }}\nspec: {{ ports: [{{ name: http, port: 8080 }}] }}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: svc{s}-1, namespace: apps, labels: {{ kubernetes.io/service-name: svc{s} }} }}\naddressType: IPv4\nports: [{{ name: http, port: 8080 }}]\nendpoints: [{{ addresses: [\"10.0.{}.{}\"] }}, {{ addresses: [\"10.1.{}.{}\"] }}]\n",
            s / 250,
            s % 250,
            s / 250,
            s % 250
        ));
    }
    for r in 0..routes {
        let host = r % hosts;
        let hostname = if host % 2 == 0 {
            format!("h{host}.example.com")
        } else {
            format!("\"*.h{host}.example.org\"")
        };
        yaml.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: r{r}, namespace: apps }}\nspec:\n  parentRefs: [{{ name: web }}]\n  hostnames: [{hostname}]\n  rules:\n    - {{ matches: [{{ path: {{ type: PathPrefix, value: /p{r} }} }}], backendRefs: [{{ name: svc{}, port: 8080 }}] }}\n    - {{ matches: [{{ path: {{ type: Exact, value: /e{r} }}, headers: [{{ name: x-canary, value: \"1\" }}] }}], filters: [{{ type: RequestHeaderModifier, requestHeaderModifier: {{ set: [{{ name: x-route, value: r{r} }}] }} }}], backendRefs: [{{ name: svc{}, port: 8080, weight: 90 }}, {{ name: svc{}, port: 8080, weight: 10 }}] }}\n",
            r % services,
            r % services,
            (r + 1) % services
        ));
    }

    let started = Instant::now();
    let mut resources = Resources::default();
    manifests::read_str("bench.yaml", &yaml, &mut resources).unwrap();
    let parse = started.elapsed();
    println!(
        "{} HTTPRoutes over {} hostnames, {} Services: {} KiB of manifests, read in {:.0} ms",
        routes,
        hosts,
        services,
        yaml.len() / 1024,
        parse.as_secs_f64() * 1e3
    );
    drop(yaml);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let options = Options {
        listen: [(80, "127.0.0.1:0".parse().unwrap())].into_iter().collect(),
        ..Options::default()
    };
    let mut carried = Carried::default();
    for run in 1..=runs {
        let t = Instant::now();
        let mut translation = translate(&resources, &options);
        let translated = t.elapsed();
        let t = Instant::now();
        let (config, yaml) = runtime
            .block_on(async {
                check::load(
                    &mut translation,
                    Path::new("."),
                    &carried,
                    &Inputs {
                        allow_no_listeners: true,
                        ..Inputs::default()
                    },
                )
            })
            .unwrap();
        let loaded = t.elapsed();
        println!(
            "run {run}: translate {:.0} ms, load (YAML {} KiB, checks, gateway build) {:.0} ms, {} applications",
            translated.as_secs_f64() * 1e3,
            yaml.len() / 1024,
            loaded.as_secs_f64() * 1e3,
            translation.document.applications.len()
        );
        carried = config.carried.clone();
    }
    println!("peak RSS {}", peak_rss());
}

/// `VmHWM` of this process, from /proc.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
