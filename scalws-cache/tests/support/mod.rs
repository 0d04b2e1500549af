//! A cache in front of a real upstream that counts what it receives.
//!
//! The inner service is a minimal proxy: one HTTP/1.1 connection per request
//! to the upstream (hyper's client over a `TcpStream`), the response body
//! streamed back as it arrives.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use scalws_cache::{Cache, CacheOptions, CacheService, CacheStats};
use scalws_core::Body;
use test_support::Reply;
use test_support::upstream::{Upstream, UpstreamBody, text};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::{Layer, Service, ServiceExt};

/// The host of the requests [`get`] builds.
pub const HOST: &str = "example.com";

/// A cache over an upstream.
pub struct Harness {
    pub upstream: Upstream,
    pub cache: Cache,
    service: CacheService<Origin>,
}

impl Harness {
    /// A cache with `options` in front of an upstream answering with `handler`.
    pub async fn start<F, Fut>(options: CacheOptions, handler: F) -> Self
    where
        F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response<UpstreamBody>> + Send + 'static,
    {
        let upstream = Upstream::start(handler).await;
        let cache = Cache::new(options);
        let service = cache.layer().layer(Origin {
            addr: upstream.addr,
        });
        Self {
            upstream,
            cache,
            service,
        }
    }

    /// A cache with default options whose upstream answers every request
    /// with `status`, `headers` and `body`.
    pub async fn fixed(
        status: u16,
        headers: &'static [(&'static str, &'static str)],
        body: &'static str,
    ) -> Self {
        Self::start(CacheOptions::default(), move |_req| async move {
            reply(status, headers, body)
        })
        .await
    }

    /// Sends `request` through the cache and reads the whole response.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.respond(request).await;
        test_support::read_whole(response).await
    }

    /// Sends `request` through the cache; the body is left to the caller.
    pub async fn respond(&self, request: Request<Body>) -> Response<Body> {
        let service = self.service.clone();
        tokio::time::timeout(Duration::from_secs(10), service.oneshot(request))
            .await
            .expect("request timed out")
            .unwrap()
    }

    /// GET `path` on [`HOST`].
    pub async fn get(&self, path: &str) -> Reply {
        self.send(get(path).body(Body::empty()).unwrap()).await
    }

    /// Requests the upstream received.
    pub fn upstream_hits(&self) -> usize {
        self.upstream.hits()
    }

    /// The cache's counters, after its pending maintenance.
    pub fn stats(&self) -> CacheStats {
        self.cache.run_pending_tasks();
        self.cache.stats()
    }
}

/// A GET for `path` on [`HOST`].
pub fn get(path: &str) -> http::request::Builder {
    request("GET", HOST, path)
}

/// A request for `http://{host}{path}` in origin form, with a `Host` header,
/// as a server hands it on.
pub fn request(method: &str, host: &str, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, host)
}

/// An upstream response.
pub fn reply(
    status: u16,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Response<UpstreamBody> {
    let mut response = Response::new(text(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        response.headers_mut().append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    response
}

/// A shared counter for upstream handlers.
#[derive(Clone, Default)]
pub struct Count(Arc<AtomicUsize>);

impl Count {
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A request header of an upstream request, as text.
pub fn header<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Number of lines of header `name` in a reply.
pub fn lines(reply: &Reply, name: &str) -> usize {
    reply.headers.get_all(name).iter().count()
}

/// The `Age` of a reply, in seconds.
pub fn age(reply: &Reply) -> u64 {
    reply.header("age").expect("an Age header").parse().unwrap()
}

// === impl Origin ===

/// The inner service: forwards each request to the upstream on a new connection.
#[derive(Clone)]
pub struct Origin {
    addr: SocketAddr,
}

impl Service<Request<Body>> for Origin {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let addr = self.addr;
        Box::pin(async move {
            Ok(forward(addr, request)
                .await
                .unwrap_or_else(|_| scalws_core::error::error_response(StatusCode::BAD_GATEWAY)))
        })
    }
}

async fn forward(
    addr: SocketAddr,
    mut request: Request<Body>,
) -> Result<Response<Body>, hyper::Error> {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(Io(stream)).await?;
    tokio::spawn(connection);
    if let (false, Some(authority)) = (
        request.headers().contains_key(http::header::HOST),
        request.uri().authority(),
    ) {
        let host = HeaderValue::from_str(authority.as_str()).unwrap();
        request.headers_mut().insert(http::header::HOST, host);
    }
    let origin_form = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap();
    *request.uri_mut() = origin_form;
    let response = sender.send_request(request).await?;
    Ok(response.map(Body::new))
}

/// A tokio stream as hyper IO (hyper-util's `TokioIo`, which this crate does
/// not depend on, without its unsafe fast path).
struct Io(TcpStream);

impl hyper::rt::Read for Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; 16 * 1024];
        let n = scratch.len().min(buf.remaining());
        let mut read = ReadBuf::new(&mut scratch[..n]);
        std::task::ready!(Pin::new(&mut self.0).poll_read(cx, &mut read))?;
        buf.put_slice(read.filled());
        Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
