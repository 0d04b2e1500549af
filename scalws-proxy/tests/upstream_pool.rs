//! Upstream pools against real upstream servers on 127.0.0.1: balancing,
//! health, retries, timeouts, upstream faults, HTTP/2 multiplexing.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode, Version, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use scalws_core::{Body, ConnInfo, Scheme};
use scalws_proxy::upstream::{
    Balance, EndpointState, HealthCheck, Passive, Protocol, UpstreamError, UpstreamOptions,
    UpstreamPool,
};
use test_support::upstream::{Upstream, ok, refused_addr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// === helpers ===

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn options(addresses: &[SocketAddr]) -> UpstreamOptions {
    weighted(&addresses.iter().map(|&a| (a, 1)).collect::<Vec<_>>())
}

fn weighted(addresses: &[(SocketAddr, u32)]) -> UpstreamOptions {
    UpstreamOptions {
        addresses: addresses.to_vec(),
        ..UpstreamOptions::default()
    }
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, "app.test")
        .body(Body::empty())
        .unwrap()
}

fn from_peer(ip: &str) -> Request<Body> {
    let mut request = get("/");
    request.extensions_mut().insert(ConnInfo::new(
        "http".into(),
        Scheme::Http,
        SocketAddr::new(ip.parse().unwrap(), 40000),
        "127.0.0.1:80".parse().unwrap(),
        None,
    ));
    request
}

fn with_user(user: &str) -> Request<Body> {
    let mut request = get("/");
    request
        .headers_mut()
        .insert("x-user", user.parse().unwrap());
    request
}

async fn text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Sends and returns the address that answered, reading the body.
async fn answered(pool: &UpstreamPool, request: Request<Body>) -> SocketAddr {
    let (response, address) = pool.send(request).await.expect("request succeeds");
    assert_eq!(response.status(), StatusCode::OK);
    text(response).await;
    address
}

/// `request` fails as timed out at `timeout` (and before twice that).
async fn times_out_at(
    pool: &UpstreamPool,
    request: Request<Body>,
    timeout: Duration,
) -> UpstreamError {
    let start = Instant::now();
    let error = pool.send(request).await.unwrap_err();
    let elapsed = start.elapsed();
    assert!(elapsed >= timeout && elapsed < timeout * 2, "{elapsed:?}");
    assert!(matches!(error, UpstreamError::TimedOut { .. }));
    error
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A raw TCP server: for the n-th request head on a connection, `answer(n)`
/// gives the bytes to write, or `None` to close the connection. Counts
/// connections and request heads read.
async fn raw_server(
    answer: impl Fn(usize) -> Option<Vec<u8>> + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(answer);
    let r = requests.clone();
    let (addr, connections) = each_connection(move |mut stream| {
        let (answer, requests) = (answer.clone(), r.clone());
        async move {
            for n in 0.. {
                if !read_head(&mut stream).await {
                    return;
                }
                requests.fetch_add(1, SeqCst);
                match answer(n) {
                    Some(bytes) => {
                        if stream.write_all(&bytes).await.is_err() {
                            return;
                        }
                    }
                    None => return,
                }
            }
        }
    })
    .await;
    (addr, connections, requests)
}

/// A raw TCP server on 127.0.0.1 that runs `serve` on each connection in a
/// task of its own, and counts the connections.
async fn each_connection<F, Fut>(serve: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let c = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.fetch_add(1, SeqCst);
            tokio::spawn(serve(stream));
        }
    });
    (addr, connections)
}

async fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return true;
        }
    }
}

// === building ===

#[test]
fn invalid_options_say_what_is_wrong() {
    let error = UpstreamPool::new("api", UpstreamOptions::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"upstream "api": addresses: at least one address is needed"#
    );
    let a: SocketAddr = "127.0.0.1:9001".parse().unwrap();
    let b: SocketAddr = "127.0.0.1:9002".parse().unwrap();
    let error = UpstreamPool::new("api", weighted(&[(a, 0), (b, 0)])).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"upstream "api": addresses: every weight is 0, so no address can be chosen"#
    );
    let error = UpstreamPool::new("api", options(&[a, a])).unwrap_err();
    assert_eq!(error.reason, "addresses: 127.0.0.1:9001 is listed twice");
    // Active checks need a runtime to run in; this test has none.
    let error = UpstreamPool::new(
        "api",
        UpstreamOptions {
            health_check: Some(HealthCheck::default()),
            ..options(&[a])
        },
    )
    .unwrap_err();
    assert_eq!(error.reason, "health_check needs a tokio runtime to run in");
}

