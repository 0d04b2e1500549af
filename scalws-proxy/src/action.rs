//! What a route leads to: the closed set of actions, dispatched statically,
//! and the route's own policies around it, in this order: `rewrite`, then
//! `request_headers`, the action under its `timeout`, then `response_headers`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;
use scalws_router::{InvalidRoute, PathMatch, normalize_path};

use crate::metrics::RouteMetrics;
use crate::policy::{HeaderModifier, Redirect, Rewrite, matched_prefix};
use crate::{Backends, Proxy, Respond, StaticFiles};

/// The action of a route. A closed set, so dispatch is a `match`, not a vtable.
#[derive(Clone, Debug)]
pub enum Action {
    /// A fixed response.
    Respond(Respond),
    /// Files under a directory.
    Static(StaticFiles),
    /// Forward to an upstream pool.
    Proxy(Proxy),
    /// A weighted split between proxies and fixed statuses.
    Backends(Backends),
    /// A redirect.
    Redirect(Redirect),
}

/// A route's target: its action and the policies around it.
#[derive(Clone, Debug)]
pub struct Route {
    action: Action,
    timeout: Option<Duration>,
    /// `None` unless the route rewrites or modifies headers, so a route without
    /// them pays one test.
    policies: Option<Box<Policies>>,
    https_redirect: bool,
    /// Where the route's responses are counted, if anywhere.
    metrics: Option<Arc<RouteMetrics>>,
}

#[derive(Clone, Debug, Default)]
struct Policies {
    rewrite: Option<Rewrite>,
    request_headers: Option<HeaderModifier>,
    /// Shared with the response futures that apply it.
    response_headers: Option<Arc<HeaderModifier>>,
}

impl Policies {
    fn is_empty(&self) -> bool {
        self.rewrite.is_none() && self.request_headers.is_none() && self.response_headers.is_none()
    }
}

impl Route {
    /// A route to `action` with no policy.
    pub fn new(action: Action) -> Self {
        Self {
            action,
            timeout: None,
            policies: None,
            https_redirect: false,
            metrics: None,
        }
    }

    /// Counts the route's responses (status class and latency to the
    /// response head) in `metrics`.
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

    /// Changes the headers of every response of the route, errors included.
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
        self.timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// The action.
    pub fn action(&self) -> &Action {
        &self.action
    }

    fn with_policies(mut self, edit: impl FnOnce(&mut Policies)) -> Self {
        let mut policies = self.policies.take().unwrap_or_default();
        edit(&mut policies);
        self.policies = (!policies.is_empty()).then_some(policies);
        self
    }

    pub(crate) fn redirects_to_https(&self) -> bool {
        self.https_redirect
    }

    /// Tells prefix replacements which prefix the route matches; refused on
    /// `exact` and `pattern` routes, which have none.
    pub(crate) fn bind_prefix(&mut self, path: &PathMatch) -> Result<(), InvalidRoute> {
        let rewrite = self.policies.as_mut().and_then(|p| p.rewrite.as_mut());
        let rewrite_needs = rewrite.as_ref().is_some_and(|r| r.needs_prefix());
        let redirect_needs = matches!(&self.action, Action::Redirect(r) if r.needs_prefix());
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
        if let Action::Redirect(redirect) = &mut self.action {
            redirect.bind_prefix(prefix);
        }
        Ok(())
    }

    /// Runs the route for a routed request.
    pub(crate) fn call(&self, parts: Parts, body: Body) -> ActionFuture {
        let future = match &self.policies {
            None => self.act(parts, body),
            Some(policies) => self.call_with_policies(policies, parts, body),
        };
        match &self.metrics {
            None => future,
            Some(metrics) => future.measured(metrics),
        }
    }

    #[inline(never)]
    fn call_with_policies(
        &self,
        policies: &Policies,
        mut parts: Parts,
        body: Body,
    ) -> ActionFuture {
        let rewritten = match &policies.rewrite {
            Some(rewrite) => rewrite.apply(&mut parts),
            None => Ok(()),
        };
        let future = match rewritten {
            Ok(()) => {
                if let Some(headers) = &policies.request_headers {
                    headers.apply(&mut parts.headers);
                }
                self.act(parts, body)
            }
            Err(status) => ActionFuture::error(status),
        };
        match &policies.response_headers {
            None => future,
            Some(headers) => future.with_response_headers(headers.clone()),
        }
    }

