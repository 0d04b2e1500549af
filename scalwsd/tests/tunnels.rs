//! WebSocket tunnels through the proxy are connections like the others: they
//! hold their place in `max_connections`, close when idle past
//! `tunnel_idle_timeout`, and a drain waits for them until `drain_timeout`.
//! From HTTP/2 (RFC 8441) and HTTP/3 (RFC 9220) clients, by extended
//! CONNECT, each is a stream, with the same idle limit and drain.
//! Real sockets on 127.0.0.1, a real WebSocket echo upstream.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use scalws_core::Server;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
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

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>, text: &str) {
    ws.send(Message::text(text)).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("an echo within 5 s")
        .expect("the tunnel is open")
        .unwrap();
    assert_eq!(answer, Message::text(text));
}

/// Waits (at most 10 s) for the tunnel to end: end of stream or an error.
async fn closed<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) {
    let end = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("the tunnel is closed within 10 s");
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

/// A started server (one can be shut down) with `drain_timeout: 1s` in
/// front of a WebSocket echo upstream.
async fn draining_server() -> (SocketAddr, scalws_core::Running<scalws_proxy::Gateway>) {
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
    (addr, server.start(config.gateway))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_a_tunnel_then_closes_it() {
    let (addr, running) = draining_server().await;
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

// === WebSocket from HTTP/2 clients (RFC 8441) ===

type H2Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;
type H2Sender = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

/// An HTTP/2 connection (prior knowledge) to `addr`.
async fn h2(addr: SocketAddr) -> H2Sender {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    sender
}

/// An extended CONNECT for `protocol` on `sender`. The client may send one
/// only once the server's SETTINGS (with ENABLE_CONNECT_PROTOCOL) arrived:
/// retried until then, for at most 2 s.
async fn extended_connect(sender: &mut H2Sender, protocol: &'static str) -> Response<Incoming> {
    for _ in 0..40 {
        let request = Request::connect("http://chat.test/socket")
            .version(http::Version::HTTP_2)
            .header("sec-websocket-version", "13")
            .extension(hyper::ext::Protocol::from_static(protocol))
            .body(Empty::new())
            .unwrap();
        match sender.send_request(request).await {
            Ok(response) => return response,
            Err(error) => {
                assert!(error.is_user(), "{error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    panic!("the server never enabled extended CONNECT");
}

/// A WebSocket over a new HTTP/2 stream of `sender`.
async fn open_h2(sender: &mut H2Sender) -> H2Ws {
    let response = extended_connect(sender, "websocket").await;
    assert_eq!(response.status(), 200, "RFC 8441 5: 200, not 101");
    assert!(!response.headers().contains_key("sec-websocket-accept"));
    let upgraded = hyper::upgrade::on(response).await.unwrap();
    WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, None).await
}

/// Two WebSockets on one HTTP/2 connection, each its own stream, tunnelled
/// to an HTTP/1.1 WebSocket server as ordinary upgrades. A quiet tunnel
/// keeps its connection busy past keepalive_timeout and header_read_timeout
/// (the connection is not idle while a stream tunnels), and is closed at
/// tunnel_idle_timeout like an HTTP/1.1 one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_over_http2_streams() {
    let upstream = test_support::upstream::websocket_echo().await;
    let dir = tempfile::tempdir().unwrap();
    let limits = "keepalive_timeout: 1s, header_read_timeout: 1s, tunnel_idle_timeout: 4s";
    let running = support::start(&yaml(limits, upstream), dir.path());
    let mut sender = h2(running.addr("http")).await;
    let mut one = open_h2(&mut sender).await;
    let mut two = open_h2(&mut sender).await;
    two_on_one_connection(&mut one, &mut two).await;
}

/// Two WebSockets on one connection, with `keepalive_timeout: 1s,
/// header_read_timeout: 1s, tunnel_idle_timeout: 4s`: both carry messages,
/// through a quiet spell longer than the connection's timeouts; the second
/// is closed by its client and the first goes on, a large message included;
/// then the first, silent, is closed at tunnel_idle_timeout and no sooner.
async fn two_on_one_connection<S: AsyncRead + AsyncWrite + Unpin>(
    one: &mut WebSocketStream<S>,
    two: &mut WebSocketStream<S>,
) {
    echo(one, "one").await;
    echo(two, "two").await;
    // Longer than keepalive_timeout + header_read_timeout, less than the tunnel's limit.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    echo(one, "after a quiet while").await;
    two.close(None).await.unwrap();
    closed(two).await;
    echo(one, "the other closed").await;
    // A large message crosses in many frames each way.
    echo(one, &"x".repeat(200 * 1024)).await;
    // Then silence: closed by the proxy at tunnel_idle_timeout.
    let quiet = std::time::Instant::now();
    closed(one).await;
    assert!(
        quiet.elapsed() >= Duration::from_millis(3500),
        "closed {:?} into a 4 s tunnel_idle_timeout",
        quiet.elapsed()
    );
}

/// A drain waits for an HTTP/2 stream's tunnel, then closes it at
/// `drain_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_an_http2_tunnel_then_closes_it() {
    let (addr, running) = draining_server().await;
    let mut sender = h2(addr).await;
    drain_closes(open_h2(&mut sender).await, running).await;
}

/// Shuts `running` down (with `drain_timeout: 1s`) while `ws` is open: the
/// drain waits for the tunnel, which still carries bytes, then closes it.
async fn drain_closes<S: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<S>,
    running: scalws_core::Running<scalws_proxy::Gateway>,
) {
    echo(&mut ws, "before").await;
    let shutdown = tokio::spawn(running.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!shutdown.is_finished(), "the drain waits for the tunnel");
    echo(&mut ws, "during the drain").await;
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("shutdown within drain_timeout and a margin")
        .unwrap();
    closed(&mut ws).await;
}

/// An upstream that answers every request `101` with the accept of another
/// key than ours (RFC 6455's example), and counts the requests.
async fn wrong_accept_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let heads = Arc::new(AtomicUsize::new(0));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRrK+xOo=\r\n\r\n")
                    .await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            });
        }
    });
    (upstream, heads)
}

