//! The Gateway: every ScalWS stage composed into one `Service`. This file is the
//! one place that shows (and changes) the order a request goes through:
//!
//! 1. **Listener**: the host table of the listener the request came on
//!    ([`ConnInfo`] in its extensions; without one, the first listener's).
//! 2. **Host**: `:authority` or `Host`, normalised; exact hit in one hash
//!    lookup, else wildcards and catch-all. Missing or invalid on HTTP/1.1: 400;
//!    no application: 404.
//! 3. **Path**: unreserved escapes decoded and dot segments removed; a path
//!    escaping the root: 400.
//! 4. **Route**: the application's route table (prefix fast path, or full
//!    precedence match); none: 404; wrong method only: 405 with `Allow`.
//! 5. **Policy and action**: the route's timeout (504), then its action:
//!    `respond`, `static`, `proxy` or `backends`.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, header};
use scalws_core::{Body, ConnInfo};
use scalws_router::{
    DuplicateDomain, HostTable, HostTableBuilder, NoRoute, normalize_host, normalize_path,
};

use crate::action::ActionFuture;
use crate::application::{Application, ApplicationBuilder};

/// The whole request path as one cloneable `tower::Service`.
#[derive(Clone, Debug)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// One host table per listener, in the order the listeners were declared.
    listeners: Vec<(Box<str>, HostTable<Arc<Application>>)>,
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
}

/// Collects listeners and applications, then builds a [`Gateway`].
#[derive(Default)]
pub struct GatewayBuilder {
    listeners: Vec<String>,
    applications: Vec<ApplicationBuilder>,
}

impl GatewayBuilder {
    /// Declares a listener by name (as the server puts it in [`ConnInfo`]).
    pub fn listener(mut self, name: impl Into<String>) -> Self {
        self.listeners.push(name.into());
        self
    }

    /// Adds an application.
    pub fn application(mut self, application: ApplicationBuilder) -> Self {
        self.applications.push(application);
        self
    }

    /// Builds the per-listener host tables.
    pub fn build(self) -> Result<Gateway, InvalidGateway> {
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
            let application = Arc::new(Application {
                name: builder.name.clone(),
                routes: builder.routes.build(),
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
                    .map(|(name, table)| (name.into_boxed_str(), table.build()))
                    .collect(),
            }),
        })
    }
}

impl Gateway {
    /// Starts a gateway.
    pub fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// Routes and answers one request.
    pub fn handle(&self, request: Request<Body>) -> ActionFuture {
        let (mut parts, body) = request.into_parts();
        let Some(hosts) = self.hosts_for(&parts) else {
            return ActionFuture::error(StatusCode::NOT_FOUND);
        };
        let Some(host) = request_host(&parts) else {
            return ActionFuture::error(StatusCode::BAD_REQUEST);
        };
        let Ok(host) = normalize_host(host) else {
            return ActionFuture::error(StatusCode::BAD_REQUEST);
        };
        let Some(application) = hosts.get(&host) else {
            return ActionFuture::error(StatusCode::NOT_FOUND);
        };
        let Ok(path) = normalize_path(parts.uri.path()) else {
            return ActionFuture::error(StatusCode::BAD_REQUEST);
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
                matched.target.call(parts, body)
            }
            Err(NoRoute::NotFound) => ActionFuture::error(StatusCode::NOT_FOUND),
            Err(NoRoute::MethodNotAllowed { allow }) => method_not_allowed(allow),
        }
    }

    fn hosts_for(&self, parts: &Parts) -> Option<&HostTable<Arc<Application>>> {
        let listeners = &self.inner.listeners;
        match parts.extensions.get::<ConnInfo>() {
            // A handful of listeners: a scan of short names beats hashing.
            Some(conn) => listeners
                .iter()
                .find(|(name, _)| **name == *conn.listener())
                .map(|(_, table)| table),
            None => listeners.first().map(|(_, table)| table),
        }
    }
}

/// `:authority` (HTTP/2, and absolute-form HTTP/1.1), else `Host` (RFC 9110 7.2).
fn request_host(parts: &Parts) -> Option<&str> {
    if let Some(authority) = parts.uri.authority() {
        return Some(authority.as_str());
    }
    parts.headers.get(header::HOST)?.to_str().ok()
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
