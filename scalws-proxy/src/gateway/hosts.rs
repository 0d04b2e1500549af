//! Host selection: the listener's host table, the request's host, the 421
//! check; as a function the gateway calls inline, and as [`HostRouter`], a
//! service over any services of the embedder's.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use scalws_core::{Body, ConnInfo, Scheme};
use scalws_router::{DuplicateDomain, HostPattern, HostTable, HostTableBuilder, normalize_host};
use tower::Service;

use crate::action::{ActionFuture, request_host};

/// A listener's name and host table.
pub(crate) type Listener<T> = (Box<str>, Arc<HostTable<T>>);

/// The table of the listener named `name`.
pub(crate) fn find<'a, T>(listeners: &'a [Listener<T>], name: &str) -> Option<&'a HostTable<T>> {
    // A handful of listeners: a scan of short names beats hashing.
    listeners
        .iter()
        .find(|(listener, _)| **listener == *name)
        .map(|(_, table)| &**table)
}

/// The value the request's host selects in `hosts` (the table of its
/// listener), and that host normalised; or the status to answer: 400 for a
/// missing or invalid host, 404 for no listener or no entry, 421 for a TLS
/// request whose host the certificate chosen by its SNI does not cover.
#[inline]
pub(crate) fn select_host<'a, 'p, T>(
    hosts: Option<&'a HostTable<T>>,
    parts: &'p Parts,
    conn: Option<&ConnInfo>,
) -> Result<(&'a T, Cow<'p, str>), StatusCode> {
    let Some(hosts) = hosts else {
        return Err(StatusCode::NOT_FOUND);
    };
    let Some(host) = request_host(parts) else {
        return Err(StatusCode::BAD_REQUEST);
    };
    let Ok(host) = normalize_host(host) else {
        return Err(StatusCode::BAD_REQUEST);
    };
    let Some(value) = hosts.get(&host) else {
        return Err(StatusCode::NOT_FOUND);
    };
    if let Some(conn) = conn
        && conn.scheme() == Scheme::Https
        && misdirected(conn, &host)
    {
        return Err(StatusCode::MISDIRECTED_REQUEST);
    }
    Ok((value, host))
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

/// Asked of core, whichever features it was built with: an HTTPS listener
/// exists whenever scalws-core's `tls` is on, whatever this crate's is.
#[cold]
#[inline(never)]
fn not_covered(conn: &ConnInfo, host: &str) -> bool {
    !conn.certificate_covers(host)
}

/// A domain claimed twice on one listener: the host table refused the second claim.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("listener \"{listener}\": {duplicate}")]
pub struct ClaimedTwice {
    /// The listener.
    pub listener: String,
    /// The domain and both applications.
    pub duplicate: DuplicateDomain,
}

/// Per-listener host tables under construction.
pub(crate) struct TablesBuilder<T> {
    tables: Vec<(String, HostTableBuilder<T>)>,
}

impl<T: Clone> TablesBuilder<T> {
    pub(crate) fn new(listeners: impl IntoIterator<Item = String>) -> Self {
        Self {
            tables: listeners
                .into_iter()
                .map(|name| (name, HostTableBuilder::new()))
                .collect(),
        }
    }

    pub(crate) fn has(&self, listener: &str) -> bool {
        self.tables.iter().any(|(name, _)| name == listener)
    }

    /// Adds `domain` for `value` on the listeners `on` names (every one when
    /// `None`). A domain already claimed on a listener is not added there;
    /// each such listener is returned with the claim it collides with.
    pub(crate) fn insert(
        &mut self,
        on: Option<&[String]>,
        domain: &HostPattern,
        owner: &str,
        value: &T,
    ) -> Vec<ClaimedTwice> {
        let mut refused = Vec::new();
        for (listener, table) in &mut self.tables {
            if on.is_some_and(|names| !names.contains(listener)) {
                continue;
            }
            if let Err(duplicate) = table.insert(domain.clone(), owner, value.clone()) {
                refused.push(ClaimedTwice {
                    listener: listener.clone(),
                    duplicate,
                });
            }
        }
        refused
    }

    pub(crate) fn build(self) -> Vec<Listener<T>> {
        self.tables
            .into_iter()
            .map(|(name, table)| (name.into_boxed_str(), Arc::new(table.build())))
            .collect()
    }
}

/// Host selection in front of services of your own: the table of the
/// listener the request came on ([`ConnInfo`]; without one, the first
/// listener's), then the request's host (`:authority` or `Host`, lower-cased,
/// without its port) looked up exact name first, then `*.suffix`,
/// `**.suffix` and `*`. Missing or invalid host: 400; no entry: 404; a TLS
/// request for a host its connection's certificate does not cover: 421.
///
/// ```
/// use http::{Request, StatusCode, header};
/// use scalws_core::Body;
/// use scalws_proxy::{HostRouter, Respond};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let router = HostRouter::builder()
///     .listener("main")
///     .host("*.example.com", "tenants", Respond::new(StatusCode::OK, "tenant"))?
///     .build()?;
/// let request = Request::get("/").header(header::HOST, "a.example.com").body(Body::empty())?;
/// assert_eq!(router.clone().oneshot(request).await?.status(), StatusCode::OK);
/// let request = Request::get("/").header(header::HOST, "other.org").body(Body::empty())?;
/// assert_eq!(router.oneshot(request).await?.status(), StatusCode::NOT_FOUND);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HostRouter<S> {
    listeners: Arc<[Listener<S>]>,
}