#[tokio::test]
async fn send_future_is_send_and_pool_is_shareable() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_sync<T: Send + Sync + Clone>(_: &T) {}
    let pool = UpstreamPool::new("api", options(&[refused_addr()])).unwrap();
    assert_sync(&pool);
    assert_send(&pool.send(get("/")));
    assert_eq!(pool.name(), "api");
}

// === balancing ===

#[tokio::test]
async fn round_robin_alternates() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let pool = UpstreamPool::new("api", options(&[a.addr, b.addr])).unwrap();
    let mut order = Vec::new();
    for _ in 0..6 {
        let (response, _) = pool.send(get("/")).await.unwrap();
        order.push(text(response).await);
    }
    let first = order[0].clone();
    let second = if first == "a" { "b" } else { "a" };
    for (i, name) in order.iter().enumerate() {
        assert_eq!(name, if i % 2 == 0 { &first } else { second }, "{order:?}");
    }
}

#[tokio::test]
async fn weights_are_honoured_within_five_percent() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let pool = UpstreamPool::new("api", weighted(&[(a.addr, 3), (b.addr, 1)])).unwrap();
    let mut to_a = 0;
    for _ in 0..1000 {
        if answered(&pool, get("/")).await == a.addr {
            to_a += 1;
        }
    }
    assert!((700..=800).contains(&to_a), "{to_a} of 1000 to weight 3");
}

#[tokio::test]
async fn weight_zero_is_never_chosen() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let zero = Upstream::named("zero").await;
    for balance in [
        Balance::RoundRobin,
        Balance::LeastRequests,
        Balance::RandomTwo,
        Balance::IpHash,
        Balance::HeaderHash(header::HeaderName::from_static("x-user")),
    ] {
        let pool = UpstreamPool::new(
            "api",
            UpstreamOptions {
                balance: balance.clone(),
                ..weighted(&[(a.addr, 1), (zero.addr, 0), (b.addr, 1)])
            },
        )
        .unwrap();
        for i in 0..30 {
            answered(&pool, from_peer(&format!("10.0.0.{i}"))).await;
            answered(&pool, with_user(&format!("user{i}"))).await;
        }
        assert_eq!(zero.hits(), 0, "{balance:?}");
    }
    assert!(a.hits() > 0 && b.hits() > 0);
}

#[tokio::test]
async fn least_requests_prefers_the_idle_address() {
    let (release, released) = tokio::sync::watch::channel(false);
    let handler = |name: &'static str, released: tokio::sync::watch::Receiver<bool>| {
        move |request: Request<Incoming>| {
            let mut released = released.clone();
            async move {
                if request.uri().path() == "/slow" {
                    let _ = released.wait_for(|r| *r).await;
                }
                ok(name)
            }
        }
    };
    let a = Upstream::start(handler("a", released.clone())).await;
    let b = Upstream::start(handler("b", released)).await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            balance: Balance::LeastRequests,
            ..options(&[a.addr, b.addr])
        },
    )
    .unwrap();
    let slow = tokio::spawn({
        let pool = pool.clone();
        async move { pool.send(get("/slow")).await.map(|(_, address)| address) }
    });
    wait_until("the slow request", || a.hits() + b.hits() == 1).await;
    let busy = if a.hits() == 1 { a.addr } else { b.addr };
    let stats = pool.stats();
    let busy_stats = stats.iter().find(|s| s.address == busy).unwrap();
    assert_eq!(busy_stats.in_flight, 1);
    for _ in 0..6 {
        assert_ne!(answered(&pool, get("/")).await, busy);
    }
    release.send(true).unwrap();
    assert_eq!(slow.await.unwrap().unwrap(), busy);
    assert!(pool.stats().iter().all(|s| s.in_flight == 0));
}

#[tokio::test]
async fn ip_hash_is_sticky_per_client_and_spreads_clients() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            balance: Balance::IpHash,
            ..options(&[a.addr, b.addr])
        },
    )
    .unwrap();
    let mut per_address: HashMap<SocketAddr, usize> = HashMap::new();
    for i in 1..=40 {
        let ip = format!("10.0.0.{i}");
        let first = answered(&pool, from_peer(&ip)).await;
        for _ in 0..3 {
            assert_eq!(answered(&pool, from_peer(&ip)).await, first, "{ip} moved");
        }
        *per_address.entry(first).or_default() += 1;
    }
    assert_eq!(per_address.len(), 2, "{per_address:?}");
    assert!(per_address.values().all(|&n| n >= 8), "{per_address:?}");
}

