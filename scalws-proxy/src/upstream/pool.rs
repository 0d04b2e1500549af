//! [`UpstreamPool`]: choose an address, send, retry, and keep score.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, StatusCode, Uri, Version, header};
use scalws_core::Body;
use tokio::task::AbortHandle;

use super::Forwarding;
use super::balance::Balancer;
use super::client::{self, DeadlinePassed};
use super::connector::Connector;
use super::endpoint::{Endpoint, EndpointStats, InFlight, PassivePolicy};
use super::error::{InvalidUpstream, UpstreamError};
use super::health::Checker;
use super::options::{Protocol, UpstreamOptions};
use super::retry::{self, Failure};
use super::sent;
use super::tls::TlsSetup;

/// A named set of upstream addresses, each with its pooled connections:
/// balancing, health, retries and timeouts. Cloning is one reference count.
///
/// See the [module documentation](super) for how an address is chosen and
/// when a request is retried.
#[derive(Clone)]
pub struct UpstreamPool {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    endpoints: Arc<[Endpoint]>,
    balancer: Balancer,
    scheme: Scheme,
    /// `http1`: origin-form URIs and a Host header, on our own client.
    /// Otherwise HTTP/2 (and maybe, by ALPN, https) sends the URI's
    /// authority as `:authority`: there it is the request's Host rather
    /// than the address.
    http1: bool,
    version: Version,
    request_timeout: std::time::Duration,
    retries: u32,
    passive: Option<PassivePolicy>,
    checker: Option<AbortHandle>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(checker) = &self.checker {
            checker.abort();
        }
    }
}

// === impl UpstreamPool ===

impl UpstreamPool {
    /// Validates `options` (at least one address, not every weight 0, no
    /// address twice, TLS names and CA file usable, health-check path valid)
    /// and builds a pooled client per address.
    ///
    /// With `health_check` set it must be called inside a tokio runtime: it
    /// starts the checker task, which stops when the last clone of the pool is
    /// dropped.
    pub fn new(
        name: impl Into<Arc<str>>,
        options: UpstreamOptions,
    ) -> Result<Self, InvalidUpstream> {
        Self::build(name.into(), options, None)
    }

    /// A pool for `options` that takes over, for each address it shares with
    /// `previous`, that address's pooled connections: an address list that
    /// changed (a Kubernetes EndpointSlice update) keeps the connections to
    /// the addresses that remain. Every option but `addresses` must be the
    /// same as `previous`'s; health state and counters start afresh.
    pub fn new_after(
        name: impl Into<Arc<str>>,
        options: UpstreamOptions,
        previous: &UpstreamPool,
    ) -> Result<Self, InvalidUpstream> {
        Self::build(name.into(), options, Some(previous))
    }

    fn build(
        name: Arc<str>,
        options: UpstreamOptions,
        previous: Option<&UpstreamPool>,
    ) -> Result<Self, InvalidUpstream> {
        let invalid = |reason: String| InvalidUpstream {
            name: name.to_string(),
            reason,
        };
        validate(&options).map_err(invalid)?;
        let tls = match options.protocol {
            Protocol::Https => Some(Arc::new(
                TlsSetup::new(&name, &options.tls).map_err(invalid)?,
            )),
            _ => None,
        };
        let health = match &options.health_check {
            Some(check) => {
                let path = PathAndQuery::try_from(check.path.as_str())
                    .ok()
                    .filter(|p| p.path().starts_with('/'))
                    .ok_or_else(|| {
                        invalid(format!("health_check.path: {:?} is not a path", check.path))
                    })?;
                let runtime = tokio::runtime::Handle::try_current()
                    .map_err(|_| invalid("health_check needs a tokio runtime to run in".into()))?;
                Some((check.clone(), path, runtime))
            }
            None => None,
        };

        let epoch = Instant::now();
        let endpoints: Arc<[Endpoint]> = options
            .addresses
            .iter()
            .map(|&(address, weight)| {
                let kept = previous.and_then(|p| {
                    p.inner
                        .endpoints
                        .iter()
                        .find(|e| e.address() == address)
                        .map(|e| e.client().clone())
                });
                let client = kept.unwrap_or_else(|| {
                    let connector = Connector::new(address, options.connect_timeout, tls.clone());
                    client::build(&options, connector)
                });
                Endpoint::new(address, weight, epoch, client)
            })
            .collect();
        let scheme = match options.protocol {
            Protocol::Https => Scheme::HTTPS,
            _ => Scheme::HTTP,
        };
        let checker = health.map(|(check, path, runtime)| {
            Checker {
                name: name.clone(),
                endpoints: endpoints.clone(),
                scheme: scheme.clone(),
                http1: options.protocol == Protocol::Http1,
                path,
                check,
            }
            .spawn(&runtime)
        });
        Ok(Self {
            inner: Arc::new(Inner {
                balancer: Balancer::new(&options.balance, &endpoints),
                name,
                endpoints,
                scheme,
                http1: options.protocol == Protocol::Http1,
                version: match options.protocol {
                    Protocol::Http2 => Version::HTTP_2,
                    _ => Version::HTTP_11,
                },
                request_timeout: options.request_timeout,
                retries: options.retries,
                passive: options.passive.as_ref().map(PassivePolicy::from),
                checker,
            }),
        })
    }

