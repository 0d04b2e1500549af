//! An application: the domains it answers, the listeners it is bound to, its routes.

use std::sync::Arc;

use scalws_router::{
    HostPattern, InvalidHostPattern, InvalidRoute, RouteSpec, RouteTable, RouteTableBuilder,
};

use crate::Route;

/// One application, ready to serve. Built once, shared by `Arc`.
#[derive(Debug)]
pub struct Application {
    pub(crate) name: Arc<str>,
    pub(crate) routes: RouteTable<Route>,
}

impl Application {
    /// Starts an application called `name` (used in errors and logs).
    pub fn builder(name: impl Into<Arc<str>>) -> ApplicationBuilder {
        ApplicationBuilder {
            name: name.into(),
            domains: Vec::new(),
            listeners: None,
            routes: RouteTableBuilder::new(),
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
}

impl ApplicationBuilder {
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

    /// Adds a route (by value, for chaining).
    pub fn route(mut self, route: RouteSpec<impl Into<Route>>) -> Result<Self, InvalidRoute> {
        self.add_route(route)?;
        Ok(self)
    }

    /// Adds a route in place; on error the builder keeps its other routes.
    pub fn add_route(&mut self, route: RouteSpec<impl Into<Route>>) -> Result<(), InvalidRoute> {
        let RouteSpec {
            path,
            methods,
            headers,
            query,
            target,
        } = route;
        let route = RouteSpec {
            path,
            methods,
            headers,
            query,
            target: target.into(),
        };
        self.routes.route(route).map(|_| ())
    }
}
