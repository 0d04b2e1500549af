//! Criterion microbenchmarks: the pieces of the request path, and whole
//! in-process requests through the Gateway.
//!
//! ```text
//! cargo bench -p scalws-benches --bench micro            # measure
//! cargo bench -p scalws-benches --bench micro -- --test  # run each once (CI)
//! ```
#![allow(missing_docs, clippy::unwrap_used)]

use std::convert::Infallible;
use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, Method, Request, Response};
use scalws_cache::{Cache, CacheOptions};
use scalws_core::Body;
use scalws_router::{HostPattern, HostTableBuilder, PathMatch, RouteSpec, RouteTableBuilder};
use tower::{Layer, ServiceExt};

fn host_lookup(c: &mut Criterion) {
    let mut builder = HostTableBuilder::new();
    for i in 0..100 {
        builder
            .insert(
                HostPattern::parse(&format!("site{i}.example.com")).unwrap(),
                "app",
                i,
            )
            .unwrap();
    }
    builder
        .insert(HostPattern::parse("*.one.test").unwrap(), "app", 1000)
        .unwrap();
    builder
        .insert(HostPattern::parse("**.any.test").unwrap(), "app", 1001)
        .unwrap();
    let table = builder.build();
    let mut group = c.benchmark_group("host_lookup");
    for (name, host) in [
        ("exact", "site42.example.com"),
        ("one_label", "a.one.test"),
        ("any_labels", "a.b.c.any.test"),
        ("miss", "nowhere.invalid"),
    ] {
        group.bench_function(name, |b| b.iter(|| table.get(black_box(host))));
    }
    group.finish();

    // A Kubernetes-sized table: 10,000 hosts, as 5,000 exact names and
    // 5,000 `**.` suffixes (Gateway API wildcards), on one listener.
    let mut builder = HostTableBuilder::new();
    for i in 0..5_000 {
        let exact = HostPattern::parse(&format!("svc{i}.ns{}.example.com", i % 50)).unwrap();
        builder.insert(exact, "app", i).unwrap();
        let wildcard = HostPattern::parse(&format!("**.team{i}.example.org")).unwrap();
        builder.insert(wildcard, "app", 5_000 + i).unwrap();
    }
    let table = builder.build();
    let mut group = c.benchmark_group("host_lookup_10000");
    for (name, host) in [
        ("exact", "svc4242.ns42.example.com"),
        ("any_labels", "a.b.team4242.example.org"),
        ("miss", "nowhere.invalid"),
    ] {
        group.bench_function(name, |b| b.iter(|| table.get(black_box(host))));
    }
    group.finish();
}

fn route_match(c: &mut Criterion) {
    let headers = HeaderMap::new();
    let mut prefix_only = RouteTableBuilder::new();
    for (i, prefix) in ["/", "/api", "/api/v1", "/static", "/assets"]
        .into_iter()
        .enumerate()
    {
        prefix_only
            .route(RouteSpec {
                path: PathMatch::Prefix(prefix.into()),
                methods: None,
                headers: vec![],
                query: vec![],
                target: i,
            })
            .unwrap();
    }
    let prefix_only = prefix_only.build();
    assert!(prefix_only.is_prefix_only());

    let mut full = RouteTableBuilder::new();
    for i in 0..50 {
        let path = match i % 3 {
            0 => PathMatch::Prefix(format!("/p{i}")),
            1 => PathMatch::Exact(format!("/e{i}/x")),
            _ => PathMatch::Pattern(format!("/u{i}/{{id}}")),
        };
        let methods = (i % 5 == 0).then(|| vec![Method::GET]);
        full.route(RouteSpec {
            path,
            methods,
            headers: vec![],
            query: vec![],
            target: i,
        })
        .unwrap();
    }
    let full = full.build();

    let mut group = c.benchmark_group("route_match");
    group.bench_function("prefix_fast_path", |b| {
        b.iter(|| prefix_only.route(&Method::GET, black_box("/api/v1/users/42"), None, &headers))
    });
    group.bench_function("full_table_50_routes", |b| {
        b.iter(|| full.route(&Method::GET, black_box("/u47/123"), None, &headers))
    });
    group.finish();
}

