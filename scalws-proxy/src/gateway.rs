//! The Gateway: every ScalWS stage composed into one `Service`. This file is the
//! one place that shows (and changes) the order a request goes through:
//!
//! 1. **Listener**: the host table of the listener the request came on
//!    ([`ConnInfo`] in its extensions; without one, the first listener's).
//! 2. **Host**: `:authority` or `Host`, normalised; exact hit in one hash
//!    lookup, else wildcards and catch-all. Missing or invalid on HTTP/1.1: 400;
//!    no application: 404.
//! 3. **https_redirect**: only for an application whose `redirect_check` is set
//!    (it or one of its routes has `https_redirect`): a plain-HTTP request it
//!    applies to gets 308 to https. Everything else pays that one flag test.
//! 4. **Path**: unreserved escapes decoded and dot segments removed; a path
//!    escaping the root: 400.
//! 5. **Route**: the application's route table (prefix fast path, or full
//!    precedence match); none: 404; wrong method only: 405 with `Allow`.
//! 6. **Policies and action** (see `action.rs`): `rewrite`, `request_headers`,
//!    the action (`respond`, `static`, `proxy`, `backends` or `redirect`) under
//!    the route's timeout (504), then `response_headers`.

use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, header};
use scalws_cache::Cache;
use scalws_core::{Body, ConnInfo, Scheme};
use scalws_router::{
    DuplicateDomain, HostTable, HostTableBuilder, NoRoute, normalize_host, normalize_path,
};

use crate::action::ActionFuture;
use crate::application::{Application, ApplicationBuilder};
use crate::metrics::RouteMetrics;
use crate::policy::https_redirect;

/// The whole request path as one cloneable `tower::Service`.
#[derive(Clone, Debug)]
pub struct Gateway {
    inner: Arc<Inner>,
    /// Host tables of listeners the gateway before this one had and this one
    /// has not (see [`SharedGateway::store`]).
    retired: Option<Arc<[Listener]>>,
}

/// A listener's name and host table.
type Listener = (Box<str>, Arc<HostTable<Arc<Application>>>);

#[derive(Debug)]
struct Inner {
    /// One host table per listener, in the order the listeners were declared.
    listeners: Vec<Listener>,
    /// Where `https_redirect` sends requests; set whenever an application uses it.
    https_port: u16,
    /// Response caches by application name.
    caches: Vec<(Arc<str>, Cache)>,
    /// Where requests no route answered are counted, if anywhere.
    unrouted: Option<Arc<RouteMetrics>>,
}

/// The gateway could not be built.
#[derive(Debug, thiserror::Error)]
pub enum InvalidGateway {
    /// Two applications on one listener claim the same domain.
    #[error("listener \"{listener}\": {source}")]
    DuplicateDomain {
        /// The listener both are on.
        listener: String,
        /// The domain and the two applications.
        #[source]
        source: DuplicateDomain,
    },
    /// An application names a listener the gateway does not have.
    #[error("application \"{application}\" names unknown listener \"{listener}\"")]
    UnknownListener {
        /// The application.
        application: String,
        /// The listener it named.
        listener: String,
    },
    /// An application or route has `https_redirect` but the gateway was given no https port.
    #[error("application \"{application}\" uses https_redirect, but the gateway has no https port")]
    NoHttpsPort {
        /// The application.
        application: String,
    },
}

/// Collects listeners and applications, then builds a [`Gateway`].
#[derive(Default)]
pub struct GatewayBuilder {
    listeners: Vec<String>,
    applications: Vec<ApplicationBuilder>,
    https_port: Option<u16>,
    unrouted: Option<Arc<RouteMetrics>>,
}

impl GatewayBuilder {
    /// Declares a listener by name (as the server puts it in [`ConnInfo`]).
    pub fn listener(mut self, name: impl Into<String>) -> Self {
        self.listeners.push(name.into());
        self
    }

    /// The port `https_redirect` sends requests to (the first https listener's);
    /// left out of `Location` when it is 443. Needed when any application or
    /// route uses `https_redirect`.
    pub fn https_port(mut self, port: u16) -> Self {
        self.https_port = Some(port);
        self
    }

    /// Counts the requests that no route answers (400, 404, 405, 421, and
    /// `https_redirect`'s 308) in `metrics`.
    pub fn unrouted_metrics(mut self, metrics: Arc<RouteMetrics>) -> Self {
        self.unrouted = Some(metrics);
        self
    }