#[tokio::test]
async fn header_hash_is_sticky_per_value_and_round_robin_without_it() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            balance: Balance::HeaderHash(header::HeaderName::from_static("x-user")),
            ..options(&[a.addr, b.addr])
        },
    )
    .unwrap();
    let mut per_address: HashMap<SocketAddr, usize> = HashMap::new();
    for i in 0..40 {
        let user = format!("user-{i}");
        let first = answered(&pool, with_user(&user)).await;
        for _ in 0..3 {
            assert_eq!(
                answered(&pool, with_user(&user)).await,
                first,
                "{user} moved"
            );
        }
        *per_address.entry(first).or_default() += 1;
    }
    assert_eq!(per_address.len(), 2, "{per_address:?}");
    let one = answered(&pool, get("/")).await;
    let two = answered(&pool, get("/")).await;
    assert_ne!(one, two, "no header: round robin");
}

#[tokio::test]
async fn only_the_keys_of_a_failed_address_move() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let mut c = Upstream::named("c").await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            balance: Balance::IpHash,
            passive: Some(Passive {
                failures: nz(1),
                cooldown: Duration::from_secs(30),
            }),
            ..options(&[a.addr, b.addr, c.addr])
        },
    )
    .unwrap();
    let ips: Vec<String> = (1..=60).map(|i| format!("10.1.0.{i}")).collect();
    let mut before = Vec::new();
    for ip in &ips {
        before.push(answered(&pool, from_peer(ip)).await);
    }
    assert!(before.contains(&c.addr));
    c.stop().await;
    for (ip, was) in ips.iter().zip(&before) {
        // Keys of c fail over (retry) and then stay off it; the others stay put.
        let now = answered(&pool, from_peer(ip)).await;
        if *was == c.addr {
            assert_ne!(now, c.addr);
        } else {
            assert_eq!(now, *was, "{ip} moved");
        }
    }
}

// === health ===

#[tokio::test]
async fn dead_upstream_is_ejected_and_health_checks_bring_it_back() {
    let mut a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            retries: 1,
            passive: Some(Passive {
                failures: nz(2),
                cooldown: Duration::from_secs(30),
            }),
            health_check: Some(HealthCheck {
                path: "/healthz".into(),
                interval: Duration::from_millis(100),
                timeout: Duration::from_millis(200),
                // Only passive ejection acts while it is stopped.
                unhealthy_after: nz(1000),
                healthy_after: nz(1),
            }),
            ..options(&[a.addr, b.addr])
        },
    )
    .unwrap();
    for _ in 0..4 {
        answered(&pool, get("/")).await;
    }
    let a_addr = a.addr;
    a.stop().await;
    for _ in 0..20 {
        // No request fails: the failing GETs are retried on b.
        assert_eq!(answered(&pool, get("/")).await, b.addr);
    }
    let stats = pool.stats();
    assert_eq!(stats[0].address, a_addr);
    assert_eq!(stats[0].failures, 2, "a is not tried once ejected");
    assert_eq!(stats[0].state, EndpointState::Ejected);
    assert_eq!(
        (stats[1].failures, stats[1].state),
        (0, EndpointState::Healthy)
    );

    let back = Upstream::start_on(a_addr, |_request| async { ok("a") }).await;
    wait_until("a healthy again", || {
        pool.stats()[0].state == EndpointState::Healthy
    })
    .await;
    let hits_before = back.hits();
    for _ in 0..10 {
        answered(&pool, get("/")).await;
    }
    assert!(back.hits() - hits_before >= 4, "a is back in rotation");
}

#[tokio::test]
async fn http1_host_is_the_clients_or_else_the_address_also_for_health_checks() {
    let seen: Arc<std::sync::Mutex<Vec<(String, String)>>> = Arc::default();
    let log = seen.clone();
    let upstream = Upstream::start(move |request| {
        let log = log.clone();
        async move {
            let host = request
                .headers()
                .get_all(header::HOST)
                .iter()
                .map(|h| h.to_str().unwrap())
                .collect::<Vec<_>>()
                .join(" | ");
            log.lock().unwrap().push((request.uri().to_string(), host));
            ok("ok")
        }
    })
    .await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            health_check: Some(HealthCheck {
                path: "/healthz".into(),
                interval: Duration::from_millis(50),
                ..HealthCheck::default()
            }),
            ..options(&[upstream.addr])
        },
    )
    .unwrap();
    answered(&pool, get("/with")).await;
    answered(&pool, Request::get("/without").body(Body::empty()).unwrap()).await;
    wait_until("a health check", || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|(uri, _)| uri == "/healthz")
    })
    .await;

    // Origin-form targets, and exactly one Host: the client's, else the address.
    let address = upstream.addr.to_string();
    let seen = seen.lock().unwrap();
    assert!(
        seen.contains(&("/with".into(), "app.test".into())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&("/without".into(), address.clone())),
        "{seen:?}"
    );
    let checks: Vec<_> = seen.iter().filter(|(uri, _)| uri == "/healthz").collect();
    assert!(checks.iter().all(|(_, host)| *host == address), "{seen:?}");
}