    /// The action under the route's timeout.
    fn act(&self, parts: Parts, body: Body) -> ActionFuture {
        let future = match &self.action {
            Action::Respond(respond) => {
                return ActionFuture::ready(respond.response(&parts.method));
            }
            Action::Redirect(redirect) => return ActionFuture::ready(redirect.response(&parts)),
            Action::Static(files) => {
                let files = files.clone();
                ActionFuture::boxed(async move {
                    // Normalised again rather than copied out: the gateway already
                    // accepted this path, so this cannot fail.
                    match normalize_path(parts.uri.path()) {
                        Ok(path) => files.serve(&parts.method, &path, &parts.headers).await,
                        Err(_) => error_response(StatusCode::BAD_REQUEST),
                    }
                })
            }
            Action::Proxy(proxy) => {
                let proxy = proxy.clone();
                ActionFuture::boxed(
                    async move { proxy.forward(Request::from_parts(parts, body)).await },
                )
            }
            Action::Backends(backends) => {
                let backends = backends.clone();
                ActionFuture::boxed(
                    async move { backends.call(Request::from_parts(parts, body)).await },
                )
            }
        };
        match self.timeout {
            None => future,
            Some(limit) => with_timeout(future, limit),
        }
    }
}

impl From<Action> for Route {
    fn from(action: Action) -> Self {
        Route::new(action)
    }
}

#[cold]
#[inline(never)]
fn with_timeout(future: ActionFuture, limit: Duration) -> ActionFuture {
    ActionFuture::boxed(async move {
        match tokio::time::timeout(limit, future).await {
            Ok(Ok(response)) => response,
            Ok(Err(never)) => match never {},
            Err(_elapsed) => error_response(StatusCode::GATEWAY_TIMEOUT),
        }
    })
}

/// The future of an action: ready at once for `respond` and errors, boxed for the rest.
pub struct ActionFuture {
    kind: FutureKind,
    /// Counts the response when it comes (futures that are not ready at once).
    measure: Option<Measure>,
}

struct Measure {
    metrics: Arc<RouteMetrics>,
    start: Instant,
}

enum FutureKind {
    Ready(Option<Response<Body>>),
    Boxed(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

impl ActionFuture {
    pub(crate) fn ready(response: Response<Body>) -> Self {
        Self {
            kind: FutureKind::Ready(Some(response)),
            measure: None,
        }
    }

    pub(crate) fn boxed(future: impl Future<Output = Response<Body>> + Send + 'static) -> Self {
        Self {
            kind: FutureKind::Boxed(Box::pin(future)),
            measure: None,
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn error(status: StatusCode) -> Self {
        Self::ready(error_response(status))
    }

    /// Counts the response in `metrics`: at once when it is ready (as taking
    /// no time: it was made while routing), else when its head comes.
    pub(crate) fn measured(mut self, metrics: &Arc<RouteMetrics>) -> Self {
        match &self.kind {
            FutureKind::Ready(Some(response)) => {
                metrics.record(response.status().as_u16(), Duration::ZERO);
            }
            FutureKind::Ready(None) => {}
            FutureKind::Boxed(_) => {
                self.measure = Some(Measure {
                    metrics: metrics.clone(),
                    start: Instant::now(),
                });
            }
        }
        self
    }

    /// The status of a response that is ready now.
    pub(crate) fn ready_status(&self) -> Option<StatusCode> {
        match &self.kind {
            FutureKind::Ready(Some(response)) => Some(response.status()),
            _ => None,
        }
    }

    /// Applies `headers` to the response once it comes; at once when it is ready.
    fn with_response_headers(self, headers: Arc<HeaderModifier>) -> Self {
        match self.kind {
            FutureKind::Ready(Some(mut response)) => {
                headers.apply(response.headers_mut());
                Self::ready(response)
            }
            FutureKind::Ready(None) => Self {
                kind: FutureKind::Ready(None),
                measure: self.measure,
            },
            FutureKind::Boxed(future) => Self::boxed(async move {
                let mut response = future.await;
                headers.apply(response.headers_mut());
                response
            }),
        }
    }
}

impl Future for ActionFuture {
    type Output = Result<Response<Body>, std::convert::Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match &mut this.kind {
            FutureKind::Ready(response) => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => Poll::Ready(Ok(error_response(StatusCode::INTERNAL_SERVER_ERROR))),
            },
            FutureKind::Boxed(future) => {
                let response = std::task::ready!(future.as_mut().poll(cx));
                if let Some(measure) = this.measure.take() {
                    let elapsed = measure.start.elapsed();
                    measure.metrics.record(response.status().as_u16(), elapsed);
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}
