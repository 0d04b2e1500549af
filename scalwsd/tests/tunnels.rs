//! WebSocket tunnels through the proxy are connections like the others: they
//! hold their place in `max_connections`, close when idle past
//! `tunnel_idle_timeout`, and a drain waits for them until `drain_timeout`.
//! Real sockets on 127.0.0.1, a real WebSocket echo upstream.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use scalws_core::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn yaml(limits: &str, echo: SocketAddr) -> String {
    format!(
        r#"
limits: {{ {limits} }}
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  chat: {{ addresses: ["{echo}"] }}
applications:
  - name: chat
    domains: ["*"]
    routes: [{{ path: /, proxy: chat }}]
"#
    )
}

async fn open(addr: SocketAddr) -> Ws {
    let (ws, response) = tokio_tungstenite::connect_async(format!("ws://{addr}/socket"))
        .await
        .unwrap();
    assert_eq!(response.status(), 101);
    ws
}

async fn echo(ws: &mut Ws, text: &str) {
    ws.send(Message::text(text)).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("an echo within 5 s")
        .expect("the tunnel is open")
        .unwrap();
    assert_eq!(answer, Message::text(text));
}

/// Waits (at most 5 s) for the tunnel to end: end of stream or an error.
async fn closed(ws: &mut Ws) {
    let end = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("the tunnel is closed within 5 s");
    match end {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => {}
        Some(Ok(other)) => panic!("unexpected message {other:?}"),
    }
}

/// One GET on a new connection: the status line, or `None` if nothing came
/// back within `wait`.
async fn status_within(addr: SocketAddr, wait: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /plain HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = vec![0u8; 256];
    match tokio::time::timeout(wait, stream.read(&mut buffer)).await {
        Ok(Ok(n)) if n > 0 => {
            let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
            text.lines().next().map(str::to_owned)
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_tunnel_stays_and_an_idle_one_is_closed() {
    let upstream = test_support::upstream::websocket_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml("tunnel_idle_timeout: 1s", upstream), dir.path());
    let mut ws = open(running.addr("http")).await;
    // Traffic every 100 ms for 2.5 s: more than twice the idle limit in all.
    for i in 0..25 {
        echo(&mut ws, &format!("message {i}")).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then silence: closed by the proxy.
    closed(&mut ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_keeps_its_place_in_max_connections() {
    let upstream = test_support::upstream::websocket_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml("max_connections: 1", upstream), dir.path());
    let addr = running.addr("http");
    let mut ws = open(addr).await;
    echo(&mut ws, "one").await;

    // The tunnel is the listener's one connection: another waits in the backlog.
    assert_eq!(status_within(addr, Duration::from_millis(400)).await, None);
    echo(&mut ws, "still open").await;

    // Once the tunnel closes, the next connection is served.
    ws.close(None).await.unwrap();
    closed(&mut ws).await;
    drop(ws);
    let mut status = None;
    for _ in 0..50 {
        status = status_within(addr, Duration::from_millis(200)).await;
        if status.is_some() {
            break;
        }
    }
    assert!(
        status.is_some(),
        "a connection is served after the tunnel closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_a_tunnel_then_closes_it() {
    let upstream = test_support::upstream::websocket_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let config = scalwsd::config::load(
        "test.yaml",
        &yaml("drain_timeout: 1s", upstream),
        dir.path(),
    )
    .unwrap();
    let server = Server::bind(&config.listeners, config.limits).unwrap();
    let addr = server.local_addrs()[0].1;
    let running = server.start(config.gateway);
    let mut ws = open(addr).await;
    echo(&mut ws, "before").await;
    let stats = running.stats();
    assert_eq!(
        stats.listeners()[0].open_connections,
        1,
        "the tunnel counts"
    );

    let shutdown = tokio::spawn(running.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Draining: new connections are refused, the tunnel still carries bytes.
    assert!(TcpStream::connect(addr).await.is_err());
    assert!(!shutdown.is_finished(), "the drain waits for the tunnel");
    echo(&mut ws, "during the drain").await;

    // drain_timeout runs out: the tunnel is closed and the shutdown ends.
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("shutdown within drain_timeout and a margin")
        .unwrap();
    closed(&mut ws).await;
}
