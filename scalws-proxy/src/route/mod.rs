//! A route's target: its [`Action`] and the policies around it, and the
//! embedder's own layers on one route. `gateway/stack.rs` runs them, in the
//! order its opening documentation lists.

pub(crate) mod policy;

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use scalws_core::{Body, BoxError};
use scalws_router::{InvalidRoute, PathMatch};
use tower::{Layer, Service};

pub(crate) use policy::matched_prefix;
pub use policy::{
    HeaderModifier, HttpsRedirect, InvalidHostName, InvalidPathModifier, PathModifier, PolicyLayer,
    PolicyService, RequestHeaders, RequestPolicy, ResponseHeaders, ResponseHeadersLayer, Rewrite,
    Timeout, TimeoutLayer,
};

use crate::Action;
use crate::observe::metrics::RouteMetrics;
use crate::service::{HttpService, boxed};

/// A route's target: its action and the policies around it.
#[derive(Clone, Debug)]
pub struct Route {
    pub(crate) inner: RouteInner,
    /// The embedder's layers around `inner`, built over a clone of it; `None`
    /// unless [`Route::layer`] was called, so other routes pay one test.
    pub(crate) layered: Option<Layered>,
    pub(crate) https_redirect: bool,
    /// Where the route's responses are counted, if anywhere.
    pub(crate) metrics: Option<Arc<RouteMetrics>>,
}

/// What a route does besides its embedder's layers.
#[derive(Clone, Debug)]
pub(crate) struct RouteInner {
    pub(crate) action: Action,
    pub(crate) timeout: Option<Duration>,
    /// `None` unless the route rewrites or modifies headers, so a route without
    /// them pays one test.
    pub(crate) policies: Option<Box<Policies>>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Policies {
    pub(crate) rewrite: Option<Rewrite>,
    pub(crate) request_headers: Option<HeaderModifier>,
    /// Shared with the response futures that apply it.
    pub(crate) response_headers: Option<Arc<HeaderModifier>>,
}

impl Policies {
    fn is_empty(&self) -> bool {
        self.rewrite.is_none() && self.request_headers.is_none() && self.response_headers.is_none()
    }
}

/// An embedder's layer, kept so the layered service can be rebuilt when the
/// route changes after it was added (a prefix bound, another policy).
type LayerFn = Arc<dyn Fn(HttpService) -> HttpService + Send + Sync>;

/// The embedder's layers and the service they make.
#[derive(Clone)]
pub(crate) struct Layered {
    layers: Vec<LayerFn>,
    pub(crate) service: HttpService,
}

impl std::fmt::Debug for Layered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layered")
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl Route {
    /// A route to `action` with no policy.
    pub fn new(action: Action) -> Self {
        Self {
            inner: RouteInner {
                action,
                timeout: None,
                policies: None,
            },
            layered: None,
            https_redirect: false,
            metrics: None,
        }
    }

    /// Counts the route's responses (status class and latency to the
    /// response head) in `metrics`, outside every layer of the route.
    pub fn metrics(mut self, metrics: Arc<RouteMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Rewrites the request's path or host before the action. A
    /// [`ReplacePrefixMatch`](crate::PathModifier::ReplacePrefixMatch)
    /// needs a `prefix` route (checked when the route is added to an application).
    pub fn rewrite(self, rewrite: Rewrite) -> Self {
        self.with_policies(|p| p.rewrite = Some(rewrite))
    }

    /// Changes the request's headers before the action (after `rewrite`).
    pub fn request_headers(self, headers: HeaderModifier) -> Self {
        self.with_policies(|p| p.request_headers = (!headers.is_empty()).then_some(headers))
    }

    /// Changes the headers of every response of the route, errors included
    /// (not what the route's embedder layers answer themselves: they wrap it).
    pub fn response_headers(self, headers: HeaderModifier) -> Self {
        self.with_policies(|p| {
            p.response_headers = (!headers.is_empty()).then(|| Arc::new(headers));
        })
    }

    /// Requests on a plain-HTTP connection get `308` to https (the gateway
    /// needs [`https_port`](crate::GatewayBuilder::https_port)).
    pub fn https_redirect(mut self, on: bool) -> Self {
        self.https_redirect = on;
        self
    }

    /// Answers 504 when the response head has not come within `timeout`.
    /// `Duration::ZERO` means no timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.inner.timeout = (!timeout.is_zero()).then_some(timeout);
        self.rebuild_layers();
        self
    }

    /// Puts an embedder's `layer` around the route: it sees the request
    /// after routing (path parameters in its extensions) and before the
    /// route's policies, and every response of the route, policies'
    /// included. For authentication on one route, say. Layers added later
    /// wrap earlier ones. The route's [`metrics`](Self::metrics) count what
    /// the layer answers too.
    ///
    /// The route is then called through one boxed service; routes without a
    /// layer are not.
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<HttpService> + Send + Sync + 'static,
        L::Service:
            Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request<Body>>>::Error: Into<BoxError>,
        <L::Service as Service<Request<Body>>>::Future: Send + 'static,
    {
        let layer: LayerFn = Arc::new(move |inner| boxed(layer.layer(inner)));
        let mut layers = self.layered.take().map(|l| l.layers).unwrap_or_default();
        layers.push(layer);
        self.layered = Some(Layered {
            service: build_layers(&self.inner, &layers),
            layers,
        });
        self
    }

    /// The action.
    pub fn action(&self) -> &Action {
        &self.inner.action
    }

    /// The route's timeout, if it has one.
    pub fn timeout_limit(&self) -> Option<Duration> {
        self.inner.timeout
    }

    /// The names of the policies the route applies, in the order they run.
    pub fn policy_names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.https_redirect {
            names.push("https_redirect");
        }
        if self.layered.is_some() {
            names.push("layer");
        }
        if let Some(policies) = &self.inner.policies {
            if policies.rewrite.is_some() {
                names.push("rewrite");
            }
            if policies.request_headers.is_some() {
                names.push("request_headers");
            }
        }
        if self.inner.timeout.is_some() {
            names.push("timeout");
        }
        if self
            .inner
            .policies
            .as_ref()
            .is_some_and(|p| p.response_headers.is_some())
        {
            names.push("response_headers");
        }
        names
    }

