//! The `proxy` action: forward a request to an [`UpstreamPool`] and stream the
//! answer back.
//!
//! In order:
//! 1. Note an upgrade request (`Connection: upgrade` + `Upgrade`) and take the
//!    client side of the upgrade.
//! 2. Remove hop-by-hop headers (and those `Connection` names); put back
//!    `Connection: upgrade` / `Upgrade` for an upgrade.
//! 3. Append the client to `X-Forwarded-For`; set `X-Forwarded-Proto` and
//!    `X-Forwarded-Host`. `Host` is kept (taken from `:authority` for HTTP/2
//!    clients, so an HTTP/1.1 upstream gets one). No `Via` is added.
//! 4. Send through the pool (balancing, health, retries, timeouts); failures
//!    answer 502, a `request_timeout` 504, a client body past
//!    `max_request_body` 413.
//! 5. On `101` to an upgrade request, tunnel both connections; a `101` nobody
//!    asked for is a 502. Otherwise remove hop-by-hop headers from the
//!    response and stream its body back, never buffered. An upstream that
//!    fails mid-body aborts the client's response rather than ending it early.
//!    The response carries the [`UpstreamAddress`] that answered in its
//!    extensions.

mod headers;
mod websocket;

use std::future::Future;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use scalws_core::error::{error_response, status_for};
use scalws_core::{Body, BoxError, ClientUpgrade, ConnInfo, Observed, OriginalHost};

#[cfg(feature = "cache")]
use scalws_cache::{Cache, CacheService};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

use super::{ActionFuture, routed_host_value};
use crate::upstream::{Forwarding, UpstreamAddress, UpstreamError, UpstreamPool, UpstreamService};

/// Forwards requests to one pool, through a response cache when one is set
/// (feature `cache`).
#[derive(Clone)]
pub struct Proxy {
    forward: Forward,
    #[cfg(feature = "cache")]
    cache: CacheSlot,
}

/// The response cache in front of a proxy.
#[cfg(feature = "cache")]
#[derive(Clone, Default)]
struct CacheSlot {
    cached: Option<CacheService<Forward>>,
    /// A cache to put in front once the route is known (`with_route_cache`).
    route_cache: Option<Cache>,
    /// The cache and partition `cached` was made from, to make it again
    /// over the forwarding step when upstream layers are added later.
    source: Option<(Cache, String)>,
}

/// The proxy's own steps without the cache: what the cache asks on a miss.
#[derive(Clone)]
struct Forward {
    pool: UpstreamPool,
    /// `None` (the usual case): the pool is called directly.
    upstream: Option<UpstreamService>,
}

impl Service<Request<Body>> for Forward {
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        let (parts, body) = request.into_parts();
        ActionFuture::boxed_in_place(|| self.clone().owned(parts, body))
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut proxy = f.debug_struct("Proxy");
        proxy.field("pool", &self.forward.pool.name());
        #[cfg(feature = "cache")]
        proxy.field("cached", &self.cache.cached.is_some());
        proxy
            .field("upstream_layers", &self.forward.upstream.is_some())
            .finish()
    }
}

impl Proxy {
    /// A proxy to `pool`.
    pub fn new(pool: UpstreamPool) -> Self {
        Self {
            forward: Forward {
                pool,
                upstream: None,
            },
            #[cfg(feature = "cache")]
            cache: CacheSlot::default(),
        }
    }

    #[cfg(feature = "cache")]
    /// Answers GET and HEAD from `cache` where RFC 9111 allows, asking the
    /// pool on a miss. `partition` names the route: routes sharing a cache
    /// share its store and bound but never its entries (a header-matched
    /// canary route must not answer for the route it shadows).
    ///
    /// Misses go through the upstream layers, whichever order the two are set in.
    pub fn with_cache(mut self, cache: &Cache, partition: &str) -> Self {
        self.cache.source = Some((cache.clone(), partition.to_owned()));
        self.rebuild_cache();
        self
    }

    /// Makes the cache service again over the current forwarding step.
    fn rebuild_cache(&mut self) {
        #[cfg(feature = "cache")]
        if let Some((cache, partition)) = &self.cache.source {
            self.cache.cached = Some(
                cache
                    .layer_for(partition.as_str())
                    .layer(self.forward.clone()),
            );
        }
    }

    #[cfg(feature = "cache")]
    /// Answers from `cache` like [`with_cache`](Self::with_cache), with the
    /// route's own partition: the application names it by the route's
    /// name and the route's conditions
    /// ([`RouteSpec::identity`](scalws_router::RouteSpec::identity)) when the
    /// route is added, so routes keep their entries apart and
    /// reordering routes mixes nothing. Outside an application, no cache.
    pub fn with_route_cache(mut self, cache: &Cache) -> Self {
        self.cache.route_cache = Some(cache.clone());
        self
    }

