//! Real upstream servers for proxy tests: HTTP/1.1 and h2c on 127.0.0.1,
//! counting requests and connections, stoppable and restartable on one port.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// The body an upstream handler answers with.
pub type UpstreamBody = BoxBody<Bytes, std::io::Error>;

/// A whole-text body.
pub fn text(body: impl Into<Bytes>) -> UpstreamBody {
    Full::new(body.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A 200 response with a text body.
pub fn ok(body: impl Into<Bytes>) -> Response<UpstreamBody> {
    Response::new(text(body))
}

/// A running upstream. Stops (closing every connection) when dropped or on [`Upstream::stop`].
pub struct Upstream {
    pub addr: SocketAddr,
    /// Requests received.
    pub hits: Arc<AtomicUsize>,
    /// Connections accepted.
    pub connections: Arc<AtomicUsize>,
    tasks: Option<JoinSet<()>>,
}

impl Upstream {
    /// Starts on a free port with `handler`.
    pub async fn start<F, Fut>(handler: F) -> Self
    where
        F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response<UpstreamBody>> + Send + 'static,
    {
        Self::start_on("127.0.0.1:0".parse().unwrap(), handler).await
    }

    /// Answers every request with `name` as the body.
    pub async fn named(name: &'static str) -> Self {
        Self::start(move |_req| async move { ok(name) }).await
    }

    /// Starts on `addr` (a fixed port, to bring a stopped upstream back).
    pub async fn start_on<F, Fut>(addr: SocketAddr, handler: F) -> Self
    where
        F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response<UpstreamBody>> + Send + 'static,
    {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(addr).unwrap();
        let listener: TcpListener = socket.listen(1024).unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        let (h, c) = (hits.clone(), connections.clone());
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                c.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                let hits = h.clone();
                conns.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        hits.fetch_add(1, Ordering::SeqCst);
                        let fut = handler(req);
                        async move { Ok::<_, Infallible>(fut.await) }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            hits,
            connections,
            tasks: Some(tasks),
        }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stops accepting and closes every open connection.
    pub async fn stop(&mut self) {
        if let Some(mut tasks) = self.tasks.take() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(tasks) = &mut self.tasks {
            tasks.abort_all();
        }
    }
}

/// A port on 127.0.0.1 where nothing listens (connections are refused).
pub fn refused_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// An upstream that answers with the request line and headers it received,
/// one per line, adding `response_headers` to its response.
pub async fn echo(response_headers: &'static [(&'static str, &'static str)]) -> Upstream {
    Upstream::start(move |req| async move {
        let mut text = format!("{} {}\n", req.method(), req.uri());
        for (name, value) in req.headers() {
            text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
        }
        let mut response = ok(text);
        for (name, value) in response_headers {
            response.headers_mut().insert(*name, value.parse().unwrap());
        }
        response
    })
    .await
}

/// A WebSocket echo upstream on a raw socket: every message comes back.
pub async fn websocket_echo() -> SocketAddr {
    use futures_util::{SinkExt, StreamExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_close() || ws.send(message).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}