/// An upstream that answers `101` with the wrong `Sec-WebSocket-Accept` is
/// not a WebSocket server that read our key: 502, no tunnel. A `:protocol`
/// other than `websocket` is 501, and never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_websocket_needs_the_upstreams_accept() {
    let (upstream, heads) = wrong_accept_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml("", upstream), dir.path());
    let mut sender = h2(running.addr("http")).await;
    let response = extended_connect(&mut sender, "websocket").await;
    assert_eq!(response.status(), 502);
    assert_eq!(heads.load(Ordering::Relaxed), 1);
    let response = extended_connect(&mut sender, "webtransport").await;
    assert_eq!(response.status(), 501);
    assert_eq!(heads.load(Ordering::Relaxed), 1, "forwarded");
}

// === WebSocket from HTTP/3 clients (RFC 9220) ===

/// Panics anywhere in this test binary since the first call, the server's
/// tasks included (a panicking request task is caught and its stream reset,
/// which a test would not otherwise notice). No test here panics on purpose.
fn panics() -> usize {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            COUNT.fetch_add(1, Ordering::Relaxed);
            previous(info);
        }));
    });
    COUNT.load(Ordering::Relaxed)
}

type H3Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
type H3Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;
type H3Ws = WebSocketStream<tokio::io::DuplexStream>;

/// What a client needs to reach an HTTP/3 listener: the CA to trust.
struct H3Client {
    ca: test_support::tls::TestCa,
    _dir: tempfile::TempDir,
}

