//! Helpers for ScalWS's tests: HTTP/1.1 and h2c clients, raw sockets, all on loopback.
//!
//! Not published; every crate's tests share it so each test reads as what a
//! user would do and see.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used)]

pub mod apiserver;
pub mod tls;
pub mod upstream;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub version: http::Version,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or("<binary>")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Which protocol a [`TestClient`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Http1,
    /// HTTP/2 over cleartext, by prior knowledge.
    H2c,
}

/// A client that sends each request on a new connection to a given address,
/// whatever host the request names: HTTP/1.1 requests go in origin form with
/// their `Host` header, HTTP/2 requests carry the host as `:authority`.
#[derive(Clone, Copy, Debug)]
pub struct TestClient {
    proto: Proto,
}

impl TestClient {
    pub fn new(proto: Proto) -> Self {
        Self { proto }
    }

    pub async fn send(&self, addr: SocketAddr, request: Request<Full<Bytes>>) -> Reply {
        tokio::time::timeout(Duration::from_secs(10), self.exchange(addr, request))
            .await
            .expect("request timed out")
    }

    async fn exchange(&self, addr: SocketAddr, request: Request<Full<Bytes>>) -> Reply {
        Connection::open(addr, self.proto).await.send(request).await
    }

    /// GET `path` with host `host`, sent to `addr`.
    pub async fn get(&self, addr: SocketAddr, host: &str, path: &str) -> Reply {
        self.send(
            addr,
            request("GET", host, path).body(Full::default()).unwrap(),
        )
        .await
    }
}

/// One client connection, for several requests in turn (a [`TestClient`]
/// opens one per request): what a test needs to see that a connection went
/// on after an answer.
pub struct Connection {
    sender: Sender,
}

enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2c(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Connection {
    /// Connects to `addr` speaking `proto`.
    pub async fn open(addr: SocketAddr, proto: Proto) -> Self {
        let stream = TokioIo::new(TcpStream::connect(addr).await.expect("connect failed"));
        let sender = match proto {
            Proto::Http1 => {
                let (sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
                tokio::spawn(conn);
                Sender::Http1(sender)
            }
            Proto::H2c => {
                let (sender, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), stream)
                        .await
                        .unwrap();
                tokio::spawn(conn);
                Sender::H2c(sender)
            }
        };
        Self { sender }
    }

    /// Sends `request` once the connection can take it (panics if the
    /// connection has ended) and reads the answer whole. HTTP/1.1 requests
    /// go in origin form with their `Host`; HTTP/2 ones carry the host as
    /// `:authority`.
    pub async fn send(&mut self, mut request: Request<Full<Bytes>>) -> Reply {
        let response = match &mut self.sender {
            Sender::Http1(sender) => {
                let origin = request
                    .uri()
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .parse()
                    .unwrap();
                *request.uri_mut() = origin;
                sender.ready().await.expect("the connection has ended");
                sender.send_request(request).await
            }
            Sender::H2c(sender) => {
                request.headers_mut().remove(http::header::HOST);
                *request.version_mut() = http::Version::HTTP_2;
                sender.ready().await.expect("the connection has ended");
                sender.send_request(request).await
            }
        };
        read_whole(response.expect("request failed")).await
    }
}

/// A request for `http://{host}{path}` with a matching `Host` header.
pub fn request(method: &str, host: &str, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(format!("http://{host}{path}"))
        .header(http::header::HOST, host)
}

pub async fn read_whole<B>(response: Response<B>) -> Reply
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("body failed").to_bytes();
    Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        version: parts.version,
        body,
    }
}

/// Writes `bytes` on a fresh connection and reads until the server closes it
/// (or `wait` passes). Returns what was read, lossily as text.
pub async fn raw_exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    read_until_close(&mut stream, wait).await
}

/// Reads until EOF, an error (reset), or `wait`.
pub async fn read_until_close(stream: &mut TcpStream, wait: Duration) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&out).into_owned()
}

/// One response off a raw HTTP/1.1 stream (plain or TLS): its head, then a
/// body of the Content-Length the head gives. Panics if either takes more
/// than 5 s or the stream closes first.
pub async fn read_response<R: tokio::io::AsyncRead + Unpin>(stream: &mut R) -> (String, Vec<u8>) {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("no response head within 5 s")
            .unwrap();
        assert_eq!(
            n,
            1,
            "closed mid-head after {:?}",
            String::from_utf8_lossy(&bytes)
        );
        bytes.push(byte[0]);
    }
    let head = String::from_utf8(bytes).unwrap();
    let length: usize = head
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .expect("a Content-Length")
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut body))
        .await
        .expect("no whole body within 5 s")
        .unwrap();
    (head, body)
}

/// True when the peer closed `stream` within `wait` (EOF or reset).
pub async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// One HTTP/2 (h2c) connection to `addr`, for tests that need several streams on it.
pub async fn h2_connection(
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let stream = TokioIo::new(TcpStream::connect(addr).await.expect("connect failed"));
    let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), stream)
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// Spawns `tasks` blocking tasks on `runtime`, each holding its thread for
/// 100 ms, waits for them all, and returns how many ran at once at most: the
/// runtime's blocking-thread limit when `tasks` is above it. Call it from
/// outside the runtime.
pub fn most_blocking_at_once(runtime: &tokio::runtime::Handle, tasks: usize) -> usize {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let spawned: Vec<_> = (0..tasks)
        .map(|_| {
            let (running, most) = (running.clone(), most.clone());
            runtime.spawn_blocking(move || {
                most.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                std::thread::sleep(Duration::from_millis(100));
                running.fetch_sub(1, SeqCst);
            })
        })
        .collect();
    runtime.block_on(async {
        for task in spawned {
            task.await.expect("a blocking task panicked");
        }
    });
    most.load(SeqCst)
}
