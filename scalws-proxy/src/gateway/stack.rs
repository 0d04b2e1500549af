//! The standard stack, top to bottom. This file is the one place that shows
//! (and changes) the order a request goes through; each stage is also a
//! public service or layer of its own (named in brackets) for embedders who
//! compose a stack themselves.
//!
//! Around the gateway, outermost first, as `scalwsd` stacks them:
//!
//! 1. **Request limits and the edge**: head size and count (431), declared
//!    and streamed body size (413), the header and keep-alive timeouts, a
//!    panic below answered 500, and no body on HEAD and 1xx/204/304 answers:
//!    the server's connection edge ([`scalws_core::Server`]). For a gateway
//!    mounted in another server, [`RequestLimitsLayer`](scalws_core::RequestLimitsLayer)
//!    does the body and head limits and the panic (timeouts and bodiless
//!    answers stay that server's job).
//! 2. **Access log** ([`AccessLogLayer`](crate::access_log::AccessLogLayer)):
//!    one line per request when its response body ends (what the edge
//!    refuses before it, an early 413, is not logged).
//!
//! In the gateway ([`Gateway`]; [`SharedGateway`](super::SharedGateway) picks
//! the gateway current when the request arrives):
//!
//! 3. **Listener**: the host table of the listener the request came on
//!    ([`ConnInfo`] in its extensions; without one, the first listener's;
//!    a listener removed by a reload keeps its table while it drains).
//! 4. **Host** ([`HostRouter`](super::HostRouter)): `:authority` or `Host`,
//!    normalised; exact name, then `*.`, `**.` and `*`. Missing or invalid:
//!    400; no application: 404.
//! 5. **Misdirected**: a TLS request for a host its connection's certificate
//!    (chosen by SNI) does not cover: 421.
//! 6. **https_redirect** ([`HttpsRedirect`](crate::HttpsRedirect)): only for
//!    an application whose `redirect_check` is set (it or one of its routes
//!    has `https_redirect`): a plain-HTTP request it applies to gets 308.
//!    Everything else pays that one flag test.
//! 7. **Application layers** (the embedder's,
//!    [`ApplicationBuilder::layer`](crate::ApplicationBuilder::layer)).
//! 8. **Route** ([`RouteRouter`](crate::RouteRouter)): the path normalised
//!    (a path escaping the root: 400), then the route table (prefix fast
//!    path, or the full precedence match); none: 404; wrong method only: 405
//!    with `Allow`.
//! 9. **Route metrics** ([`MetricsLayer`](crate::metrics::MetricsLayer)):
//!    status class and latency to the response head.
//! 10. **Route layers** (the embedder's, [`Route::layer`]).
//! 11. **rewrite** ([`PolicyLayer`](crate::PolicyLayer) of a
//!     [`Rewrite`](crate::Rewrite)), then **request_headers**
//!     ([`RequestHeaders`](crate::RequestHeaders)).
//! 12. **timeout** ([`TimeoutLayer`](crate::TimeoutLayer)): 504 when the
//!     action's response head has not come in time.
//! 13. **Action** ([`Action`], each a service): `respond`, `redirect`,
//!     `static`, `backends` (a [`Split`](crate::Split)), the embedder's
//!     service, or `proxy`: the response cache
//!     ([`CacheLayer`](scalws_cache::CacheLayer)), the proxy's header
//!     hygiene, the upstream layers (the embedder's,
//!     [`Proxy::upstream_layer`](crate::Proxy::upstream_layer)), the
//!     [`UpstreamPool`](crate::upstream::UpstreamPool).
//! 14. On the way back: **response_headers**
//!     ([`ResponseHeadersLayer`](crate::ResponseHeadersLayer)) on every
//!     answer of steps 11 to 13, errors included (an answer the route's
//!     embedder layers make themselves is outside them).
//!
//! Answers made before a route (400, 404, 405, 421, 308) are counted in the
//! gateway's unrouted metrics, when it has them.
//!
//! Inside the gateway the stages are called directly, not through a layer
//! each: one future type ([`ActionFuture`]) from top to bottom, a box only
//! for a future that waits (static files, proxy, and a timeout or response
//! headers around one) and at the embedder's points, and a stage a request
//! does not need costs it one test.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response};
use scalws_core::{Body, ConnInfo};