#[tokio::test]
async fn active_checks_take_an_address_down() {
    let good = Upstream::named("good").await;
    let dead = refused_addr();
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            retries: 0,
            passive: None,
            health_check: Some(HealthCheck {
                interval: Duration::from_millis(50),
                timeout: Duration::from_millis(200),
                unhealthy_after: nz(1),
                ..HealthCheck::default()
            }),
            ..options(&[dead, good.addr])
        },
    )
    .unwrap();
    wait_until("dead down", || pool.stats()[0].state == EndpointState::Down).await;
    for _ in 0..10 {
        assert_eq!(answered(&pool, get("/")).await, good.addr);
    }
    let stats = pool.stats();
    assert_eq!(stats[0].failures, 0, "no request went to the down address");
    assert_eq!(stats[1].state, EndpointState::Healthy);
    assert_eq!(stats[1].weight, 1);
}

#[tokio::test]
async fn passive_failures_show_in_stats() {
    let good = Upstream::named("good").await;
    let dead = refused_addr();
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            retries: 0,
            passive: Some(Passive {
                failures: nz(1),
                cooldown: Duration::from_secs(30),
            }),
            ..options(&[dead, good.addr])
        },
    )
    .unwrap();
    let mut failed = 0;
    for _ in 0..6 {
        if pool.send(get("/")).await.is_err() {
            failed += 1;
        }
    }
    assert_eq!(failed, 1, "one failure, then the address is ejected");
    let stats = pool.stats();
    assert_eq!(
        (stats[0].failures, stats[0].state),
        (1, EndpointState::Ejected)
    );
    assert_eq!(
        (stats[1].failures, stats[1].state),
        (0, EndpointState::Healthy)
    );
}

#[tokio::test]
async fn all_down_is_502_quickly() {
    let pool = UpstreamPool::new("api", options(&[refused_addr(), refused_addr()])).unwrap();
    for _ in 0..3 {
        // Failing open to an unavailable address still fails fast.
        let start = Instant::now();
        let error = pool.send(get("/")).await.unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(matches!(error, UpstreamError::Unavailable { .. }));
        assert_eq!(error.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(error.to_string(), r#"upstream "api": unavailable"#);
    }
}

// === timeouts and retries ===

/// The deadline's timer is kept with the upstream connection and moved
/// later for each request on it: a request on a reused connection gets its
/// whole `request_timeout` (the last request's deadline, passed while the
/// connection was idle or during this request, does not end it), and one
/// past its own deadline still times out at it.
#[tokio::test]
async fn a_reused_connection_times_each_request_from_its_own_start() {
    // `/slow/N`: answered after N ms.
    let upstream = Upstream::start(|request| async move {
        let delay: u64 = request.uri().path()["/slow/".len()..].parse().unwrap();
        tokio::time::sleep(Duration::from_millis(delay)).await;
        ok("done")
    })
    .await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            request_timeout: Duration::from_millis(400),
            ..options(&[upstream.addr])
        },
    )
    .unwrap();
    answered(&pool, get("/slow/0")).await;
    // Past the first request's deadline while idle, then 300 ms of a
    // second request on the same connection.
    tokio::time::sleep(Duration::from_millis(500)).await;
    answered(&pool, get("/slow/300")).await;
    // Started about 100 ms before the second's deadline, answered after it.
    answered(&pool, get("/slow/200")).await;
    assert_eq!(upstream.connections(), 1, "all three on one connection");
    times_out_at(&pool, get("/slow/5000"), Duration::from_millis(400)).await;
    // The timed-out connection was closed; the next request gets a new one.
    answered(&pool, get("/slow/0")).await;
    assert_eq!(upstream.connections(), 2);
}

#[tokio::test]
async fn slow_upstream_times_out_at_request_timeout() {
    let slow = Upstream::start(|_request| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        ok("late")
    })
    .await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            request_timeout: Duration::from_millis(300),
            ..options(&[slow.addr])
        },
    )
    .unwrap();
    let error = times_out_at(&pool, get("/"), Duration::from_millis(300)).await;
    assert_eq!(error.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(slow.hits(), 1, "a timeout is not retried");
    assert_eq!(pool.stats()[0].failures, 1);
}