    /// Whether a cache waits for the route's identity (`with_route_cache`).
    #[cfg(feature = "cache")]
    pub(crate) fn wants_route(&self) -> bool {
        self.cache.route_cache.is_some()
    }

    /// Puts the cache asked for by [`with_route_cache`](Self::with_route_cache)
    /// in front, partitioned by `identity`.
    #[cfg(feature = "cache")]
    pub(crate) fn bind_route(&mut self, identity: &str) {
        if let Some(cache) = self.cache.route_cache.take() {
            self.cache.source = Some((cache, identity.to_owned()));
            self.rebuild_cache();
        }
    }

    /// Puts `layer` around the upstream call: it sees each request as the
    /// upstream will (hop-by-hop headers removed, `X-Forwarded-*` set, the
    /// path rewritten, origin-form URI) and the response head as the pool
    /// returned it, before the proxy's own response clean-up. For signing a
    /// request, say, or recording what an upstream answered.
    ///
    /// The inner service is the [`UpstreamPool`] itself; its errors
    /// ([`UpstreamError`]) keep their statuses (502, 504), any other error
    /// of the layer's is answered 502. A response the layer makes itself is
    /// passed on as the upstream's. Layers added later wrap earlier ones.
    /// The response's [`UpstreamAddress`] extension is set by the pool.
    pub fn upstream_layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<UpstreamService>,
        L::Service:
            Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request<Body>>>::Error: Into<BoxError>,
        <L::Service as Service<Request<Body>>>::Future: Send + 'static,
    {
        let inner = match self.forward.upstream.take() {
            Some(layered) => layered,
            None => BoxCloneSyncService::new(self.forward.pool.clone().map_err(BoxError::from)),
        };
        let layered = layer.layer(inner).map_err(Into::into);
        self.forward.upstream = Some(BoxCloneSyncService::new(layered));
        self.rebuild_cache();
        self
    }

    /// The pool requests go to.
    pub fn pool(&self) -> &UpstreamPool {
        &self.forward.pool
    }

    /// Whether a response cache answers first.
    #[cfg(feature = "cache")]
    pub fn is_cached(&self) -> bool {
        self.cache.cached.is_some()
    }

    /// Forwards one request (through the cache, if any) and returns the
    /// upstream's or the cache's response, or an error response.
    pub(crate) fn call_parts(&self, parts: Parts, body: Body) -> ActionFuture {
        #[cfg(feature = "cache")]
        if let Some(cached) = &self.cache.cached {
            return ActionFuture::oneshot(cached.clone(), Request::from_parts(parts, body));
        }
        let forward = self.forward.clone();
        ActionFuture::boxed_in_place(|| forward.owned(parts, body))
    }
}

impl Forward {
    /// Forwards one request (the steps in the module docs) as a future that
    /// owns its `Forward`. Not inlined: its 4 KiB state is then written
    /// through the pointer its caller passes, which
    /// `ActionFuture::boxed_in_place` makes the box. The head and body come
    /// apart and go straight into [`forward`]'s state: each layer of async
    /// function between them would keep the request once more and copy it.
    #[inline(never)]
    fn owned(self, parts: Parts, body: Body) -> impl Future<Output = Response<Body>> + Send {
        forward(self, parts, body)
    }
}