use super::Gateway;
use super::hosts::select_host;
use crate::action::{ActionFuture, call_boxed};
use crate::application::{Application, ApplicationRoutes, select_route};
use crate::observe::metrics::RouteMetrics;
use crate::route::policy::https_redirect;
use crate::route::{Policies, Route, RouteInner};
use crate::service::{Answer, HttpService};

impl Gateway {
    /// Steps 3 to 14, for one request.
    #[inline]
    pub(crate) fn call_ref(&self, request: Request<Body>) -> ActionFuture {
        let (parts, body) = request.into_parts();
        let unrouted = self.inner.unrouted.as_deref();
        // One extension lookup serves the listener table and the 421 check.
        let conn = parts.extensions.get::<ConnInfo>();
        let (application, host) = match select_host(self.hosts_for(conn), &parts, conn) {
            Ok(selected) => selected,
            Err(status) => return unrouted_answer(ActionFuture::error(status), unrouted),
        };
        if application.redirect_check
            && let Some(redirect) =
                https_redirect(application, self.inner.https_port, &parts, &host)
        {
            return unrouted_answer(redirect, unrouted);
        }
        drop(host);
        if let Some(layered) = &application.layered {
            return through_layers(application, layered, parts, body);
        }
        to_route(application, parts, body, unrouted)
    }
}

/// Steps 8 to 14 in one application; an answer no route made (404, 405)
/// is counted in `unrouted`. Always inlined, as the steps below: a call each
/// would move the request head (and the future) once more. (Each refusal
/// counts itself where it is made, so that no flag travels back with the
/// future: returning the two together cost two more moves of the future.)
#[inline(always)]
fn to_route(
    application: &Application,
    mut parts: Parts,
    body: Body,
    unrouted: Option<&RouteMetrics>,
) -> ActionFuture {
    match select_route(&application.routes, &mut parts) {
        Ok(route) => route.call(parts, body),
        Err(refusal) => unrouted_answer(ActionFuture::ready(refusal.into_response()), unrouted),
    }
}

/// Step 7: the application's embedder layers, which end in [`ApplicationRoutes`].
#[cold]
#[inline(never)]
fn through_layers(
    application: &Arc<Application>,
    layered: &HttpService,
    parts: Parts,
    body: Body,
) -> ActionFuture {
    // The layers reach the application through a weak reference: this one
    // keeps it alive until they have answered, even past a reload.
    let alive = application.clone();
    let call = call_boxed(layered, Request::from_parts(parts, body));
    ActionFuture::boxed(async move {
        let response = call.await.unwrap_or_else(|never| match never {});
        drop(alive);
        response
    })
}

/// An answer no route made (400, 404, 405, 421, 308: all ready at once),
/// counted in the unrouted metrics when there are some.
#[cold]
#[inline(never)]
fn unrouted_answer(mut future: ActionFuture, metrics: Option<&RouteMetrics>) -> ActionFuture {
    if let Some(metrics) = metrics
        && let Some(status) = future.ready_status()
    {
        metrics.record(status.as_u16(), std::time::Duration::ZERO);
    }
    future
}

impl Route {
    /// Steps 9 to 14 for a routed request.
    #[inline(always)]
    pub(crate) fn call(&self, parts: Parts, body: Body) -> ActionFuture {
        // The common route, no layer and no policy: straight to the action.
        let future = if self.layered.is_none() && self.inner.policies.is_none() {
            self.inner.act(parts, body)
        } else {
            self.call_layered_or_with_policies(parts, body)
        };
        match &self.metrics {
            None => future,
            Some(metrics) => future.measured(metrics),
        }
    }

    #[inline(never)]
    fn call_layered_or_with_policies(&self, parts: Parts, body: Body) -> ActionFuture {
        match &self.layered {
            None => self.inner.run(parts, body),
            Some(layered) => call_boxed(&layered.service, Request::from_parts(parts, body)),
        }
    }
}

impl RouteInner {
    /// Steps 11 to 14.
    #[inline]
    fn run(&self, parts: Parts, body: Body) -> ActionFuture {
        match &self.policies {
            None => self.act(parts, body),
            Some(policies) => self.run_with_policies(policies, parts, body),
        }
    }

