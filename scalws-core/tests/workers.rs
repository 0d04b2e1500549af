//! A server with workers beside the caller's runtime: a socket per worker
//! with SO_REUSEPORT, every connection served on the worker that accepted
//! it, `max_connections` across them all, reloads and drain on every worker.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response};
use scalws_core::server::Workers;
use scalws_core::{Body, Limits, ListenerSpec, Server};
use test_support::{read_response, read_until_close};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Answers with the name of the thread that runs it; `/slow` after 600 ms.
async fn app(request: Request<Body>) -> Result<Response<Body>, Infallible> {
    if request.uri().path() == "/slow" {
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let thread = std::thread::current();
    Ok(Response::new(Body::from(
        thread.name().unwrap_or("unnamed").to_owned(),
    )))
}

fn spec(name: &str) -> ListenerSpec {
    ListenerSpec::http(name, "127.0.0.1:0".parse().unwrap())
}

/// Two requests on one kept connection: the names of the threads that answered.
async fn two_on_one(addr: SocketAddr) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut answers = Vec::new();
    for _ in 0..2 {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let (head, body) = read_response(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        answers.push(String::from_utf8(body).unwrap());
    }
    (answers.remove(0), answers.remove(0))
}

/// The threads that answered 40 connections of two requests each; every
/// connection's two answers came from the same thread.
async fn threads_answering(addr: SocketAddr) -> HashSet<String> {
    let mut threads = HashSet::new();
    for _ in 0..40 {
        let (first, second) = two_on_one(addr).await;
        assert_eq!(first, second, "a connection moved between workers");
        threads.insert(first);
    }
    threads
}

#[tokio::test]
async fn connections_spread_over_the_workers_and_each_stays_on_its_own() {
    let server = Server::bind_with(
        &[spec("edge")],
        Limits::default(),
        Workers::start(2).unwrap(),
    )
    .unwrap();
    let addr = server.local_addrs()[0].1;
    let running = server.start(tower::service_fn(app));
    let threads = threads_answering(addr).await;
    // The kernel hashes each new connection to one of the three sockets:
    // all 40 on one would happen with a chance of 3^-39.
    assert!(
        threads.len() >= 2,
        "one worker served everything: {threads:?}"
    );
    assert!(
        threads.iter().any(|t| t.starts_with("scalws-worker-")),
        "{threads:?}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn max_connections_holds_across_workers_and_nobody_starves() {
    let limits = Limits {
        max_connections: 1,
        ..Limits::default()
    };
    let server = Server::bind_with(&[spec("edge")], limits, Workers::start(2).unwrap()).unwrap();
    let addr = server.local_addrs()[0].1;
    let running = server.start(tower::service_fn(app));

    let mut first = TcpStream::connect(addr).await.unwrap();
    first
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (head, _) = read_response(&mut first).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // More clients than sockets, so some land on the sockets of workers that
    // did not serve the first: none is served while it is open...
    let mut waiting = Vec::new();
    for _ in 0..6 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        waiting.push(stream);
    }
    for stream in &mut waiting {
        let early = read_until_close(stream, Duration::from_millis(100)).await;
        assert_eq!(early, "", "served past max_connections");
    }

    // ...and once it goes away, each is served in turn, whichever socket it
    // waits on.
    drop(first);
    for stream in &mut waiting {
        let reply = read_until_close(stream, Duration::from_secs(5)).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
    running.shutdown().await;
}

#[tokio::test]
async fn a_reconfiguration_opens_and_closes_a_listener_on_every_worker() {
    let server =
        Server::bind_with(&[spec("a")], Limits::default(), Workers::start(2).unwrap()).unwrap();
    let mut running = server.start(tower::service_fn(app));
    let a = running.local_addrs()[0].1;
    let b = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();

    let b_spec = ListenerSpec::http("b", b);
    running
        .reconfigure(&[spec("a"), b_spec.clone()], Limits::default())
        .await
        .unwrap();
    assert!(threads_answering(b).await.len() >= 2);

    // Removing `a` closes all three of its sockets: a connection that one of
    // them would have taken is refused, whichever the kernel picks.
    running
        .reconfigure(&[b_spec], Limits::default())
        .await
        .unwrap();
    for _ in 0..20 {
        assert!(TcpStream::connect(a).await.is_err(), "{a} still accepts");
    }
    assert!(threads_answering(b).await.len() >= 2);
    running.shutdown().await;
}

#[tokio::test]
async fn listeners_never_share_a_port_they_did_not_ask_for() {
    // Twenty listeners at port 0, two sockets each: twenty ports.
    let specs: Vec<ListenerSpec> = (0..20).map(|n| spec(&format!("l{n}"))).collect();
    let server = Server::bind_with(&specs, Limits::default(), Workers::start(1).unwrap()).unwrap();
    let ports: HashSet<u16> = server
        .local_addrs()
        .into_iter()
        .map(|(_, address)| address.port())
        .collect();
    assert_eq!(ports.len(), 20, "{ports:?}");

    // A second server at an address the first serves is refused, as
    // without workers, instead of taking a share of its connections.
    let taken = server.local_addrs()[0].1;
    let error = Server::bind_with(
        &[ListenerSpec::http("again", taken)],
        Limits::default(),
        Workers::start(1).unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        std::error::Error::source(&error)
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .map(std::io::Error::kind),
        Some(std::io::ErrorKind::AddrInUse),
        "{error}"
    );
}

#[tokio::test]
async fn shutdown_finishes_what_every_worker_has_in_flight() {
    let limits = Limits {
        drain_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let server = Server::bind_with(&[spec("edge")], limits, Workers::start(2).unwrap()).unwrap();
    let addr = server.local_addrs()[0].1;
    let running = server.start(tower::service_fn(app));

    let mut slow = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        slow.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let drained = tokio::spawn(running.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "new connections must be refused"
    );
    let mut threads = HashSet::new();
    for stream in &mut slow {
        let (head, body) = read_response(stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        threads.insert(String::from_utf8(body).unwrap());
    }
    assert!(threads.len() >= 2, "{threads:?}");
    tokio::time::timeout(Duration::from_secs(5), drained)
        .await
        .unwrap()
        .unwrap();
}