    fn with_policies(mut self, edit: impl FnOnce(&mut Policies)) -> Self {
        let mut policies = self.inner.policies.take().unwrap_or_default();
        edit(&mut policies);
        self.inner.policies = (!policies.is_empty()).then_some(policies);
        self.rebuild_layers();
        self
    }

    /// The layered service is built over a clone of the route: made again
    /// whenever the route changes.
    fn rebuild_layers(&mut self) {
        if let Some(layered) = &mut self.layered {
            layered.service = build_layers(&self.inner, &layered.layers);
        }
    }

    /// Whether the action needs the route's identity (a proxy's route cache).
    #[cfg(feature = "cache")]
    pub(crate) fn wants_route_identity(&self) -> bool {
        matches!(&self.inner.action, Action::Proxy(proxy) if proxy.wants_route())
    }

    /// Hands the route's identity to the action that asked for it.
    #[cfg(feature = "cache")]
    pub(crate) fn bind_identity(&mut self, identity: &str) {
        if let Action::Proxy(proxy) = &mut self.inner.action {
            proxy.bind_route(identity);
        }
        self.rebuild_layers();
    }

    pub(crate) fn redirects_to_https(&self) -> bool {
        self.https_redirect
    }

    /// Tells prefix replacements which prefix the route matches (refused on
    /// `exact` and `pattern` routes, which have none), and mounts a static
    /// action at a prefix route's prefix: `/static/app.css` on a `/static`
    /// route is `app.css` under the root. Nothing is stripped on other
    /// routes, nor when the route rewrites the path (which then says itself
    /// what is looked up).
    pub(crate) fn bind_prefix(&mut self, path: &PathMatch) -> Result<(), InvalidRoute> {
        #[cfg(feature = "static-files")]
        if let Action::Static(files) = &mut self.inner.action {
            let rewrites_path = self
                .inner
                .policies
                .as_ref()
                .and_then(|p| p.rewrite.as_ref())
                .is_some_and(|r| r.rewrites_path());
            let mount = match path {
                PathMatch::Prefix(prefix) if !rewrites_path => matched_prefix(prefix),
                _ => "".into(),
            };
            *files = files.mounted_at(&mount);
            self.rebuild_layers();
        }
        let inner = &mut self.inner;
        let rewrite = inner.policies.as_mut().and_then(|p| p.rewrite.as_mut());
        let rewrite_needs = rewrite.as_ref().is_some_and(|r| r.needs_prefix());
        let redirect_needs = matches!(&inner.action, Action::Redirect(r) if r.needs_prefix());
        if !(rewrite_needs || redirect_needs) {
            return Ok(());
        }
        let prefix = match path {
            PathMatch::Prefix(prefix) => matched_prefix(prefix),
            PathMatch::Exact(path) | PathMatch::Pattern(path) => {
                return Err(InvalidRoute {
                    path: path.clone(),
                    reason: "a prefix replacement needs a prefix route".into(),
                });
            }
        };
        if let Some(rewrite) = rewrite {
            rewrite.bind_prefix(prefix.clone());
        }
        if let Action::Redirect(redirect) = &mut inner.action {
            redirect.bind_prefix(prefix);
        }
        self.rebuild_layers();
        Ok(())
    }
}

fn build_layers(inner: &RouteInner, layers: &[LayerFn]) -> HttpService {
    let mut service = HttpService::direct(inner.clone());
    for layer in layers {
        service = layer(service);
    }
    service
}

impl From<Action> for Route {
    fn from(action: Action) -> Self {
        Route::new(action)
    }
}