    /// Whether `other` is a handle to this same pool (a clone of this one).
    pub fn same_pool(&self, other: &UpstreamPool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Sends `request` to an address chosen by the balancer, retrying as the
    /// module documentation says, and returns the response (its body streams)
    /// with the address that answered.
    ///
    /// The request is prepared by the caller: its Host header is kept as is.
    /// Its URI may be origin-form or absolute: only its path and query are
    /// used (`/` when it has none). `http1` sends them in origin-form with
    /// the Host header (the address's `ip:port` when there is none); `http2`
    /// and `https` send the Host header as the authority (HTTP/2's
    /// `:authority`). Its version is set to what the pool speaks (HTTP/1.1,
    /// or HTTP/2 for `http2`; ALPN decides for `https`).
    ///
    /// The response's head is the upstream's, but for one field: from an
    /// `http1` upstream, a `Connection` that says only `keep-alive` or
    /// `close` is about the pool's connection, which the pool keeps or
    /// closes, and is not among the response's headers. Any other
    /// `Connection` is there as sent.
    pub fn send(
        &self,
        request: Request<Body>,
    ) -> impl Future<Output = Result<(Response<Body>, SocketAddr), UpstreamError>> + Send + '_ {
        let (mut head, body) = request.into_parts();
        async move { self.send_forwarded(&mut head, body, None).await }
    }

    /// [`send`](Self::send) of a request whose head its caller keeps, with
    /// the proxy's `X-Forwarded-*` fields added on the way (see
    /// [`Forwarding`]). The head stays where the caller has it, and every
    /// attempt sends from there: it is not moved through the pool, the
    /// client and the exchange (a request head is 224 bytes), and a retry
    /// on `http1` needs no copy of it. Each attempt sets its target and
    /// version for its address (a Host the pool added for a failed address
    /// is taken out again). What is left of the head afterwards is not the
    /// request: after an `http1` answer its header map has been taken,
    /// emptied, for the connection's next answer head, and on `http2` and
    /// `https` the last attempt that may be made (the only one, for a
    /// request that cannot be retried) hands hyper-util's client the head
    /// itself and leaves an empty one.
    pub(crate) async fn send_forwarded(
        &self,
        head: &mut http::request::Parts,
        body: Body,
        mut forwarding: Option<&Forwarding>,
    ) -> Result<(Response<Body>, SocketAddr), UpstreamError> {
        let inner = &*self.inner;
        let deadline = tokio::time::Instant::now() + inner.request_timeout;
        // A balancer that hashes one of the fields sees them as sent.
        if let Some(fields) = forwarding
            && inner.balancer.hashes_forwarding()
        {
            fields.apply(&mut head.headers);
            forwarding = None;
        }
        let key = inner.balancer.key(head);
        let may_retry = inner.retries > 0 && retry::allowed(head, &body);
        let mut index = inner.select(key, &[]);
        let mut body = Some(body);
        // Allocated only when a retry happens.
        let mut tried: Vec<usize> = Vec::new();
        loop {
            // The first attempt sends the client's body; a retried request
            // had none.
            let mut sending = body.take().unwrap_or_default();
            let settled = match inner.prepare(index, head, &mut sending) {
                Ok(attempt) => {
                    let client = attempt.endpoint.client();
                    let last = !may_retry || tried.len() >= inner.retries as usize;
                    let outcome = client
                        .request(head, sending, deadline, forwarding, last)
                        .await;
                    inner.settle(attempt, head, outcome)
                }
                Err(failed) => Err(failed),
            };
            let failure = match settled {
                Ok(response) => return Ok((response, inner.endpoints[index].address())),
                Err(failure) => failure,
            };
            let source = match failure {
                Failure::TimedOut => {
                    return Err(UpstreamError::TimedOut {
                        name: inner.name.to_string(),
                    });
                }
                Failure::Final(source) => return Err(inner.unavailable(source)),
                Failure::Client(status, source) => {
                    return Err(UpstreamError::Client {
                        name: inner.name.to_string(),
                        status,
                        source,
                    });
                }
                Failure::BeforeResponse(source) => source,
            };
            if !may_retry || tried.len() >= inner.retries as usize {
                return Err(inner.unavailable(source));
            }
            tracing::debug!(
                upstream = &*inner.name,
                address = %inner.endpoints[index].address(),
                error = %source,
                "retrying on another address"
            );
            tried.push(index);
            index = inner.select(key, &tried);
        }
    }