/// How lookups grow with the table (docs/benchmarks.md, "How cost grows"):
/// an exact host among N exact names, and a pattern route among N routes
/// of all three kinds, for N = 10, 1,000 and 10,000.
fn growth(c: &mut Criterion) {
    let headers = HeaderMap::new();
    let mut group = c.benchmark_group("growth");
    for n in [10, 1_000, 10_000] {
        let mut hosts = HostTableBuilder::new();
        for i in 0..n {
            let name = HostPattern::parse(&format!("site{i}.example.com")).unwrap();
            hosts.insert(name, "app", i).unwrap();
        }
        let hosts = hosts.build();
        let wanted = format!("site{}.example.com", n / 2);
        assert!(hosts.get(&wanted).is_some());
        group.bench_function(format!("host_exact_of_{n}"), |b| {
            b.iter(|| hosts.get(black_box(&wanted)))
        });

        let mut routes = RouteTableBuilder::new();
        for i in 0..n {
            let path = match i % 3 {
                0 => PathMatch::Prefix(format!("/p{i}")),
                1 => PathMatch::Exact(format!("/e{i}/x")),
                _ => PathMatch::Pattern(format!("/u{i}/{{id}}")),
            };
            routes
                .route(RouteSpec {
                    path,
                    methods: None,
                    headers: vec![],
                    query: vec![],
                    target: i,
                })
                .unwrap();
        }
        let routes = routes.build();
        // The pattern route in the middle of the table.
        let wanted = format!("/u{}/123", (n / 2) / 3 * 3 + 2);
        assert!(routes.route(&Method::GET, &wanted, None, &headers).is_ok());
        group.bench_function(format!("route_pattern_of_{n}"), |b| {
            b.iter(|| routes.route(&Method::GET, black_box(&wanted), None, &headers))
        });
    }
    group.finish();
}

fn cache_hit(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let origin = tower::service_fn(|_request: Request<Body>| async {
        let mut response = Response::new(Body::from("cached body"));
        response
            .headers_mut()
            .insert("cache-control", "max-age=3600".parse().unwrap());
        Ok::<_, Infallible>(response)
    });
    let cache = Cache::new(CacheOptions::default());
    let service = cache.layer().layer(origin);
    let request = || {
        Request::get("http://example.com/hit")
            .body(Body::empty())
            .unwrap()
    };
    runtime.block_on(async {
        let warm = service.clone().oneshot(request()).await.unwrap();
        http_body_util::BodyExt::collect(warm.into_body())
            .await
            .unwrap();
    });
    c.bench_function("cache_lookup_hit", |b| {
        b.to_async(&runtime).iter(|| {
            let service = service.clone();
            async move { service.oneshot(request()).await.unwrap() }
        })
    });
}

fn gateway_requests(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let upstream = runtime.block_on(test_support::upstream::Upstream::named("ok"));
    let yaml = format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  origin: {{ addresses: ["{}"] }}
applications:
  - name: bench
    domains: ["*"]
    routes:
      - {{ path: /respond, respond: {{ body: ok }} }}
      - {{ path: /proxy, proxy: origin }}
"#,
        upstream.addr
    );
    let config = runtime
        .block_on(async { scalwsd::config::load("bench.yaml", &yaml, Path::new(".")).unwrap() });
    let gateway = config.gateway;
    let request = |path: &str| {
        Request::builder()
            .uri(path)
            .header("host", "bench.test")
            .body(Body::empty())
            .unwrap()
    };
    let mut group = c.benchmark_group("gateway");
    group.bench_function("respond", |b| {
        b.to_async(&runtime)
            .iter(|| gateway.clone().oneshot(request("/respond")))
    });
    group.bench_function("proxy_in_process_upstream", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = gateway.clone().oneshot(request("/proxy")).await.unwrap();
            http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
        })
    });
    group.finish();
    drop(upstream);
}

criterion_group!(
    micro,
    host_lookup,
    route_match,
    growth,
    cache_hit,
    gateway_requests
);
criterion_main!(micro);