/// Starts an HTTP/3 listener with a certificate for chat.test, proxying to
/// `echo`.
fn h3_site(
    limits: &str,
    echo: SocketAddr,
) -> (
    SocketAddr,
    scalws_core::Running<scalws_proxy::Gateway>,
    H3Client,
) {
    let dir = tempfile::tempdir().unwrap();
    let ca = test_support::tls::TestCa::new();
    ca.issue(dir.path(), "chat", &["chat.test"], false);
    let yaml = format!(
        r#"
limits: {{ {limits} }}
listeners:
  - name: quic
    address: "127.0.0.1:0"
    protocol: http3
    tls: {{ certificates: [ {{ cert: chat.pem, key: chat.key }} ] }}
upstreams:
  chat: {{ addresses: ["{echo}"] }}
applications:
  - name: chat
    domains: ["*"]
    routes: [{{ path: /, proxy: chat }}]
"#
    );
    let config = scalwsd::config::load("test.yaml", &yaml, dir.path()).unwrap();
    let server = Server::bind(&config.listeners, config.limits).unwrap();
    let addr = server.local_addrs()[0].1;
    let running = server.start(config.gateway);
    (addr, running, H3Client { ca, _dir: dir })
}

impl H3Client {
    /// A new HTTP/3 connection to `addr`.
    async fn connect(&self, addr: SocketAddr) -> H3Sender {
        let quic = test_support::tls::quic_connection(&self.ca, addr, "chat.test").await;
        let (mut driver, sender) = h3::client::builder()
            .enable_extended_connect(true)
            .build::<_, _, Bytes>(h3_quinn::Connection::new(quic))
            .await
            .unwrap();
        tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        sender
    }
}

/// An extended CONNECT for `protocol` on a new stream of `sender`: the
/// response head and the stream.
async fn h3_connect(
    sender: &mut H3Sender,
    protocol: h3::ext::Protocol,
    headers: &[(&str, &str)],
) -> (Response<()>, H3Stream) {
    let mut request = Request::connect("https://chat.test/socket")
        .header("sec-websocket-version", "13")
        .extension(protocol);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut stream = sender
        .send_request(request.body(()).unwrap())
        .await
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), stream.recv_response())
        .await
        .expect("a response head within 5 s")
        .unwrap();
    (response, stream)
}

/// How an HTTP/3 stream ended for the client: `Ok` at its end (FIN), the
/// reset code if it was reset, `Err(None)` for another error.
type H3End = tokio::sync::oneshot::Receiver<Result<(), Option<h3::error::Code>>>;

/// A WebSocket client on a new stream of `sender`: tungstenite on one end
/// of a pipe, the stream's DATA frames pumped to and from the other; and
/// how the stream ended.
async fn open_h3(sender: &mut H3Sender) -> (H3Ws, H3End) {
    let (response, stream) = h3_connect(sender, h3::ext::Protocol::WEBSOCKET, &[]).await;
    assert_eq!(response.status(), 200, "RFC 9220: 200, not 101");
    assert!(!response.headers().contains_key("sec-websocket-accept"));
    assert!(!response.headers().contains_key("upgrade"));
    let (mine, theirs) = tokio::io::duplex(64 * 1024);
    let (mut from_ws, mut to_ws) = tokio::io::split(theirs);
    let (mut send, mut recv) = stream.split();
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match from_ws.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if send
                        .send_data(Bytes::copy_from_slice(&buffer[..n]))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        let _ = send.finish().await;
    });
    let (ended, end) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        use bytes::Buf;
        let how = loop {
            match recv.recv_data().await {
                Ok(Some(mut data)) => {
                    while data.has_remaining() {
                        if to_ws.write_all(data.chunk()).await.is_err() {
                            return;
                        }
                        let n = data.chunk().len();
                        data.advance(n);
                    }
                }
                Ok(None) => break Ok(()),
                Err(h3::error::StreamError::RemoteTerminate { code, .. }) => break Err(Some(code)),
                Err(_) => break Err(None),
            }
        };
        // The stream ended or was reset: the WebSocket sees its end.
        let _ = to_ws.shutdown().await;
        let _ = ended.send(how);
    });
    let ws = WebSocketStream::from_raw_socket(mine, Role::Client, None).await;
    (ws, end)
}

