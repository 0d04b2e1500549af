//! [`GatewayBuilder`]: listeners and applications in, per-listener host
//! tables out.

use std::sync::Arc;

use super::hosts::{ClaimedTwice, TablesBuilder};
use super::{Gateway, Inner};
use crate::application::{Application, ApplicationBuilder};
use crate::observe::metrics::RouteMetrics;

/// The gateway could not be built.
#[derive(Debug, thiserror::Error)]
pub enum InvalidGateway {
    /// Applications on one listener claim the same domain: every such
    /// claim, in the order the applications were added.
    #[error("{}", claims(.0))]
    DuplicateDomains(Vec<ClaimedTwice>),
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
    /// Declares a listener by name (as the server puts it in [`ConnInfo`](scalws_core::ConnInfo)).
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

    /// Builds the per-listener host tables. A domain claimed twice on one
    /// listener is refused here, by the host table, and every such claim is
    /// reported (in [`InvalidGateway::DuplicateDomains`]).
    pub fn build(self) -> Result<Gateway, InvalidGateway> {
        let mut tables = TablesBuilder::new(self.listeners);
        let mut claimed_twice = Vec::new();
        for mut builder in self.applications {
            if let Some(wanted) = &builder.listeners {
                for listener in wanted {
                    if !tables.has(listener) {
                        return Err(InvalidGateway::UnknownListener {
                            application: builder.name.to_string(),
                            listener: listener.clone(),
                        });
                    }
                }
            }
            if builder.redirects_to_https() && self.https_port.is_none() {
                return Err(InvalidGateway::NoHttpsPort {
                    application: builder.name.to_string(),
                });
            }
            let on = builder.listeners.take();
            let domains = std::mem::take(&mut builder.domains);
            let application: Arc<Application> = builder.finish(self.unrouted.clone());
            for domain in &domains {
                claimed_twice.extend(tables.insert(
                    on.as_deref(),
                    domain,
                    &application.name,
                    &application,
                ));
            }
        }
        if !claimed_twice.is_empty() {
            return Err(InvalidGateway::DuplicateDomains(claimed_twice));
        }
        Ok(Gateway {
            inner: Arc::new(Inner {
                listeners: tables.build(),
                https_port: self.https_port.unwrap_or(443),
                unrouted: self.unrouted,
            }),
            retired: None,
        })
    }
}

fn claims(claimed: &[ClaimedTwice]) -> String {
    let text: Vec<String> = claimed.iter().map(ToString::to_string).collect();
    text.join("; ")
}