    /// Adds an application.
    pub fn application(mut self, application: ApplicationBuilder) -> Self {
        self.applications.push(application);
        self
    }

    /// Builds the per-listener host tables.
    pub fn build(self) -> Result<Gateway, InvalidGateway> {
        let caches: Vec<(Arc<str>, Cache)> = self
            .applications
            .iter()
            .filter_map(|a| a.cache.clone().map(|c| (a.name.clone(), c)))
            .collect();
        let mut tables: Vec<(String, HostTableBuilder<Arc<Application>>)> = self
            .listeners
            .into_iter()
            .map(|name| (name, HostTableBuilder::new()))
            .collect();
        for builder in self.applications {
            if let Some(wanted) = &builder.listeners {
                for listener in wanted {
                    if !tables.iter().any(|(name, _)| name == listener) {
                        return Err(InvalidGateway::UnknownListener {
                            application: builder.name.to_string(),
                            listener: listener.clone(),
                        });
                    }
                }
            }
            let redirect_check = builder.redirects_to_https();
            if redirect_check && self.https_port.is_none() {
                return Err(InvalidGateway::NoHttpsPort {
                    application: builder.name.to_string(),
                });
            }
            let application = Arc::new(Application {
                name: builder.name.clone(),
                routes: builder.routes.build(),
                https_redirect: builder.https_redirect,
                redirect_check,
            });
            for (listener, table) in &mut tables {
                let bound = builder
                    .listeners
                    .as_ref()
                    .is_none_or(|names| names.contains(listener));
                if !bound {
                    continue;
                }
                for domain in &builder.domains {
                    table
                        .insert(domain.clone(), &builder.name, application.clone())
                        .map_err(|source| InvalidGateway::DuplicateDomain {
                            listener: listener.clone(),
                            source,
                        })?;
                }
            }
        }
        Ok(Gateway {
            inner: Arc::new(Inner {
                listeners: tables
                    .into_iter()
                    .map(|(name, table)| (name.into_boxed_str(), Arc::new(table.build())))
                    .collect(),
                https_port: self.https_port.unwrap_or(443),
                caches,
                unrouted: self.unrouted,
            }),
            retired: None,
        })
    }
}

impl Gateway {
    /// Starts a gateway.
    pub fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// Routes and answers one request.
    #[inline]
    pub fn handle(&self, request: Request<Body>) -> ActionFuture {
        let (future, routed) = self.route(request);
        if !routed && let Some(metrics) = &self.inner.unrouted {
            return count_unrouted(future, metrics);
        }
        future
    }

    /// The response future, and whether a route made it.
    fn route(&self, request: Request<Body>) -> (ActionFuture, bool) {
        let (mut parts, body) = request.into_parts();
        // One extension lookup serves the listener table and the 421 check.
        let conn = parts.extensions.get::<ConnInfo>();
        let Some(hosts) = self.hosts_for(conn) else {
            return (ActionFuture::error(StatusCode::NOT_FOUND), false);
        };
        let Some(host) = request_host(&parts) else {
            return (ActionFuture::error(StatusCode::BAD_REQUEST), false);
        };
        let Ok(host) = normalize_host(host) else {
            return (ActionFuture::error(StatusCode::BAD_REQUEST), false);
        };
        let Some(application) = hosts.get(&host) else {
            return (ActionFuture::error(StatusCode::NOT_FOUND), false);
        };
        if let Some(conn) = conn
            && conn.scheme() == Scheme::Https
            && misdirected(conn, &host)
        {
            return (ActionFuture::error(StatusCode::MISDIRECTED_REQUEST), false);
        }
        if application.redirect_check
            && let Some(redirect) =
                https_redirect(application, self.inner.https_port, &parts, &host)
        {
            return (redirect, false);
        }
        let Ok(path) = normalize_path(parts.uri.path()) else {
            return (ActionFuture::error(StatusCode::BAD_REQUEST), false);
        };
        let routed =
            application
                .routes
                .route(&parts.method, &path, parts.uri.query(), &parts.headers);
        match routed {
            Ok(matched) => {
                if !matched.params.is_empty() {
                    parts.extensions.insert(matched.params);
                }
                drop(path);
                (matched.target.call(parts, body), true)
            }
            Err(NoRoute::NotFound) => (ActionFuture::error(StatusCode::NOT_FOUND), false),
            Err(NoRoute::MethodNotAllowed { allow }) => (method_not_allowed(allow), false),
        }
    }