/// Two WebSockets on one HTTP/3 connection, each its own stream, tunnelled
/// to an HTTP/1.1 WebSocket server as ordinary upgrades; a quiet tunnel
/// keeps its connection open past keepalive_timeout and
/// header_read_timeout, and is closed at tunnel_idle_timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_over_http3_streams() {
    let upstream = test_support::upstream::websocket_echo().await;
    let limits = "keepalive_timeout: 1s, header_read_timeout: 1s, tunnel_idle_timeout: 4s";
    let (addr, _running, site) = h3_site(limits, upstream);
    let mut sender = site.connect(addr).await;
    panics();
    let (mut one, one_end) = open_h3(&mut sender).await;
    let (mut two, two_end) = open_h3(&mut sender).await;
    two_on_one_connection(&mut one, &mut two).await;
    let how = tokio::time::timeout(Duration::from_secs(5), two_end).await;
    assert_eq!(
        how.unwrap().unwrap(),
        Ok(()),
        "the upstream's close ends the stream as whole"
    );
    // The idle one was cancelled (RFC 9220 3), not ended as if whole.
    assert_eq!(
        one_end.await.unwrap(),
        Err(Some(h3::error::Code::H3_REQUEST_CANCELLED))
    );
    assert_eq!(panics(), 0, "a task panicked");
}

/// A drain waits for an HTTP/3 stream's tunnel, then closes it at
/// `drain_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_an_http3_tunnel_then_closes_it() {
    let upstream = test_support::upstream::websocket_echo().await;
    let (addr, running, site) = h3_site("drain_timeout: 1s", upstream);
    let mut sender = site.connect(addr).await;
    drain_closes(open_h3(&mut sender).await.0, running).await;
}

/// From an HTTP/3 client as from an HTTP/2 one: a `101` with the wrong
/// `Sec-WebSocket-Accept` is 502 and no tunnel; a `:protocol` other than
/// `websocket` is 501, never forwarded; and connection-specific fields
/// (an HTTP/1.1 upgrade spelled by the client itself) make the request
/// malformed: 400, never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http3_websocket_needs_the_upstreams_accept() {
    let (upstream, heads) = wrong_accept_upstream().await;
    let (addr, _running, site) = h3_site("", upstream);
    let mut sender = site.connect(addr).await;
    let (response, _stream) = h3_connect(&mut sender, h3::ext::Protocol::WEBSOCKET, &[]).await;
    assert_eq!(response.status(), 502);
    let count = || heads.load(Ordering::Relaxed);
    assert_eq!(count(), 1);
    let (response, _stream) = h3_connect(&mut sender, h3::ext::Protocol::CONNECT_UDP, &[]).await;
    assert_eq!(response.status(), 501);
    assert_eq!(count(), 1, "forwarded");

    let mut get = async |field: (&str, &str)| {
        let request = Request::get("https://chat.test/socket")
            .header(field.0, field.1)
            .body(())
            .unwrap();
        let mut stream = sender.send_request(request).await.unwrap();
        stream.finish().await.unwrap();
        stream.recv_response().await.unwrap().status()
    };
    for field in [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("transfer-encoding", "chunked"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("te", "gzip"),
        ("te", "trailers, deflate"),
    ] {
        assert_eq!(get(field).await, 400, "{field:?}");
    }
    assert_eq!(count(), 1, "a malformed request was forwarded");
    // `te: trailers` is allowed, in any case: forwarded (and this upstream's
    // unasked 101 is a 502).
    for value in ["trailers", "Trailers"] {
        assert_eq!(get(("te", value)).await, 502, "te: {value}");
    }
    assert_eq!(count(), 3);
}
