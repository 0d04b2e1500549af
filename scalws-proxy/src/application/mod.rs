//! An application: the domains it answers, the listeners it is bound to, its
//! routes, and route selection ([`RouteRouter`]) as a service of its own.

mod routes;

use std::sync::{Arc, Weak};

use http::{Request, Response};
use scalws_core::{Body, BoxError};
use scalws_router::{
    HostPattern, InvalidHostPattern, InvalidRoute, RouteSpec, RouteTable, RouteTableBuilder,
};
use tower::{Layer, Service};

pub(crate) use routes::select_route;
pub use routes::{NoRouteFor, RouteRouter, RouteRouterBuilder};

use crate::Route;
use crate::service::{HttpService, boxed};

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
    /// The embedder's layers around route selection; `None` unless
    /// [`ApplicationBuilder::layer`] was called.
    pub(crate) layered: Option<HttpService>,
    /// The gateway's count of unrouted answers, for those made inside `layered`.
    pub(crate) unrouted: Option<Arc<crate::observe::metrics::RouteMetrics>>,
}

/// The embedder's layer of an application, applied when the gateway is built.
pub(crate) type AppLayerFn = Box<dyn Fn(HttpService) -> HttpService + Send + Sync>;

/// Route selection and the route, for an application's embedder layers to
/// wrap. Holds the application weakly (it is the application's own field);
/// the gateway keeps the application alive while a request is in its layers.
#[derive(Clone)]
pub(crate) struct ApplicationRoutes(pub(crate) Weak<Application>);

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
            layers: Vec::new(),
            metrics: None,
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
    /// The embedder's layers, innermost first.
    pub(crate) layers: Vec<AppLayerFn>,
    /// Where routes added from now on are counted, and the labels given.
    metrics: Option<(crate::metrics::Metrics, Vec<String>)>,
}

impl ApplicationBuilder {
    /// Puts an embedder's `layer` around the application: it sees every
    /// request the host table gives the application (after the 421 check and
    /// `https_redirect`), before route selection, and every answer, 404 and
    /// 405 included. Layers added later wrap earlier ones.
    ///
    /// A response the layer makes itself (a 401, say) reaches no route, so
    /// no route's counters see it, nor the gateway's unrouted ones; to count
    /// it, put a [`MetricsLayer`](crate::metrics::MetricsLayer) outside the
    /// layer. [`Gateway::explain`](crate::Gateway::explain) reports such an
    /// application as answered by its layers.
    ///
    /// The application is then called through one boxed service;
    /// applications without a layer are not.
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<HttpService> + Send + Sync + 'static,
        L::Service:
            Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request<Body>>>::Error: Into<BoxError>,
        <L::Service as Service<Request<Body>>>::Future: Send + 'static,
    {
        self.layers
            .push(Box::new(move |inner| boxed(layer.layer(inner))));
        self
    }

    /// Builds the application: its route table, and its layers over it.
    pub(crate) fn finish(
        self,
        unrouted: Option<Arc<crate::observe::metrics::RouteMetrics>>,
    ) -> Arc<Application> {
        let redirect_check = self.redirects_to_https();
        let ApplicationBuilder {
            name,
            routes,
            https_redirect,
            layers,
            ..
        } = self;
        let routes = routes.build();
        Arc::new_cyclic(|weak| Application {
            name,
            routes,
            https_redirect,
            redirect_check,
            unrouted,
            layered: (!layers.is_empty()).then(|| {
                let mut service = HttpService::direct(ApplicationRoutes(weak.clone()));
                for layer in &layers {
                    service = layer(service);
                }
                service
            }),
        })
    }

    /// Counts each route added from now on in `registry`, under this
    /// application's name and the route's [`route_label`](crate::metrics::route_label)
    /// (a route that already has counters, [`Route::metrics`], keeps them).
    /// A reload that builds the same routes gets the same counters back.
    pub fn metrics(mut self, registry: &crate::metrics::Metrics) -> Self {
        self.metrics = Some((registry.clone(), Vec::new()));
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
        if let Some((registry, labels)) = &mut self.metrics
            && target.metrics.is_none()
        {
            let mut label = crate::metrics::route_label(&path);
            if labels.contains(&label) {
                label = format!("{label} #{}", labels.len());
            }
            target = target.metrics(registry.route(&self.name, &label));
            labels.push(label);
        }
        #[cfg(feature = "cache")]
        if target.wants_route_identity() {
            let identity = RouteSpec {
                path: path.clone(),
                methods: methods.clone(),
                headers: headers.clone(),
                query: query.clone(),
                target: (),
            }
            .identity();
            // Applications sharing one cache keep their entries apart too.
            target.bind_identity(&format!("{:?} {identity}", &*self.name));
        }
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