/// Forwards one request to `forward`'s pool, or its embedder's upstream
/// layers (the steps in the module docs).
async fn forward(forward: Forward, mut parts: Parts, body: Body) -> Response<Body> {
    let pool = &forward.pool;
    let layered = forward.upstream.as_ref();
    let conn = parts.extensions.get::<ConnInfo>();
    let peer = conn.map(|c| c.peer_ip_header().clone());
    let scheme = conn.map_or("http", |c| c.scheme().as_str());

    let upgrade = headers::requested_upgrade(&parts.headers);
    // The client's side of a tunnel, its connection (which the tunnel counts
    // as) and, for an HTTP/2 client's WebSocket, the key the edge made up.
    let client_upgrade = match upgrade {
        Some(_) => ClientUpgrade::take(&mut parts.extensions).map(|side| Tunnel {
            client: side,
            conn: parts.extensions.get::<ConnInfo>().cloned(),
            key: websocket::key_to_check(&parts),
        }),
        None => None,
    };

    // The host routed on (HTTP/2's :authority, an absolute-form HTTP/1.1
    // target, whose Host is ignored: RFC 9112 3.2.2, else Host). An
    // HTTP/1.1 upstream needs it in Host, which is set below when the host
    // came from the target, when the request has more than one `Host` line
    // (an embedder's stack without the gateway's check may pass one on: the
    // upstream gets the one routed on), or when `Connection` named `Host`
    // and it went with the hop-by-hop headers. Otherwise it is the one
    // `Host` already there.
    let (host, set_host) = match parts.uri.authority() {
        Some(_) => (routed_host_value(&parts), true),
        None => {
            let mut lines = parts.headers.get_all(header::HOST).iter();
            let first = lines.next().cloned();
            (first, lines.next().is_some())
        }
    };
    let set_host = headers::remove_hop_by_hop(&mut parts.headers, true) || set_host;
    let forwarding = Forwarding {
        peer,
        scheme,
        host: match parts.extensions.get::<OriginalHost>() {
            Some(OriginalHost(original)) => Some(original.clone()),
            None => host.clone(),
        },
    };
    if set_host && let Some(host) = &host {
        parts.headers.insert(header::HOST, host.clone());
    }
    if let Some(protocol) = &upgrade {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        parts.headers.insert(header::UPGRADE, protocol.clone());
    }
    // An HTTP/1.1 client's origin-form target is already the path and query.
    if (parts.uri.scheme().is_some() || parts.uri.authority().is_some())
        && let Some(path) = parts.uri.path_and_query()
    {
        parts.uri = http::Uri::from(path.clone());
    }
    parts.version = Version::HTTP_11;
    let observed = parts.extensions.get::<Observed>().is_some();

    let (mut parts, body) = match layered {
        // The pool puts the forwarding fields where its upstream needs them.
        None => {
            // Pinned where it is made: awaited as a value, the pool's future
            // (some 770 bytes, the client's inside) was copied whole twice
            // more, into the await's own slot.
            let sent = std::pin::pin!(pool.send_forwarded(&mut parts, body, Some(&forwarding)));
            match sent.await {
                Ok((upstream, address)) => {
                    let (mut parts, body) = upstream.into_parts();
                    if observed {
                        parts.extensions.insert(UpstreamAddress(address));
                    }
                    (parts, body)
                }
                Err(error) => return failed(&error, error.status()),
            }
        }
        // The embedder's layers see the request as it will be sent.
        Some(layered) => {
            forwarding.apply(&mut parts.headers);
            let request = Request::from_parts(parts, body);
            match layered.clone().oneshot(request).await {
                Ok(response) => response.into_parts(),
                Err(error) => return failed_layered(&error),
            }
        }
    };
    if parts.status == StatusCode::SWITCHING_PROTOCOLS {
        return switching(parts, client_upgrade);
    }
    headers::remove_hop_by_hop(&mut parts.headers, false);
    Response::from_parts(parts, body)
}

/// An error out of the embedder's upstream layers: the pool's keep their status.
#[cold]
#[inline(never)]
fn failed_layered(error: &BoxError) -> Response<Body> {
    let status = match error.downcast_ref::<UpstreamError>() {
        Some(upstream) => upstream.status(),
        None => StatusCode::BAD_GATEWAY,
    };
    failed(error.as_ref(), status)
}

/// The client's side of an upgrade the proxy may tunnel.
struct Tunnel {
    client: ClientUpgrade,
    conn: Option<ConnInfo>,
    /// The `Sec-WebSocket-Key` sent for an HTTP/2 client (RFC 8441), which
    /// never saw it: the proxy checks the upstream's accept itself.
    key: Option<HeaderValue>,
}

/// `101` from the upstream: tunnel if the client asked for this upgrade.
fn switching(mut parts: http::response::Parts, client: Option<Tunnel>) -> Response<Body> {
    let upstream = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    match (client, upstream) {
        (Some(tunnel), Some(_)) if !websocket::accepted(tunnel.key.as_ref(), &parts.headers) => {
            tracing::warn!(
                "upstream's Sec-WebSocket-Accept does not match the key sent; answered 502"
            );
            error_response(StatusCode::BAD_GATEWAY)
        }
        (Some(tunnel), Some(upstream)) => {
            scalws_core::spawn_tunnel(tunnel.conn.as_ref(), tunnel.client, upstream);
            Response::from_parts(parts, Body::empty())
        }
        _ => {
            tracing::warn!("upstream switched protocols without an upgrade request; answered 502");
            error_response(StatusCode::BAD_GATEWAY)
        }
    }
}

#[cold]
#[inline(never)]
fn failed(error: &(dyn std::error::Error + 'static), status: StatusCode) -> Response<Body> {
    // A client body past max_request_body surfaces as an upstream send error.
    let status = match status_for(error) {
        StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
        _ => status,
    };
    if status.is_client_error() {
        // The client's own fault (its body): not worth a warning per request.
        tracing::debug!(error = %DisplayChain(error), %status, "request failed on the client's side");
    } else {
        tracing::warn!(error = %DisplayChain(error), %status, "proxying failed");
    }
    error_response(status)
}

/// An error and its causes on one line.
struct DisplayChain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}