impl<S> Clone for HostRouter<S> {
    fn clone(&self) -> Self {
        Self {
            listeners: self.listeners.clone(),
        }
    }
}

/// Collects a [`HostRouter`]'s listeners and hosts.
pub struct HostRouterBuilder<S> {
    listeners: Vec<String>,
    hosts: Vec<(Option<String>, HostPattern, String, S)>,
}

/// A host router could not be built.
#[derive(Debug, thiserror::Error)]
pub enum InvalidHostRouter {
    /// Not a domain pattern.
    #[error(transparent)]
    Pattern(#[from] scalws_router::InvalidHostPattern),
    /// One domain claimed twice on a listener.
    #[error("listener \"{listener}\": {source}")]
    Duplicate {
        /// The listener.
        listener: String,
        /// The domain and both owners.
        #[source]
        source: DuplicateDomain,
    },
    /// A host names a listener the router does not have.
    #[error("unknown listener \"{0}\"")]
    UnknownListener(String),
}

impl<S> HostRouter<S> {
    /// Starts a router; declare at least one listener.
    pub fn builder() -> HostRouterBuilder<S> {
        HostRouterBuilder {
            listeners: Vec::new(),
            hosts: Vec::new(),
        }
    }

    /// The service `parts` is for, or the status to answer (see the type's
    /// documentation).
    pub fn select(&self, parts: &Parts) -> Result<&S, StatusCode> {
        let conn = parts.extensions.get::<ConnInfo>();
        let table = match conn {
            Some(conn) => find(&self.listeners, conn.listener()),
            None => self.listeners.first().map(|(_, table)| &**table),
        };
        select_host(table, parts, conn).map(|(service, _)| service)
    }
}

impl<S: Clone> HostRouterBuilder<S> {
    /// Declares a listener by name (as the server puts it in [`ConnInfo`]).
    pub fn listener(mut self, name: impl Into<String>) -> Self {
        self.listeners.push(name.into());
        self
    }

    /// `domain` (`example.com`, `*.example.com`, `**.example.com` or `*`)
    /// goes to `service` on every listener; `owner` names it in errors.
    pub fn host(self, domain: &str, owner: &str, service: S) -> Result<Self, InvalidHostRouter> {
        self.add(None, domain, owner, service)
    }

    /// `domain` goes to `service` on listener `listener` only.
    pub fn host_on(
        self,
        listener: &str,
        domain: &str,
        owner: &str,
        service: S,
    ) -> Result<Self, InvalidHostRouter> {
        self.add(Some(listener.to_owned()), domain, owner, service)
    }

    fn add(
        mut self,
        listener: Option<String>,
        domain: &str,
        owner: &str,
        service: S,
    ) -> Result<Self, InvalidHostRouter> {
        let pattern = HostPattern::parse(domain)?;
        self.hosts
            .push((listener, pattern, owner.to_owned(), service));
        Ok(self)
    }

    /// The router; a domain claimed twice on one listener is refused.
    pub fn build(self) -> Result<HostRouter<S>, InvalidHostRouter> {
        let mut tables = TablesBuilder::new(self.listeners);
        for (listener, pattern, owner, service) in &self.hosts {
            let on = match listener {
                Some(name) if !tables.has(name) => {
                    return Err(InvalidHostRouter::UnknownListener(name.clone()));
                }
                Some(name) => Some(std::slice::from_ref(name)),
                None => None,
            };
            if let Some(claimed) = tables
                .insert(on, pattern, owner, service)
                .into_iter()
                .next()
            {
                return Err(InvalidHostRouter::Duplicate {
                    listener: claimed.listener,
                    source: claimed.duplicate,
                });
            }
        }
        Ok(HostRouter {
            listeners: tables.build().into(),
        })
    }
}

impl<S> Service<Request<Body>> for HostRouter<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        let (parts, body) = request.into_parts();
        let service = match self.select(&parts) {
            Ok(service) => service.clone(),
            Err(status) => return ActionFuture::error(status),
        };
        ActionFuture::oneshot(service, Request::from_parts(parts, body))
    }
}