    /// Counters per address, in configuration order, for metrics.
    pub fn stats(&self) -> Vec<EndpointStats> {
        self.inner.endpoints.iter().map(Endpoint::stats).collect()
    }
}

/// The pool as a client: a balanced, health-checked, retrying
/// `Service<Request<Body>>`. The response body streams; the address that
/// answered is in the response's [`UpstreamAddress`](super::UpstreamAddress)
/// extension. The request is sent as it is (see [`UpstreamPool::send`]): a
/// proxy's header clean-up is the [`Proxy`](crate::Proxy)'s, not the pool's.
impl tower::Service<Request<Body>> for UpstreamPool {
    type Response = Response<Body>;
    type Error = UpstreamError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response<Body>, UpstreamError>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), UpstreamError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let pool = self.clone();
        Box::pin(async move {
            let (mut response, address) = pool.send(request).await?;
            response
                .extensions_mut()
                .insert(super::UpstreamAddress(address));
            Ok(response)
        })
    }
}

impl fmt::Debug for UpstreamPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamPool")
            .field("name", &self.inner.name)
            .field(
                "addresses",
                &self
                    .inner
                    .endpoints
                    .iter()
                    .map(Endpoint::address)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

// === impl Inner ===

impl Inner {
    /// The address for the next attempt: an available one not tried yet, else
    /// (cold) see [`Inner::select_degraded`].
    #[inline]
    fn select(&self, key: Option<u64>, tried: &[usize]) -> usize {
        let endpoints = &*self.endpoints;
        let chosen = self.balancer.choose(endpoints, key, |i| {
            endpoints[i].is_available() && !tried.contains(&i)
        });
        match chosen {
            Some(index) => index,
            None => self.select_degraded(key, tried),
        }
    }

    /// No available address is left untried: an available one again, else
    /// fail open to the address whose last failure is the oldest (untried
    /// first), rather than refuse.
    #[cold]
    #[inline(never)]
    fn select_degraded(&self, key: Option<u64>, tried: &[usize]) -> usize {
        let endpoints = &*self.endpoints;
        if !tried.is_empty()
            && let Some(index) = self
                .balancer
                .choose(endpoints, key, |i| endpoints[i].is_available())
        {
            return index;
        }
        endpoints
            .iter()
            .enumerate()
            .filter(|(_, e)| e.weight() > 0)
            .min_by_key(|&(i, e)| (tried.contains(&i), e.last_failure()))
            .map_or(0, |(i, _)| i)
    }

    /// Readies the request (`head`, `body`) for one attempt on the address
    /// at `index`: its target, Host and version as that address takes them,
    /// and a watch on its body. Then [`UpstreamPool::send_forwarded`] awaits
    /// the address's client itself, and [`Inner::settle`] reads the outcome:
    /// the body goes into the client's future without an attempt's future
    /// between them, which would copy it once more.
    fn prepare(
        &self,
        index: usize,
        head: &mut http::request::Parts,
        body: &mut Body,
    ) -> Result<Attempt<'_>, Failure> {
        let endpoint = &self.endpoints[index];
        let uri = std::mem::take(&mut head.uri);
        let mut host_added = false;
        head.uri = if self.http1 {
            // Origin-form, with Host (the address when the client sent none).
            if let header::Entry::Vacant(host) = head.headers.entry(header::HOST) {
                host.insert(endpoint.host().clone());
                host_added = true;
            }
            origin_form(uri)
        } else {
            let authority = host_authority(head).unwrap_or_else(|| endpoint.authority().clone());
            self.target(authority, uri).map_err(Failure::Final)?
        };
        head.version = self.version;
        let body = sent::watch(body);
        Ok(Attempt {
            host_added,
            body,
            _in_flight: endpoint.begin(),
            endpoint,
        })
    }

    /// The outcome of one attempt on its address, until the response head
    /// or the deadline. After a failure, a Host the attempt added is taken
    /// out of `head` again (the next address gets its own).
    fn settle(
        &self,
        attempt: Attempt<'_>,
        head: &mut http::request::Parts,
        outcome: Result<Response<Body>, scalws_core::BoxError>,
    ) -> Result<Response<Body>, Failure> {
        let Attempt {
            endpoint,
            host_added,
            body,
            ..
        } = attempt;
        match outcome {
            Ok(response) => {
                endpoint.record_success();
                Ok(response)
            }
            Err(error) if error.is::<DeadlinePassed>() => {
                if body
                    .as_ref()
                    .is_some_and(sent::BodyWatch::waiting_on_client)
                {
                    return Err(Failure::Client(
                        StatusCode::REQUEST_TIMEOUT,
                        "the request body was not all received within request_timeout".into(),
                    ));
                }
                endpoint.record_failure(self.passive);
                Err(Failure::TimedOut)
            }
            Err(error) => {
                if host_added {
                    head.headers.remove(header::HOST);
                }
                if let Some(status) = body.as_ref().and_then(|b| b.client_fault(error.as_ref())) {
                    return Err(Failure::Client(status, error));
                }
                endpoint.record_failure(self.passive);
                Err(Failure::from_error(error))
            }
        }
    }

    /// `{scheme}://{authority}{path_and_query}`, reusing the URI's parts.
    fn target(&self, authority: Authority, uri: Uri) -> Result<Uri, scalws_core::BoxError> {
        let mut parts = uri.into_parts();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(authority);
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(PathAndQuery::from_static("/"));
        }
        Ok(Uri::from_parts(parts)?)
    }

    #[cold]
    fn unavailable(&self, source: scalws_core::BoxError) -> UpstreamError {
        UpstreamError::Unavailable {
            name: self.name.to_string(),
            source: Some(source),
        }
    }
}