/// A pool of a refused address then `good`, in turn, speaking `protocol`,
/// without passive health.
fn refused_then(good: SocketAddr, protocol: Protocol) -> UpstreamPool {
    UpstreamPool::new(
        "api",
        UpstreamOptions {
            protocol,
            passive: None,
            ..options(&[refused_addr(), good])
        },
    )
    .unwrap()
}

#[tokio::test]
async fn refused_get_is_retried_elsewhere_post_is_not() {
    let good = Upstream::named("good").await;
    let pool = refused_then(good.addr, Protocol::Http1);
    for _ in 0..4 {
        assert_eq!(answered(&pool, get("/")).await, good.addr);
    }
    let hits = good.hits();
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let post = Request::post("/")
            .header(header::HOST, "app.test")
            .body(Body::full("x"))
            .unwrap();
        outcomes.push(pool.send(post).await.map(|(_, address)| address));
    }
    // Round robin: one POST goes to each address, the refused one fails.
    let failures: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(failures.len(), 1, "{outcomes:?}");
    assert!(matches!(failures[0], UpstreamError::Unavailable { .. }));
    assert_eq!(good.hits(), hits + 1);
}

#[tokio::test]
async fn a_retry_sends_the_same_head_with_the_next_addresss_own_host() {
    let seen: Arc<std::sync::Mutex<Vec<(String, String, String)>>> = Arc::default();
    let log = seen.clone();
    let good = Upstream::start(move |request| {
        let log = log.clone();
        async move {
            let all = |name| {
                request
                    .headers()
                    .get_all(name)
                    .iter()
                    .map(|h| h.to_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(" | ")
            };
            let line = (
                request.uri().to_string(),
                all(header::HOST),
                all(header::ACCEPT),
            );
            log.lock().unwrap().push(line);
            ok("ok")
        }
    })
    .await;
    let pool = refused_then(good.addr, Protocol::Http1);
    // Round robin over both addresses (a retry's choice moves the cursor
    // too): a request that tries the refused address first goes again to
    // the other.
    for i in 0..4 {
        let with_host = Request::get(format!("/with/{i}"))
            .header(header::HOST, "app.test")
            .header(header::ACCEPT, "text/plain")
            .body(Body::empty())
            .unwrap();
        assert_eq!(answered(&pool, with_host).await, good.addr);
        let without = Request::get(format!("/without/{i}"))
            .header(header::ACCEPT, "text/html")
            .body(Body::empty())
            .unwrap();
        assert_eq!(answered(&pool, without).await, good.addr);
    }
    let address = good.addr.to_string();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 8, "{seen:?}");
    for i in 0..4 {
        let with = (
            format!("/with/{i}"),
            "app.test".to_string(),
            "text/plain".to_string(),
        );
        let without = (
            format!("/without/{i}"),
            address.clone(),
            "text/html".to_string(),
        );
        assert!(seen.contains(&with), "{seen:?}");
        assert!(seen.contains(&without), "{seen:?}");
    }
}

// === upstream faults ===

#[tokio::test]
async fn garbage_response_is_unavailable_and_not_retried() {
    let (addr, connections, _) = raw_server(|_| Some(b"NOT HTTP\r\n\r\n".to_vec())).await;
    let pool = UpstreamPool::new("api", options(&[addr])).unwrap();
    let error = pool.send(get("/")).await.unwrap_err();
    assert!(matches!(
        error,
        UpstreamError::Unavailable {
            source: Some(_),
            ..
        }
    ));
    assert_eq!(error.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(connections.load(SeqCst), 1);
}

#[tokio::test]
async fn oversized_response_head_is_unavailable_and_connection_not_reused() {
    let mut head = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 100 * 1024));
    head.extend_from_slice(b"\r\ncontent-length: 0\r\n\r\n");
    let (addr, connections, _) = raw_server(move |_| Some(head.clone())).await;
    let pool = UpstreamPool::new("api", options(&[addr])).unwrap();
    for expected_connections in 1..=2 {
        let Err(error) = pool.send(get("/")).await else {
            panic!("a 100 KiB response head was accepted");
        };
        assert!(matches!(error, UpstreamError::Unavailable { .. }));
        assert_eq!(connections.load(SeqCst), expected_connections);
    }
}

#[tokio::test]
async fn large_but_allowed_response_head_passes() {
    let mut head = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 24 * 1024));
    head.extend_from_slice(b"\r\ncontent-length: 2\r\n\r\nok");
    let (addr, _, _) = raw_server(move |_| Some(head.clone())).await;
    let pool = UpstreamPool::new("api", options(&[addr])).unwrap();
    let (response, _) = pool.send(get("/")).await.expect("a 24 KiB head passes");
    assert_eq!(response.headers()["x-big"].len(), 24 * 1024);
    assert_eq!(text(response).await, "ok");
}