    #[inline(never)]
    fn run_with_policies(&self, policies: &Policies, mut parts: Parts, body: Body) -> ActionFuture {
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

    /// Steps 12 and 13: the action under the route's timeout.
    #[inline(always)]
    fn act(&self, parts: Parts, body: Body) -> ActionFuture {
        let future = self.action.act(parts, body);
        match self.timeout {
            None => future,
            Some(limit) => future.with_timeout(limit),
        }
    }
}

/// What a route's embedder layers wrap, called by reference.
impl Answer for RouteInner {
    fn answer(&self, request: Request<Body>) -> ActionFuture {
        let (parts, body) = request.into_parts();
        self.run(parts, body)
    }
}

/// What an application's embedder layers wrap: steps 8 to 14.
impl Answer for ApplicationRoutes {
    fn answer(&self, request: Request<Body>) -> ActionFuture {
        let Some(application) = self.0.upgrade() else {
            // Only a layer that kept the request past its own answer gets here.
            return ActionFuture::error(http::StatusCode::SERVICE_UNAVAILABLE);
        };
        let (parts, body) = request.into_parts();
        to_route(&application, parts, body, application.unrouted.as_deref())
    }
}

impl Answer for Gateway {
    fn answer(&self, request: Request<Body>) -> ActionFuture {
        self.call_ref(request)
    }
}

impl tower::Service<Request<Body>> for Gateway {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        self.call_ref(request)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use http::{Method, StatusCode, header};
    use scalws_router::RouteSpec;

    use super::*;
    use crate::{Action, Respond};

    /// Every answer no route made (400, 404 for the host and for the path,
    /// 405, 308, and a 404 made behind an application's embedder layer) is
    /// counted once in the unrouted metrics; a routed one is not. (The 421
    /// needs a TLS connection: `tests/embedding.rs` counts it.)
    #[tokio::test]
    async fn each_answer_no_route_made_is_counted_once() {
        let unrouted = Arc::new(RouteMetrics::default());
        let ok = || Action::Respond(Respond::new(StatusCode::OK, "ok"));
        let site = Application::builder("site")
            .domain("site.test")
            .unwrap()
            .route(RouteSpec::exact("/ok", ok()))
            .unwrap()
            .route(RouteSpec::exact("/get", ok()).methods([Method::GET]))
            .unwrap();
        let secure = Application::builder("secure")
            .domain("secure.test")
            .unwrap()
            .https_redirect(true)
            .route(RouteSpec::prefix("/", ok()))
            .unwrap();
        let layered = Application::builder("layered")
            .domain("layered.test")
            .unwrap()
            .layer(tower::layer::layer_fn(|inner: crate::HttpService| inner))
            .route(RouteSpec::exact("/ok", ok()))
            .unwrap();
        let gateway = Gateway::builder()
            .listener("http")
            .https_port(443)
            .unrouted_metrics(unrouted.clone())
            .application(site)
            .application(secure)
            .application(layered)
            .build()
            .unwrap();
        let call = |method: Method, host: Option<&str>, path: &str| {
            let mut request = Request::builder().method(method).uri(path);
            if let Some(host) = host {
                request = request.header(header::HOST, host);
            }
            let mut request = request.body(Body::empty()).unwrap();
            request
                .extensions_mut()
                .insert(crate::gateway::plain_connection("http"));
            gateway.call_ref(request)
        };
        let status = |method: Method, host: Option<&str>, path: &str| {
            call(method, host, path).ready_status().unwrap().as_u16()
        };
        assert_eq!(status(Method::GET, Some("site.test"), "/ok"), 200);
        assert_eq!(unrouted.snapshot().count(), 0, "a routed answer");
        assert_eq!(status(Method::GET, None, "/ok"), 400);
        assert_eq!(status(Method::GET, Some("nobody.test"), "/ok"), 404);
        assert_eq!(status(Method::GET, Some("site.test"), "/missing"), 404);
        assert_eq!(status(Method::POST, Some("site.test"), "/get"), 405);
        assert_eq!(status(Method::GET, Some("secure.test"), "/"), 308);
        // Behind a layer the answer is a future to await.
        let layered = |path| async move {
            let response = call(Method::GET, Some("layered.test"), path).await;
            response.unwrap().status().as_u16()
        };
        assert_eq!(layered("/ok").await, 200);
        assert_eq!(layered("/missing").await, 404);
        let counted = unrouted.snapshot();
        assert_eq!(counted.classes, [0, 0, 1, 5, 0]);
        assert_eq!(counted.count(), 6);
    }
}
