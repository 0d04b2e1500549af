//! The gateway: every ScalWS stage composed into one `Service`.
//!
//! - [`stack`](self::stack): the order a request goes through, in one file.
//! - [`GatewayBuilder`]: listeners and applications in, host tables out.
//! - [`HostRouter`]: host selection alone, over services of your own.
//! - [`SharedGateway`]: the reload slot, with retired listeners' tables.

mod builder;
mod explain;
mod hosts;
mod shared;
mod stack;

use std::sync::Arc;

use scalws_core::ConnInfo;
use scalws_router::HostTable;

pub use builder::{GatewayBuilder, InvalidGateway};
pub use explain::{Explanation, Outcome};
pub use hosts::{ClaimedTwice, HostRouter, HostRouterBuilder, InvalidHostRouter};
pub use shared::SharedGateway;

use crate::application::Application;
use crate::observe::metrics::RouteMetrics;
use crate::service::HttpService;
use hosts::{Listener, find};

/// The whole request path as one cloneable `tower::Service`; see
/// `gateway/stack.rs` for the order of its stages.
#[derive(Clone, Debug)]
pub struct Gateway {
    inner: Arc<Inner>,
    /// Host tables of listeners the gateway before this one had and this one
    /// has not (see [`SharedGateway::store`]).
    retired: Option<Arc<[Listener<Arc<Application>>]>>,
}

#[derive(Debug)]
struct Inner {
    /// One host table per listener, in the order the listeners were declared.
    listeners: Vec<Listener<Arc<Application>>>,
    /// Where `https_redirect` sends requests; set whenever an application uses it.
    https_port: u16,
    /// Where requests no route answered are counted, if anywhere.
    unrouted: Option<Arc<RouteMetrics>>,
}

impl Gateway {
    /// Starts a gateway.
    pub fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// The gateway as one boxed service, for a stack of the embedder's own
    /// (`tower::util::BoxCloneService` and the like are accepted by
    /// [`Server::serve`](scalws_core::Server::serve)).
    pub fn boxed(self) -> HttpService {
        HttpService::direct(self)
    }

    /// The listeners, in declaration order, with their host tables.
    pub fn listeners(&self) -> impl Iterator<Item = (&str, &HostTable<Arc<Application>>)> {
        self.inner
            .listeners
            .iter()
            .map(|(name, table)| (&**name, &**table))
    }

    /// The port `https_redirect` sends requests to.
    pub fn https_port(&self) -> u16 {
        self.inner.https_port
    }

    fn hosts_for(&self, conn: Option<&ConnInfo>) -> Option<&HostTable<Arc<Application>>> {
        let listeners = &self.inner.listeners;
        match conn {
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
        let gone: Vec<Listener<Arc<Application>>> = previous
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

/// A plain-HTTP connection on `listener`, as a test's request carries it.
#[cfg(test)]
fn plain_connection(listener: &str) -> ConnInfo {
    ConnInfo::new(
        listener.into(),
        scalws_core::Scheme::Http,
        "127.0.0.1:40000".parse().expect("an address"),
        "127.0.0.1:80".parse().expect("an address"),
        None,
    )
}