#[tokio::test]
async fn keep_alive_connection_closed_by_upstream_is_retried() {
    let answer = |n: usize| {
        (n == 0).then(|| {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok".to_vec()
        })
    };
    // Answers the first request of a connection; reads the second and closes.
    let (addr, connections, requests) = raw_server(answer).await;
    let pool = UpstreamPool::new("api", options(&[addr])).unwrap();
    answered(&pool, get("/one")).await;
    // Let the connection go back to the pool.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (response, _) = pool
        .send(get("/two"))
        .await
        .expect("retried on a new connection");
    assert_eq!(text(response).await, "ok");
    assert_eq!(connections.load(SeqCst), 2);
    assert_eq!(requests.load(SeqCst), 3, "the second request went twice");
}

#[tokio::test]
async fn a_post_on_an_idle_connection_the_upstream_closed_goes_unsent_to_a_new_one() {
    // Answers one request per connection, then closes it: the pool's idle
    // connection is dead by the time the POST comes.
    let requests = Arc::new(AtomicUsize::new(0));
    let r = requests.clone();
    let (addr, connections) = each_connection(move |mut stream| {
        let r = r.clone();
        async move {
            if read_head(&mut stream).await {
                r.fetch_add(1, SeqCst);
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                // Closed once the pool has put it back as idle.
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }
    })
    .await;
    let pool = UpstreamPool::new("api", options(&[addr])).unwrap();
    answered(&pool, get("/one")).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let post = Request::post("/two")
        .header(header::HOST, "app.test")
        .header(header::CONTENT_LENGTH, "4")
        .body(Body::full("data"))
        .unwrap();
    let (response, _) = pool
        .send(post)
        .await
        .expect("a request never written goes on a new connection, whatever its method");
    assert_eq!(text(response).await, "ok");
    assert_eq!(connections.load(SeqCst), 2);
    assert_eq!(requests.load(SeqCst), 2, "the POST was written once");
}

#[tokio::test]
async fn a_connection_is_reused_only_after_its_response_was_read_to_the_end() {
    let upstream =
        Upstream::start(|_request: Request<Incoming>| async move { ok(vec![b'x'; 256 * 1024]) })
            .await;
    let pool = UpstreamPool::new("api", options(&[upstream.addr])).unwrap();
    for _ in 0..3 {
        let (response, _) = pool.send(get("/")).await.unwrap();
        assert_eq!(text(response).await.len(), 256 * 1024);
    }
    assert_eq!(upstream.connections(), 1, "read to the end: kept");
    let (response, _) = pool.send(get("/")).await.unwrap();
    drop(response);
    let (response, _) = pool.send(get("/")).await.unwrap();
    assert_eq!(text(response).await.len(), 256 * 1024);
    assert_eq!(
        upstream.connections(),
        2,
        "the connection of a body dropped half read is not used again"
    );
    // A HEAD's response has no body to read: its connection is kept.
    let head = Request::head("/")
        .header(header::HOST, "app.test")
        .body(Body::empty())
        .unwrap();
    let (response, _) = pool.send(head).await.unwrap();
    drop(response);
    answered(&pool, get("/")).await;
    assert_eq!(upstream.connections(), 2);
}

/// A 200 with a two-byte body.
const OK_2: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

/// Reads a request head and answers [`OK_2`] at once; the count of body
/// bytes read with the head, or `None` when the connection closed first.
async fn answer_ok_at_the_head(stream: &mut TcpStream) -> Option<usize> {
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
        }
    }
    stream.write_all(OK_2).await.unwrap();
    let head_end = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    Some(seen.len() - head_end)
}

type Frames = tokio::sync::mpsc::Sender<Result<http_body::Frame<bytes::Bytes>, std::io::Error>>;

/// A POST declaring 30,000 bytes whose body is what is sent on the channel.
fn upload_of_30000() -> (Frames, Request<Body>) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    let post = Request::post("/upload")
        .header(header::HOST, "app.test")
        .header(header::CONTENT_LENGTH, "30000")
        .body(Body::new(http_body_util::StreamBody::new(stream)))
        .unwrap();
    (tx, post)
}