    /// The response cache of application `name`, for purges and statistics.
    pub fn cache(&self, name: &str) -> Option<&Cache> {
        self.inner
            .caches
            .iter()
            .find(|(app, _)| &**app == name)
            .map(|(_, cache)| cache)
    }

    fn hosts_for(&self, conn: Option<&ConnInfo>) -> Option<&HostTable<Arc<Application>>> {
        let listeners = &self.inner.listeners;
        match conn {
            // A handful of listeners: a scan of short names beats hashing.
            Some(conn) => match find(listeners, conn.listener()) {
                Some(table) => Some(table),
                None => self.retired_hosts(conn.listener()),
            },
            None => listeners.first().map(|(_, table)| &**table),
        }
    }

    #[cold]
    #[inline(never)]
    fn retired_hosts(&self, listener: &str) -> Option<&HostTable<Arc<Application>>> {
        find(self.retired.as_deref()?, listener)
    }

    /// This gateway, keeping the host tables of `previous`'s listeners that
    /// it does not have itself.
    fn retiring(mut self, previous: &Gateway) -> Gateway {
        let gone: Vec<Listener> = previous
            .inner
            .listeners
            .iter()
            .filter(|(name, _)| find(&self.inner.listeners, name).is_none())
            .cloned()
            .collect();
        self.retired = (!gone.is_empty()).then(|| gone.into());
        self
    }
}

fn find<'a>(listeners: &'a [Listener], name: &str) -> Option<&'a HostTable<Arc<Application>>> {
    listeners
        .iter()
        .find(|(listener, _)| **listener == *name)
        .map(|(_, table)| &**table)
}

/// A TLS request for a host that the certificate chosen by its SNI does not
/// cover (RFC 9110 15.5.20): the client reused a connection it should not
/// have. Without SNI (a client connecting by address) nothing is refused.
#[inline]
fn misdirected(conn: &ConnInfo, host: &str) -> bool {
    match conn.sni() {
        Some(sni) if sni != host => not_covered(conn, host),
        _ => false,
    }
}

#[cold]
#[inline(never)]
fn not_covered(conn: &ConnInfo, host: &str) -> bool {
    conn.tls().is_some_and(|tls| !tls.covers(conn.sni(), host))
}

/// `:authority` (HTTP/2, and absolute-form HTTP/1.1), else `Host` (RFC 9110 7.2).
pub(crate) fn request_host(parts: &Parts) -> Option<&str> {
    if let Some(authority) = parts.uri.authority() {
        return Some(authority.as_str());
    }
    parts.headers.get(header::HOST)?.to_str().ok()
}

/// Unrouted answers are all ready at once (errors and redirects).
#[cold]
#[inline(never)]
fn count_unrouted(future: ActionFuture, metrics: &RouteMetrics) -> ActionFuture {
    if let Some(status) = future.ready_status() {
        metrics.record(status.as_u16(), std::time::Duration::ZERO);
    }
    future
}

#[cold]
#[inline(never)]
fn method_not_allowed(allow: HeaderValue) -> ActionFuture {
    let mut response = scalws_core::error::error_response(StatusCode::METHOD_NOT_ALLOWED);
    response.headers_mut().insert(header::ALLOW, allow);
    ActionFuture::ready(response)
}

impl tower::Service<Request<Body>> for Gateway {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        self.handle(request)
    }
}

/// A [`Gateway`] that can be replaced while it serves: each request goes to
/// the gateway current when it arrives, and keeps it to its end, so a reload
/// never changes a request half way. Cheap to clone; all clones share one slot.
#[derive(Clone, Debug)]
pub struct SharedGateway {
    current: Arc<ArcSwap<Gateway>>,
}

