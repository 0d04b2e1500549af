//! Reloads of the `scalwsd` binary (SIGHUP and `POST /reload`) while it
//! serves: nothing lost, nothing half-applied.
#![allow(clippy::unwrap_used, missing_docs)]

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use test_support::upstream::{Upstream, ok};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;

use support::process::Scalwsd;

/// `N` distinct free ports (held together while chosen, so never the same twice).
fn free_ports<const N: usize>() -> [u16; N] {
    support::process::free_addrs::<N>().map(|address| address.port())
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// What these tests ask of the admin listener.
trait Reloads {
    /// Writes the file and reloads it through the admin listener.
    async fn reload_with(&self, yaml: &str) -> (u16, String);
    /// Reloads counted so far, ok and failed, from /metrics.
    async fn reloads(&self) -> (u64, u64);
}

impl Reloads for Scalwsd {
    async fn reload_with(&self, yaml: &str) -> (u16, String) {
        std::fs::write(&self.config, yaml).unwrap();
        admin(self.admin.unwrap(), "POST", "/reload").await
    }

    async fn reloads(&self) -> (u64, u64) {
        let (_, metrics) = admin(self.admin.unwrap(), "GET", "/metrics").await;
        (
            metric(&metrics, "scalws_config_reloads_total{result=\"ok\"}"),
            metric(&metrics, "scalws_config_reloads_total{result=\"failed\"}"),
        )
    }
}

fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

/// One request to the admin listener: status and body.
async fn admin(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("{method} {path} HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut reply = String::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_string(&mut reply))
        .await
        .expect("admin answered in time")
        .unwrap();
    let status = reply[9..12].parse().unwrap();
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// One GET on a fresh connection: status and body.
async fn get_once(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    send(&mut sender, path).await
}

async fn send(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    path: &str,
) -> Result<(u16, String), String> {
    let request = Request::get(path)
        .header("host", "site.test")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn site(port: u16, admin: SocketAddr, body: &str) -> String {
    format!(
        r#"admin: {admin}
limits: {{ drain_timeout: 2s }}
listeners:
  - {{ name: http, address: "127.0.0.1:{port}" }}
applications:
  - name: site
    domains: ["*"]
    routes:
      - {{ path: /, respond: {{ body: "{body}" }} }}
"#
    )
}

/// What one client saw: when it asked, when it heard, and what.
struct Seen {
    sent: Instant,
    received: Instant,
    result: Result<(u16, String), String>,
}

/// A reload: when it was asked for, when it was known applied, and which
/// configuration serves after it.
struct Reload {
    start: Instant,
    end: Instant,
    after: &'static str,
}

/// The bodies a request in flight between `sent` and `received` may carry.
fn allowed(reloads: &[Reload], sent: Instant, received: Instant) -> Vec<&'static str> {
    let mut current = "config-a";
    for reload in reloads.iter().filter(|r| r.end < sent) {
        current = reload.after;
    }
    let mut allowed = vec![current];
    for reload in reloads {
        if reload.start <= received && reload.end >= sent {
            allowed.push(reload.after);
        }
    }
    allowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_under_load_loses_no_request_and_never_applies_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let [port, admin_port] = free_ports();
    let admin_addr = local(admin_port);
    let addr = local(port);
    let a = site(port, admin_addr, "config-a");
    let b = site(port, admin_addr, "config-b");
    // Valid YAML, one bad value: the whole file is refused.
    let bad = b.replace(
        "respond: { body: \"config-b\" }",
        "respond: { status: 99, body: \"config-bad\" }",
    );
    let scalwsd = Scalwsd::start(dir, &a, addr, Some(admin_addr), 2).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = tokio::task::JoinSet::new();
    // Keep-alive HTTP/1.1, a fresh connection per request, and HTTP/2.
    for kind in ["keep-alive", "fresh", "h2"] {
        let stop = stop.clone();
        clients.spawn(async move {
            let mut seen = Vec::new();
            let mut keep_alive = None;
            let mut h2 = None;
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let result = match kind {
                    "keep-alive" => {
                        if keep_alive.is_none() {
                            let stream = TcpStream::connect(addr).await.unwrap();
                            let (sender, connection) =
                                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                                    .await
                                    .unwrap();
                            tokio::spawn(connection);
                            keep_alive = Some(sender);
                        }
                        send(keep_alive.as_mut().unwrap(), "/").await
                    }
                    "fresh" => get_once(addr, "/").await,
                    _ => {
                        let sender = match &mut h2 {
                            Some(sender) => sender,
                            None => h2.insert(test_support::h2_connection(addr).await),
                        };
                        let request = Request::get(format!("http://site.test:{}/", addr.port()))
                            .body(Full::new(Bytes::new()))
                            .unwrap();
                        match sender.send_request(request).await {
                            Ok(response) => {
                                let status = response.status().as_u16();
                                let body = response.into_body().collect().await.unwrap().to_bytes();
                                Ok((status, String::from_utf8_lossy(&body).into_owned()))
                            }
                            Err(error) => Err(error.to_string()),
                        }
                    }
                };
                seen.push(Seen {
                    sent,
                    received: Instant::now(),
                    result,
                });
            }
            (kind, seen)
        });
    }

    // 20 reloads, cycling through b, the bad file, a; even ones by POST
    // /reload, odd ones by SIGHUP (applied once /metrics counts them).
    let files: [(&str, &'static str); 3] = [(&b, "config-b"), (&bad, ""), (&a, "config-a")];
    let mut reloads = Vec::new();
    let mut current = "config-a";
    let mut failed_by_signal = 0;
    for i in 0..20 {
        let (yaml, after) = files[i % 3];
        let valid = !after.is_empty();
        let start = Instant::now();
        if i % 2 == 0 {
            let (status, body) = scalwsd.reload_with(yaml).await;
            if valid {
                assert_eq!(status, 200, "{body}");
                assert!(body.starts_with("reloaded"), "{body}");
            } else {
                assert_eq!(status, 422, "{body}");
                // Every error, located: FILE:LINE:COLUMN: key.path: message.
                let located = format!("{}:9:", scalwsd.config.display());
                assert!(body.contains(&located), "{body}");
                assert!(body.contains("routes[0].respond.status"), "{body}");
            }
        } else {
            let before = scalwsd.reloads().await;
            std::fs::write(&scalwsd.config, yaml).unwrap();
            scalwsd.signal("HUP");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let (ok, failed) = scalwsd.reloads().await;
                if ok + failed > before.0 + before.1 {
                    assert_eq!(failed > before.1, !valid);
                    break;
                }
                assert!(Instant::now() < deadline, "SIGHUP reload not seen");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            failed_by_signal += usize::from(!valid);
        }
        if valid {
            current = after;
        }
        reloads.push(Reload {
            start,
            end: Instant::now(),
            after: current,
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // At least 5,000 requests in all, within a minute.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, metrics) = admin(admin_addr, "GET", "/metrics").await;
        let served = metric(
            &metrics,
            "scalws_requests_total{application=\"site\",route=\"/\",class=\"2xx\"}",
        );
        if served >= 5_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {served} requests in a minute"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    while let Some(joined) = clients.join_next().await {
        let (kind, seen) = joined.unwrap();
        for s in &seen {
            let (status, body) = s.result.as_ref().unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(*status, 200, "{kind}: {body}");
            let allowed = allowed(&reloads, s.sent, s.received);
            assert!(
                allowed.contains(&body.as_str()),
                "{kind}: {body:?} not among {allowed:?}"
            );
        }
        total += seen.len();
    }
    assert!(total >= 5_000, "{total}");
    let bad_reloads = (0..20).filter(|i| i % 3 == 1).count();
    assert_eq!(
        scalwsd.reloads().await,
        (20 - bad_reloads as u64, bad_reloads as u64)
    );
    // A refused SIGHUP reload is reported in the log, located.
    assert!(failed_by_signal > 0);
    let logs = scalwsd.logs();
    assert!(logs.contains("reload failed"), "{logs}");
    assert!(
        logs.contains(&format!("{}:9:", scalwsd.config.display())),
        "{logs}"
    );
    eprintln!(
        "reload under load: {total} requests, 20 reloads ({bad_reloads} refused), 0 failures"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_and_h2_connections_opened_before_a_reload_keep_working() {
    let echo = test_support::upstream::websocket_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let [port, admin_port] = free_ports();
    let admin_addr = local(admin_port);
    let addr = local(port);
    let yaml = |body: &str| {
        site(port, admin_addr, body).replace(
            "    routes:\n",
            &format!("    routes:\n      - {{ path: /ws, proxy: \"{echo}\" }}\n"),
        )
    };
    let scalwsd = Scalwsd::start(dir, &yaml("config-a"), addr, Some(admin_addr), 2).await;

    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut ws, response) = tokio_tungstenite::client_async("ws://site.test/ws", stream)
        .await
        .unwrap();
    assert_eq!(response.status(), 101);
    use tokio_tungstenite::tungstenite::Message;
    ws.send(Message::text("before")).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("before"));

    let mut h2 = test_support::h2_connection(addr).await;
    let h2_get = |sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>| {
        let request = Request::get(format!("http://site.test:{port}/"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = sender.send_request(request);
        async move {
            let body = response.await.unwrap().into_body().collect().await.unwrap();
            String::from_utf8_lossy(&body.to_bytes()).into_owned()
        }
    };
    assert_eq!(h2_get(&mut h2).await, "config-a");
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut http1, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    assert_eq!(send(&mut http1, "/").await.unwrap().1, "config-a");

    let (status, body) = scalwsd.reload_with(&yaml("config-b")).await;
    assert_eq!(status, 200, "{body}");

    // The same WebSocket, HTTP/2 and HTTP/1.1 connections, after the reload.
    ws.send(Message::text("after")).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("after"));
    assert_eq!(h2_get(&mut h2).await, "config-b");
    assert_eq!(send(&mut http1, "/").await.unwrap().1, "config-b");
    ws.close(None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_are_added_and_removed_by_reload() {
    let dir = tempfile::tempdir().unwrap();
    let [one, two, admin_port] = free_ports();
    let admin_addr = local(admin_port);
    let listeners = |ports: &[(&str, u16)]| {
        let list: Vec<String> = ports
            .iter()
            .map(|(name, port)| format!("  - {{ name: {name}, address: \"127.0.0.1:{port}\" }}\n"))
            .collect();
        format!(
            "admin: {admin_addr}\nlimits: {{ drain_timeout: 2s }}\nlisteners:\n{}applications:\n  - {{ name: site, domains: [\"*\"], routes: [{{ path: /, respond: {{ body: hello }} }}] }}\n",
            list.concat()
        )
    };
    let scalwsd = Scalwsd::start(
        dir,
        &listeners(&[("one", one)]),
        local(one),
        Some(admin_addr),
        2,
    )
    .await;
    assert!(TcpStream::connect(local(two)).await.is_err());

    let (status, body) = scalwsd
        .reload_with(&listeners(&[("one", one), ("two", two)]))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        get_once(local(two), "/").await.unwrap(),
        (200, "hello".into())
    );
    assert_eq!(
        get_once(local(one), "/").await.unwrap(),
        (200, "hello".into())
    );

    // An idle keep-alive on the listener about to go.
    let mut idle = TcpStream::connect(local(one)).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0u8; 1024];
    assert!(idle.read(&mut buffer).await.unwrap() > 0);

    let (status, body) = scalwsd.reload_with(&listeners(&[("two", two)])).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        TcpStream::connect(local(one)).await.is_err(),
        "a removed listener refuses connections"
    );
    assert_eq!(
        get_once(local(two), "/").await.unwrap(),
        (200, "hello".into())
    );
    // The removed listener's idle connection is closed, not left answering 404s.
    let read = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buffer))
        .await
        .expect("closed within the drain");
    assert!(matches!(read, Ok(0) | Err(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_listeners_old_connections_keep_its_routes_through_the_drain() {
    let dir = tempfile::tempdir().unwrap();
    let [port, admin_port] = free_ports();
    let admin_addr = local(admin_port);
    let yaml = |name: &str, body: &str| {
        format!(
            "admin: {admin_addr}\nlimits: {{ drain_timeout: 1s }}\nlisteners: [{{ name: {name}, address: \"127.0.0.1:{port}\" }}]\napplications:\n  - {{ name: site, domains: [\"*\"], routes: [{{ path: /, respond: {{ body: {body} }} }}] }}\n"
        )
    };
    let scalwsd = Scalwsd::start(
        dir,
        &yaml("old", "before"),
        local(port),
        Some(admin_addr),
        2,
    )
    .await;

    // A keep-alive connection accepted by listener "old".
    let stream = TcpStream::connect(local(port)).await.unwrap();
    let (mut kept, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    assert_eq!(send(&mut kept, "/").await.unwrap(), (200, "before".into()));

    // Renamed at the same address, with a new body: new connections get the
    // new routes; the old connection still carries "old", which the new file
    // has not: it gets the old routes (not 404) for drain_timeout...
    let (status, body) = scalwsd.reload_with(&yaml("new", "after")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        get_once(local(port), "/").await.unwrap(),
        (200, "after".into())
    );
    assert_eq!(send(&mut kept, "/").await.unwrap(), (200, "before".into()));

    // ...then 404 (the client should reconnect).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(send(&mut kept, "/").await.unwrap().0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_upstreams_and_caches_are_kept_across_reloads() {
    let origin = Upstream::start(|_request| async {
        let mut response = ok("from-origin");
        response
            .headers_mut()
            .insert("cache-control", "max-age=60".parse().unwrap());
        response
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let [port, admin_port] = free_ports();
    let admin_addr = local(admin_port);
    let addr = local(port);
    let yaml = |retries: u32, max_size: &str, body: &str| {
        format!(
            r#"admin: {admin_addr}
listeners: [{{ name: http, address: "127.0.0.1:{port}" }}]
upstreams:
  origin: {{ addresses: ["{origin}"], retries: {retries} }}
applications:
  - name: site
    domains: ["*"]
    cache: {{ max_size: {max_size} }}
    routes:
      - {{ path: /cached, proxy: origin }}
      - {{ path: /direct, proxy: origin, cache: false }}
      - {{ path: /, respond: {{ body: "{body}" }} }}
"#,
            origin = origin.addr
        )
    };
    // One worker: idle upstream connections are kept per worker thread.
    let scalwsd = Scalwsd::start(dir, &yaml(1, "1MiB", "v1"), addr, Some(admin_addr), 1).await;
    for _ in 0..2 {
        assert_eq!(get_once(addr, "/cached").await.unwrap().1, "from-origin");
    }
    assert_eq!(get_once(addr, "/direct").await.unwrap().1, "from-origin");
    assert_eq!((origin.hits(), origin.connections()), (2, 1));

    // Same upstream and cache settings: the pool (and its idle connection)
    // and the stored response survive.
    let (status, body) = scalwsd.reload_with(&yaml(1, "1MiB", "v2")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(get_once(addr, "/").await.unwrap().1, "v2");
    assert_eq!(get_once(addr, "/cached").await.unwrap().1, "from-origin");
    assert_eq!(get_once(addr, "/direct").await.unwrap().1, "from-origin");
    assert_eq!((origin.hits(), origin.connections()), (3, 1));

    // Both changed: a new pool (a new connection) and an empty cache.
    let (status, body) = scalwsd.reload_with(&yaml(2, "2MiB", "v3")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(get_once(addr, "/direct").await.unwrap().1, "from-origin");
    assert_eq!(origin.connections(), 2);
    assert_eq!(get_once(addr, "/cached").await.unwrap().1, "from-origin");
    assert_eq!(origin.hits(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_cannot_bind_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let [port, admin_port] = free_ports();
    let admin_addr = local(admin_port);
    let addr = local(port);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let scalwsd = Scalwsd::start(
        dir,
        &site(port, admin_addr, "config-a"),
        addr,
        Some(admin_addr),
        2,
    )
    .await;
    let with_taken = site(port, admin_addr, "config-b").replace(
        "applications:",
        &format!("  - {{ name: other, address: \"127.0.0.1:{taken_port}\" }}\napplications:"),
    );
    let (status, body) = scalwsd.reload_with(&with_taken).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("cannot bind"), "{body}");
    assert_eq!(get_once(addr, "/").await.unwrap(), (200, "config-a".into()));
    assert_eq!(scalwsd.reloads().await, (0, 1));
    drop(taken);
}

/// A port free for both TCP and UDP on 127.0.0.1.
fn free_tcp_and_udp_port() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_reloaded_per_listener_for_https_and_http3() {
    use test_support::tls::{TestCa, h3, h3_peer_certificate, https};
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "old", &["a.test"], false);
    ca.issue(dir.path(), "new", &["a.test"], false);
    let one = free_tcp_and_udp_port();
    let two = free_tcp_and_udp_port();
    let [admin_port] = free_ports();
    let admin_addr = local(admin_port);
    // Both HTTPS listeners and both HTTP/3 ones start with the same files.
    let yaml = |first: &str| {
        format!(
            r#"admin: {admin_addr}
listeners:
  - {{ name: one, address: "127.0.0.1:{one}", protocol: https, tls: {{ certificates: [{{ cert: {first}.pem, key: {first}.key }}] }} }}
  - {{ name: quic, address: "127.0.0.1:{one}", protocol: http3, tls: {{ certificates: [{{ cert: {first}.pem, key: {first}.key }}] }} }}
  - {{ name: two, address: "127.0.0.1:{two}", protocol: https, tls: {{ certificates: [{{ cert: old.pem, key: old.key }}] }} }}
  - {{ name: quic2, address: "127.0.0.1:{two}", protocol: http3, tls: {{ certificates: [{{ cert: old.pem, key: old.key }}] }} }}
applications:
  - {{ name: site, domains: ["*"], routes: [{{ path: /, respond: {{ body: hello }} }}] }}
"#
        )
    };
    let scalwsd = Scalwsd::start(dir, &yaml("old"), local(one), Some(admin_addr), 2).await;
    let get = |port: u16| {
        let request = Request::get("https://a.test/")
            .header("host", "a.test")
            .body(Full::new(Bytes::new()))
            .unwrap();
        https(
            ca.client_config(&[b"http/1.1"]),
            local(port),
            "a.test",
            false,
            request,
        )
    };
    let before = get(one).await.peer_certificate;
    assert_eq!(get(two).await.peer_certificate, before);
    assert_eq!(h3_peer_certificate(local(one), "a.test").await, before);
    assert_eq!(h3_peer_certificate(local(two), "a.test").await, before);

    // Listener one (and its HTTP/3 twin) move to the new pair; two keeps the old one.
    let (status, body) = scalwsd.reload_with(&yaml("new")).await;
    assert_eq!(status, 200, "{body}");
    let after = get(one).await;
    assert_eq!(after.reply.text(), "hello");
    assert_ne!(
        after.peer_certificate, before,
        "listener one serves the new certificate"
    );
    assert_eq!(
        get(two).await.peer_certificate,
        before,
        "listener two keeps its own, though it shared the files before"
    );
    let request = http::Request::get("https://a.test/").body(()).unwrap();
    let reply = h3(&ca, local(one), "a.test", request, None).await;
    assert_eq!((reply.status, reply.text()), (200, "hello"));
    // The same for HTTP/3: quic moves with one, quic2 keeps the old pair.
    assert_eq!(
        h3_peer_certificate(local(one), "a.test").await,
        after.peer_certificate
    );
    assert_eq!(
        h3_peer_certificate(local(two), "a.test").await,
        before,
        "quic2 keeps its own, though it shared the files before"
    );
}