#[tokio::test]
async fn an_upload_answered_early_is_still_sent_whole_and_its_connection_kept() {
    // Answers as soon as the head is in, then reads the 30,000-byte body,
    // then serves a second request on the same connection.
    let body_bytes = Arc::new(AtomicUsize::new(0));
    let b = body_bytes.clone();
    let (addr, connections) = each_connection(move |mut stream| {
        let b = b.clone();
        async move {
            let Some(mut got) = answer_ok_at_the_head(&mut stream).await else {
                return;
            };
            let mut chunk = [0u8; 4096];
            while got < 30_000 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            b.store(got, SeqCst);
            if read_head(&mut stream).await {
                stream.write_all(OK_2).await.unwrap();
            }
        }
    })
    .await;
    let pool = UpstreamPool::new("api", options(&[addr])).unwrap();
    let (tx, post) = upload_of_30000();
    tx.send(Ok(http_body::Frame::data(vec![b'a'; 10_000].into())))
        .await
        .unwrap();
    let (response, _) = pool.send(post).await.unwrap();
    assert_eq!(
        text(response).await,
        "ok",
        "answered before the body was all sent"
    );
    for _ in 0..2 {
        tx.send(Ok(http_body::Frame::data(vec![b'b'; 10_000].into())))
            .await
            .unwrap();
    }
    drop(tx);
    wait_until("the whole body reached the upstream", || {
        body_bytes.load(SeqCst) == 30_000
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    answered(&pool, get("/next")).await;
    assert_eq!(
        connections.load(SeqCst),
        1,
        "the connection was kept after the upload"
    );
}

#[tokio::test]
async fn an_upload_answered_early_that_stalls_is_given_up_after_idle_timeout() {
    // Answers as soon as the head is in, then reads until the proxy closes.
    let closed = Arc::new(AtomicUsize::new(0));
    let c = closed.clone();
    let (addr, connections) = each_connection(move |mut stream| {
        let c = c.clone();
        async move {
            if answer_ok_at_the_head(&mut stream).await.is_none() {
                return;
            }
            let mut chunk = [0u8; 4096];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            c.fetch_add(1, SeqCst);
        }
    })
    .await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            idle_timeout: Duration::from_millis(300),
            ..options(&[addr])
        },
    )
    .unwrap();
    let (tx, post) = upload_of_30000();
    tx.send(Ok(http_body::Frame::data(vec![b'a'; 10_000].into())))
        .await
        .unwrap();
    let (response, _) = pool.send(post).await.unwrap();
    assert_eq!(text(response).await, "ok");
    // The client sends nothing more, and keeps its side open.
    wait_until("the stalled upload's connection is closed", || {
        closed.load(SeqCst) == 1
    })
    .await;
    answered(&pool, get("/next")).await;
    assert_eq!(
        connections.load(SeqCst),
        2,
        "the stalled connection was not reused"
    );
    drop(tx);
}

#[tokio::test]
async fn idle_timeout_and_max_idle_bound_the_kept_connections() {
    let upstream = Upstream::named("a").await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            idle_timeout: Duration::from_millis(200),
            ..options(&[upstream.addr])
        },
    )
    .unwrap();
    answered(&pool, get("/")).await;
    answered(&pool, get("/")).await;
    assert_eq!(upstream.connections(), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    answered(&pool, get("/")).await;
    assert_eq!(
        upstream.connections(),
        2,
        "idle past idle_timeout: not used"
    );

    let other = Upstream::named("b").await;
    let none_kept = UpstreamPool::new(
        "api",
        UpstreamOptions {
            max_idle_per_address: 0,
            ..options(&[other.addr])
        },
    )
    .unwrap();
    for _ in 0..3 {
        answered(&none_kept, get("/")).await;
    }
    assert_eq!(other.connections(), 3, "max_idle_per_address 0 keeps none");

    // Four at once need four connections; one idle is kept, three closed.
    let third = Upstream::start(|_request: Request<Incoming>| async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ok("slow")
    })
    .await;
    let one_kept = UpstreamPool::new(
        "api",
        UpstreamOptions {
            max_idle_per_address: 1,
            ..options(&[third.addr])
        },
    )
    .unwrap();
    let together = (0..4).map(|_| answered(&one_kept, get("/")));
    futures_util::future::join_all(together).await;
    assert_eq!(third.connections(), 4);
    for _ in 0..3 {
        answered(&one_kept, get("/")).await;
    }
    assert_eq!(third.connections(), 4, "the one kept served the next three");
}

// === HTTP/2 ===

#[tokio::test]
async fn http2_multiplexes_on_one_connection() {
    let upstream = Upstream::start(|request: Request<Incoming>| async move {
        assert_eq!(request.version(), Version::HTTP_2);
        tokio::time::sleep(Duration::from_millis(20)).await;
        ok("h2")
    })
    .await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            protocol: Protocol::Http2,
            ..options(&[upstream.addr])
        },
    )
    .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let pool = pool.clone();
        tasks.spawn(async move {
            let (response, _) = pool.send(get("/")).await.unwrap();
            assert_eq!(response.version(), Version::HTTP_2);
            text(response).await
        });
    }
    while let Some(body) = tasks.join_next().await {
        assert_eq!(body.unwrap(), "h2");
    }
    assert_eq!(upstream.hits(), 100);
    assert_eq!(upstream.connections(), 1);
}