impl SharedGateway {
    /// Serves `gateway` until [`store`](Self::store) replaces it.
    pub fn new(gateway: Gateway) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(gateway)),
        }
    }

    /// New requests go to `gateway` from now on.
    ///
    /// Requests that name a listener `gateway` does not have, but the gateway
    /// it replaces had, still route by that listener's old host table: they
    /// come on connections accepted before the listener was removed (which
    /// are draining: an HTTP/2 stream sent before the client saw GOAWAY, say)
    /// or renamed in place (which stay open), and they get the answer they
    /// were sent for instead of a 404. Those tables stay until the next
    /// `store` or [`forget_retired_after`](Self::forget_retired_after).
    ///
    /// Returns the gateway replaced, as it was, for [`restore`](Self::restore).
    pub fn store(&self, gateway: Gateway) -> Arc<Gateway> {
        let previous = self.current.load_full();
        self.current.store(Arc::new(gateway.retiring(&previous)));
        previous
    }

    /// Puts back, unchanged, the gateway a [`store`](Self::store) replaced:
    /// for a reload that failed after its gateway was stored.
    pub fn restore(&self, previous: Arc<Gateway>) {
        self.current.store(previous);
    }

    /// Drops the old listeners' host tables the last [`store`](Self::store)
    /// kept, `delay` from now (when their connections have drained), unless
    /// another gateway is stored first. Spawns a task on the current tokio
    /// runtime, which holds no part of the gateway meanwhile.
    pub fn forget_retired_after(&self, delay: std::time::Duration) {
        let current = self.current.load();
        if current.retired.is_none() {
            return;
        }
        let stored = Arc::downgrade(&current.inner);
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            shared.forget_retired(&stored);
        });
    }

    /// Drops the retired tables if the gateway `stored` points to is still current.
    fn forget_retired(&self, stored: &Weak<Inner>) {
        let is_current =
            |gateway: &Gateway| std::ptr::eq(stored.as_ptr(), Arc::as_ptr(&gateway.inner));
        let current = self.current.load();
        if current.retired.is_none() || !is_current(&current) {
            return;
        }
        self.current.rcu(|current| {
            let mut current = Gateway::clone(current);
            if is_current(&current) {
                current.retired = None;
            }
            current
        });
    }

    /// The gateway serving now.
    pub fn load(&self) -> Gateway {
        Gateway::clone(&self.current.load())
    }
}

impl tower::Service<Request<Body>> for SharedGateway {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        self.current.load().handle(request)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use http_body_util::BodyExt;
    use scalws_router::{PathMatch, RouteSpec};
    use tower::Service;

    use super::*;
    use crate::{Action, Respond};

    /// A gateway whose listeners each answer with their own name and `version`.
    fn gateway(listeners: &[&'static str], version: &'static str) -> Gateway {
        let mut builder = Gateway::builder();
        for &listener in listeners {
            let body = format!("{listener} {version}");
            let site = Application::builder(listener)
                .domain("*")
                .unwrap()
                .listener(listener)
                .route(RouteSpec {
                    path: PathMatch::Prefix("/".into()),
                    methods: None,
                    headers: vec![],
                    query: vec![],
                    target: Action::Respond(Respond::new(StatusCode::OK, body)),
                })
                .unwrap();
            builder = builder.listener(listener).application(site);
        }
        builder.build().unwrap()
    }

    /// What a request on listener `listener` gets: status and body.
    async fn on(shared: &SharedGateway, listener: &str) -> (u16, String) {
        let mut request = Request::get("/")
            .header(header::HOST, "example.com")
            .body(Body::empty())
            .unwrap();
        request.extensions_mut().insert(ConnInfo::new(
            listener.into(),
            Scheme::Http,
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
            None,
        ));
        let response = shared.clone().call(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_removed_listeners_connections_keep_its_routes_until_forgotten() {
        let shared = SharedGateway::new(gateway(&["a", "b"], "v1"));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));

        // "b" is removed, "c" added: "b"'s draining connections keep v1's routes.
        let second = gateway(&["a", "c"], "v2");
        shared.store(second.clone());
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()));
        assert_eq!(on(&shared, "c").await, (200, "c v2".into()));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));
        assert_eq!(on(&shared, "never").await.0, 404);

        // Forgetting on behalf of a gateway not current changes nothing.
        let other = gateway(&["a"], "other");
        shared.forget_retired(&Arc::downgrade(&other.inner));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));
        shared.forget_retired_after(Duration::from_millis(50));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(on(&shared, "b").await.0, 404);
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()));
        drop(second);

        // A failed reload puts the gateway back as it was, retired tables too.
        let before_failure = shared.store(gateway(&["c"], "v2b"));
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()), "retired");
        shared.restore(before_failure);
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()));
        assert_eq!(on(&shared, "b").await.0, 404, "nothing retired came back");

        // Only one generation is kept: "a" removed now, "b" long gone.
        shared.store(gateway(&["a", "c"], "v3"));
        shared.store(gateway(&["c"], "v4"));
        assert_eq!(on(&shared, "a").await, (200, "a v3".into()));
        assert_eq!(on(&shared, "b").await.0, 404);
        assert_eq!(on(&shared, "c").await, (200, "c v4".into()));
    }
}
