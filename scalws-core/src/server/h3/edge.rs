//! One HTTP/3 request stream: head, limits, `ConnInfo`, the service call. The
//! same rules as the TCP edge: a failure or a panic becomes a response. A
//! WebSocket (RFC 9220) is tunnelled on its stream (see `tunnel`).

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderName, Method, Request, Response, StatusCode, header};
use http_body_util::Either;
use hyper::upgrade::Upgraded;
use tokio::sync::oneshot;
use tower::{Service, ServiceExt};

use super::body::{RecvHalf, RequestBody};
use super::response::ResponseStream;
use crate::error::{BoxError, error_response};
use crate::server::bodiless::forbid_body;
use crate::server::edge::{declared_length, failed, panicked};
use crate::server::limits::Limits;
use crate::server::tunnel::{ClientUpgrade, UpstreamSlot};
use crate::server::websocket;
use crate::{Body, ConnInfo};

/// What h3 hands over for each request stream.
pub(super) type Resolver = ::h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

/// Everything one connection's requests share.
pub(super) struct Edge {
    pub(super) conn: ConnInfo,
    pub(super) limits: Arc<Limits>,
}

impl Edge {
    /// Reads the request head, answers it, and streams the response back.
    /// Every error ends this stream only.
    pub(super) async fn serve<S, B>(self: Arc<Self>, service: S, resolver: Resolver)
    where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let head =
            tokio::time::timeout(self.limits.header_read_timeout, resolver.resolve_request()).await;
        let (request, stream) = match head {
            Ok(Ok(resolved)) => resolved,
            Ok(Err(error)) => {
                // h3 has already answered 431 or reset the stream, as fits.
                tracing::debug!(%error, "HTTP/3 request head refused");
                return;
            }
            Err(_elapsed) => {
                tracing::debug!("HTTP/3 request head not received in time");
                return;
            }
        };
        let (send, recv) = stream.split();
        let mut response_stream = ResponseStream::new(send);
        if malformed(&request) {
            let response = reject::<B>(StatusCode::BAD_REQUEST);
            if let Err(error) = response_stream.send(response, true).await {
                tracing::debug!(%error, "HTTP/3 response not sent whole");
            }
            return;
        }
        if request.method() == Method::CONNECT {
            return self.connect(service, request, recv, response_stream).await;
        }
        let is_head = request.method() == Method::HEAD;
        let mut response = self.respond(service, request, Some(recv)).await;
        let with_body = forbid_body(&mut response, is_head);
        if let Err(error) = response_stream.send(response, with_body).await {
            tracing::debug!(%error, "HTTP/3 response not sent whole");
        }
    }

    /// A CONNECT. An extended CONNECT for `websocket` (RFC 9220) goes on as
    /// an HTTP/1.1 upgrade request, like HTTP/2's (see `websocket`), and a
    /// `101` that brings the upstream's side opens a tunnel on this stream;
    /// another `:protocol` is 501 (one h3 can parse: it refuses the others
    /// as malformed itself); one without `:scheme` or `:path` is 400
    /// (RFC 8441 4); a plain CONNECT is left to the routes.
    async fn connect<S, B>(
        &self,
        service: S,
        request: Request<()>,
        recv: RecvHalf,
        mut stream: ResponseStream,
    ) where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let (mut parts, ()) = request.into_parts();
        let extended = parts.extensions.get::<::h3::ext::Protocol>().is_some();
        let mut response =
            if extended && (parts.uri.scheme().is_none() || parts.uri.path_and_query().is_none()) {
                reject(StatusCode::BAD_REQUEST)
            } else if !websocket::from_h3_extended_connect(&mut parts) {
                reject(StatusCode::NOT_IMPLEMENTED)
            } else if parts.method == Method::CONNECT {
                let request = Request::from_parts(parts, ());
                websocket::to_extended_connect(self.respond(service, request, Some(recv)).await)
            } else {
                match self.websocket(service, parts).await {
                    Ok((head, upgraded)) => {
                        let idle = self.limits.tunnel_idle_timeout;
                        if let Err(error) = stream.tunnel(head, recv, upgraded, idle).await {
                            tracing::debug!(%error, "HTTP/3 WebSocket tunnel ended with an error");
                        }
                        return;
                    }
                    Err(response) => response,
                }
            };
        let with_body = forbid_body(&mut response, false);
        if let Err(error) = stream.send(response, with_body).await {
            tracing::debug!(%error, "HTTP/3 response not sent whole");
        }
    }

    /// Calls the service with a WebSocket request (the rewritten extended
    /// CONNECT) and, when it answers `101` having handed the upstream's side
    /// to `spawn_tunnel`, waits for that upgrade: the tunnel's `200` head and
    /// the upgraded connection. Otherwise the response to send instead.
    async fn websocket<S, B>(
        &self,
        service: S,
        mut parts: http::request::Parts,
    ) -> Result<(Response<()>, Upgraded), Response<Either<B, Body>>>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
        B: http_body::Body,
    {
        let (sender, mut receiver) = oneshot::channel();
        let slot = UpstreamSlot::new(Mutex::new(Some(sender)));
        parts.extensions.insert(ClientUpgrade::stream(slot));
        // The stream's bytes are the tunnel's, not a body to forward.
        let request = Request::from_parts(parts, ());
        let response = self.respond(service, request, None).await;
        let upstream = receiver.try_recv().ok();
        drop(receiver);
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            return Err(websocket::to_extended_connect(response));
        }
        let Some(upstream) = upstream else {
            // A switch with nothing to tunnel to (an embedder's 101).
            tracing::warn!("101 to an HTTP/3 WebSocket without a tunnel; answered 502");
            return Err(reject(StatusCode::BAD_GATEWAY));
        };
        // The client hears 200 only once the upstream's side is there.
        match tokio::time::timeout(self.limits.tunnel_idle_timeout, upstream).await {
            Ok(Ok(upgraded)) => Ok((websocket::to_extended_connect(response).map(drop), upgraded)),
            Ok(Err(error)) => {
                tracing::debug!(%error, "upstream's upgrade failed; answered 502");
                Err(reject(StatusCode::BAD_GATEWAY))
            }
            Err(_elapsed) => {
                tracing::debug!("upstream's upgrade did not come; answered 502");
                Err(reject(StatusCode::BAD_GATEWAY))
            }
        }
    }

    /// Calls the service; `recv` is the request body (none for a tunnel).
    async fn respond<S, B>(
        &self,
        service: S,
        request: Request<()>,
        recv: Option<RecvHalf>,
    ) -> Response<Either<B, Body>>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send,
        B: http_body::Body,
    {
        if request.headers().len() > self.limits.max_headers {
            return reject(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        }
        let declared = declared_length(&request);
        if declared.is_some_and(|len| len > self.limits.max_request_body) {
            // Dropping `recv` tells the client to stop sending.
            return reject(StatusCode::PAYLOAD_TOO_LARGE);
        }
        let (mut parts, ()) = request.into_parts();
        parts.extensions.insert(self.conn.clone());
        let body = match recv {
            Some(recv) => Body::new(RequestBody::new(
                recv,
                self.limits.max_request_body,
                declared,
            )),
            None => Body::empty(),
        };
        let request = Request::from_parts(parts, body);

        let call = service.oneshot(request);
        match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(response)) => response.map(Either::Left),
            Ok(Err(error)) => failed(error.into()),
            Err(_panic) => panicked(),
        }
    }
}

/// What h3 lets through and an HTTP/3 request must not carry: a
/// connection-specific field (RFC 9114 4.2; `te` only as `trailers`), or a
/// `:protocol` on a method other than CONNECT (RFC 8441 4). An HTTP/1.1
/// upstream must not be handed a field it would act on, such as an
/// `Upgrade` the client never asked the edge for.
fn malformed(request: &Request<()>) -> bool {
    const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
    const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
    let headers = request.headers();
    [
        header::CONNECTION,
        header::UPGRADE,
        header::TRANSFER_ENCODING,
        KEEP_ALIVE,
        PROXY_CONNECTION,
    ]
    .iter()
    .any(|name| headers.contains_key(name))
        || headers
            .get_all(header::TE)
            .iter()
            .any(|value| !value.as_bytes().eq_ignore_ascii_case(b"trailers"))
        || (request.method() != Method::CONNECT
            && request.extensions().get::<::h3::ext::Protocol>().is_some())
}

#[cold]
#[inline(never)]
fn reject<B>(status: StatusCode) -> Response<Either<B, Body>> {
    error_response(status).map(Either::Right)
}
