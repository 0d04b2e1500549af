//! An application: the domains it answers, the listeners it is bound to, its routes.

use std::sync::Arc;

use scalws_cache::Cache;

use scalws_router::{
    HostPattern, InvalidHostPattern, InvalidRoute, RouteSpec, RouteTable, RouteTableBuilder,
};

use crate::Route;

/// One application, ready to serve. Built once, shared by `Arc`.
#[derive(Debug)]
pub struct Application {
    pub(crate) name: Arc<str>,
    pub(crate) routes: RouteTable<Route>,
    /// Every plain-HTTP request is redirected to https.
    pub(crate) https_redirect: bool,
    /// `https_redirect` on the application or on any of its routes: the one flag
    /// a request tests before the redirect decision is made out of line.
    pub(crate) redirect_check: bool,
}

impl Application {
    /// Starts an application called `name` (used in errors and logs).
    pub fn builder(name: impl Into<Arc<str>>) -> ApplicationBuilder {
        ApplicationBuilder {
            name: name.into(),
            domains: Vec::new(),
            listeners: None,
            routes: RouteTableBuilder::new(),
            https_redirect: false,
            route_redirects: false,
            cache: None,
        }
    }

    /// The application's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Collects an application's domains, listeners and routes.
pub struct ApplicationBuilder {
    pub(crate) name: Arc<str>,
    pub(crate) domains: Vec<HostPattern>,
    /// `None`: every listener of the gateway.
    pub(crate) listeners: Option<Vec<String>>,
    pub(crate) routes: RouteTableBuilder<Route>,
    pub(crate) https_redirect: bool,
    /// Some route has `https_redirect`.
    pub(crate) route_redirects: bool,
    /// The application's response cache, for purges through the gateway.
    pub(crate) cache: Option<Cache>,
}

impl ApplicationBuilder {
    /// Names the application's response cache, so [`crate::Gateway::cache`]
    /// can find it for purges. Routes opt in with [`crate::Proxy::with_cache`].
    pub fn cache(mut self, cache: Cache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Adds a domain: `example.com`, `*.example.com`, `**.example.com` or `*`.
    pub fn domain(mut self, domain: &str) -> Result<Self, InvalidHostPattern> {
        self.domains.push(HostPattern::parse(domain)?);
        Ok(self)
    }

    /// Binds the application to a listener by name. Without any, it is on every listener.
    pub fn listener(mut self, name: impl Into<String>) -> Self {
        self.listeners
            .get_or_insert_with(Vec::new)
            .push(name.into());
        self
    }

    /// Requests on a plain-HTTP connection get `308` to https, whatever their
    /// route (the gateway needs [`https_port`](crate::GatewayBuilder::https_port)).
    pub fn https_redirect(mut self, on: bool) -> Self {
        self.https_redirect = on;
        self
    }

    /// Whether the application or one of its routes redirects to https.
    pub(crate) fn redirects_to_https(&self) -> bool {
        self.https_redirect || self.route_redirects
    }

    /// Adds a route (by value, for chaining).
    pub fn route(mut self, route: RouteSpec<impl Into<Route>>) -> Result<Self, InvalidRoute> {
        self.add_route(route)?;
        Ok(self)
    }

    /// Adds a route in place; on error the builder keeps its other routes.
    ///
    /// Refused, besides what [`RouteTableBuilder::route`] refuses: a prefix
    /// replacement (rewrite or redirect) on an `exact` or `pattern` route.
    pub fn add_route(&mut self, route: RouteSpec<impl Into<Route>>) -> Result<(), InvalidRoute> {
        let RouteSpec {
            path,
            methods,
            headers,
            query,
            target,
        } = route;
        let mut target: Route = target.into();
        target.bind_prefix(&path)?;
        let redirects = target.redirects_to_https();
        let route = RouteSpec {
            path,
            methods,
            headers,
            query,
            target,
        };
        self.routes.route(route)?;
        self.route_redirects |= redirects;
        Ok(())
    }
}