/// What one attempt keeps beside the request while it is out: its address,
/// whether it added Host, the watch on its body, and its count on the
/// address.
struct Attempt<'a> {
    /// The address's endpoint.
    endpoint: &'a Endpoint,
    host_added: bool,
    body: Option<sent::BodyWatch>,
    _in_flight: InFlight<'a>,
}

/// The URI's path and query alone (`/` when it has none).
fn origin_form(uri: Uri) -> Uri {
    match uri.path_and_query() {
        Some(_) if uri.scheme().is_none() && uri.authority().is_none() => uri,
        Some(path) => Uri::from(path.clone()),
        None => Uri::from_static("/"),
    }
}

/// The request's Host as a URI authority, when it is a valid one.
fn host_authority(head: &http::request::Parts) -> Option<Authority> {
    let host = head.headers.get(header::HOST)?.as_bytes();
    Authority::try_from(host)
        .ok()
        .filter(|authority| !authority.as_str().contains('@'))
}

fn validate(options: &UpstreamOptions) -> Result<(), String> {
    if options.addresses.is_empty() {
        return Err("addresses: at least one address is needed".into());
    }
    if options.addresses.iter().all(|&(_, weight)| weight == 0) {
        return Err("addresses: every weight is 0, so no address can be chosen".into());
    }
    let mut seen = HashSet::with_capacity(options.addresses.len());
    for &(address, _) in &options.addresses {
        if !seen.insert(address) {
            return Err(format!("addresses: {address} is listed twice"));
        }
    }
    let positive = [
        ("connect_timeout", options.connect_timeout),
        ("request_timeout", options.request_timeout),
    ];
    let checks = options.health_check.iter().flat_map(|c| {
        [
            ("health_check.interval", c.interval),
            ("health_check.timeout", c.timeout),
        ]
    });
    for (key, value) in positive.into_iter().chain(checks) {
        if value.is_zero() {
            return Err(format!("{key}: must be more than 0"));
        }
    }
    Ok(())
}