#[tokio::test]
async fn http2_authority_is_the_host_not_the_address() {
    let upstream = Upstream::start(|request: Request<Incoming>| async move {
        let authority = request.uri().authority().map(|a| a.to_string());
        let host = request.headers()[header::HOST].to_str().unwrap().to_owned();
        ok(format!("{} {host}", authority.unwrap_or_default()))
    })
    .await;
    let pool = UpstreamPool::new(
        "api",
        UpstreamOptions {
            protocol: Protocol::Http2,
            ..options(&[upstream.addr])
        },
    )
    .unwrap();
    for host in ["app.test", "other.test:8080", "app.test"] {
        let mut request = get("/");
        request
            .headers_mut()
            .insert(header::HOST, host.parse().unwrap());
        let (response, _) = pool.send(request).await.unwrap();
        assert_eq!(text(response).await, format!("{host} {host}"));
    }
    // One connection per address and host.
    assert_eq!(upstream.connections(), 2);
}

#[tokio::test]
async fn http2_refused_get_is_retried_with_the_same_head_post_is_not() {
    let upstream = Upstream::start(|request: Request<Incoming>| async move {
        assert_eq!(request.version(), Version::HTTP_2);
        let accept = request.headers()[header::ACCEPT]
            .to_str()
            .unwrap()
            .to_owned();
        ok(format!("{} {accept}", request.uri()))
    })
    .await;
    let pool = refused_then(upstream.addr, Protocol::Http2);
    // Round robin over both addresses (a retry's choice moves the cursor
    // too): a request that tries the refused address first goes again to
    // the other with the head it had.
    for i in 0..4 {
        let request = Request::get(format!("/x/{i}?q"))
            .header(header::HOST, "app.test")
            .header(header::ACCEPT, "text/plain")
            .body(Body::empty())
            .unwrap();
        let (response, address) = pool.send(request).await.unwrap();
        assert_eq!(address, upstream.addr);
        assert_eq!(
            text(response).await,
            format!("http://app.test/x/{i}?q text/plain")
        );
    }
    let hits = upstream.hits();
    let mut failures = 0;
    for _ in 0..2 {
        let post = Request::post("/")
            .header(header::HOST, "app.test")
            .header(header::ACCEPT, "text/plain")
            .body(Body::full("x"))
            .unwrap();
        failures += usize::from(pool.send(post).await.is_err());
    }
    assert_eq!(failures, 1, "a POST is not retried");
    assert_eq!(upstream.hits(), hits + 1);
}

#[tokio::test]
async fn host_header_is_kept_and_uri_is_origin_form() {
    let upstream = Upstream::start(|request: Request<Incoming>| async move {
        let host = request.headers()[header::HOST].to_str().unwrap().to_owned();
        ok(format!("{host} {}", request.uri()))
    })
    .await;
    let pool = UpstreamPool::new("api", options(&[upstream.addr])).unwrap();
    let mut request = get("/x?y=1");
    *request.uri_mut() = "http://elsewhere.test/x?y=1".parse().unwrap();
    let (response, _) = pool.send(request).await.unwrap();
    assert_eq!(text(response).await, "app.test /x?y=1");
}

// === a new address list ===

#[tokio::test]
async fn a_pool_made_after_another_keeps_the_connections_of_addresses_that_remain() {
    let a = Upstream::named("a").await;
    let b = Upstream::named("b").await;
    let c = Upstream::named("c").await;
    let first = UpstreamPool::new("api", options(&[a.addr, b.addr])).unwrap();
    for _ in 0..4 {
        answered(&first, get("/")).await;
    }
    assert_eq!(
        (a.connections(), b.connections()),
        (1, 1),
        "one kept-alive connection each"
    );

    let second = UpstreamPool::new_after("api", options(&[b.addr, c.addr]), &first).unwrap();
    assert!(!second.same_pool(&first));
    drop(first);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..6 {
        seen.insert(answered(&second, get("/")).await);
    }
    assert_eq!(
        seen,
        [b.addr, c.addr].into_iter().collect(),
        "a is gone, c is new"
    );
    assert_eq!(
        b.connections(),
        1,
        "b's connection was taken over, not opened again"
    );
    assert_eq!(c.connections(), 1);
    assert_eq!(a.hits(), 2, "nothing more went to the removed address");
}
