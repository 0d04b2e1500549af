//! The cache service: the life of a request, phase by phase.
//!
//! 1. **Method.** GET and HEAD are looked up; any other method passes
//!    through, and an unsafe one (not OPTIONS/TRACE) that succeeds
//!    invalidates its URL (RFC 9111 4.4).
//! 2. **Request directives.** `Cache-Control: no-store` bypasses the cache.
//! 3. **Key.** scheme + host + path-and-query ([`crate::key`]); a request
//!    without a safe host bypasses the cache.
//! 4. **Lookup** of the variant the request selects ([`crate::vary`]), and
//!    [`crate::policy::usability`]: fresh -> answered here and now, without
//!    touching the request body (dropped with the request); stale within
//!    `stale-while-revalidate` -> answered stale, refreshed in the background.
//! 5. **Origin.** HEAD and range requests go as they are and are not
//!    stored (a range request may be answered from a stored 200, whole). GET joins the key's
//!    flight ([`crate::coalesce`]), decides again after waiting, then
//!    revalidates a stored response ([`crate::revalidate`]) or fetches a new
//!    one ([`crate::fetch`]), whose body is teed into the store as it streams
//!    ([`crate::body`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::header::{AUTHORIZATION, RANGE};
use http::{Method, Request, Response, StatusCode};
use scalws_core::error::error_response;
use scalws_core::{Body, Observed};
use tower::Service;

use crate::cache::Shared;
use crate::cache_control::RequestDirectives;
use crate::future::ResponseFuture;
use crate::policy::{self, Use};
use crate::stats::Counters;
use crate::status::{CacheStatus, mark};
use crate::{fetch, key, revalidate};

/// A service that answers from a [`Cache`](crate::Cache) what it can and asks
/// the inner service (the origin) the rest. Made by [`CacheLayer`](crate::CacheLayer).
pub struct CacheService<S> {
    inner: S,
    shared: Arc<Shared>,
    partition: Arc<str>,
}

impl<S> CacheService<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>, partition: Arc<str>) -> Self {
        Self {
            inner,
            shared,
            partition,
        }
    }
}

impl<S: Clone> Clone for CacheService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
            partition: Arc::clone(&self.partition),
        }
    }
}

impl<S> std::fmt::Debug for CacheService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheService").finish_non_exhaustive()
    }
}

impl<S> Service<Request<Body>> for CacheService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let head = match *request.method() {
            Method::GET => false,
            Method::HEAD => true,
            _ => return self.other_method(request),
        };
        let directives = RequestDirectives::of(request.headers());
        if directives.no_store {
            return self.bypass(request, "request no-store");
        }
        let Some(key) = key::primary_key(&request, &self.partition) else {
            return self.bypass(request, "no cacheable host");
        };
        let now = Instant::now();
        let authorized = request.headers().contains_key(AUTHORIZATION);
        if let Some(entry) = self.shared.store.lookup(&key, request.headers()) {
            let counters = &self.shared.counters;
            // Answers from the store say what they are only to an observer.
            let observed = request.extensions().get::<Observed>().is_some();
            let mark = |response, status| match observed {
                true => mark(response, status),
                false => response,
            };
            match policy::usability(&entry, now, &directives, authorized) {
                Use::Fresh => {
                    Counters::count(&counters.hits);
                    let response = entry.respond(now, head, request.headers());
                    return ResponseFuture::ready(mark(response, CacheStatus::Hit));
                }
                Use::Stale => {
                    Counters::count(&counters.stale_served);
                    let response = entry.respond(now, head, request.headers());
                    return ResponseFuture::ready(mark(response, CacheStatus::Stale));
                }
                Use::StaleWhileRevalidate => {
                    Counters::count(&counters.stale_served);
                    revalidate::in_background(&self.shared, &self.inner, key, &request, &entry);
                    let response = entry.respond(now, head, request.headers());
                    return ResponseFuture::ready(mark(response, CacheStatus::Stale));
                }
                Use::Revalidate | Use::Unusable => {}
            }
        }
        self.origin(key, request, head, directives)
    }
}

impl<S> CacheService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    /// Phase 5: nothing stored can answer now.
    fn origin(
        &mut self,
        key: String,
        request: Request<Body>,
        head: bool,
        directives: RequestDirectives,
    ) -> ResponseFuture<S::Future> {
        let counters = &self.shared.counters;
        if directives.only_if_cached {
            Counters::count(&counters.misses);
            let response = error_response(StatusCode::GATEWAY_TIMEOUT);
            return ResponseFuture::ready(mark(response, CacheStatus::Miss));
        }
        // HEAD is not stored; a range request gets a 206, which is not
        // stored either: neither leads a flight that others would wait on.
        if head || request.headers().contains_key(RANGE) {
            Counters::count(&counters.misses);
            return ResponseFuture::inner(self.inner.call(request), CacheStatus::Miss);
        }
        // The service made ready by poll_ready goes with the request; a clone stays.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        ResponseFuture::boxed(fetch::to_origin(
            Arc::clone(&self.shared),
            ready,
            key,
            request,
            directives,
        ))
    }

    #[cold]
    #[inline(never)]
    fn bypass(&mut self, request: Request<Body>, why: &'static str) -> ResponseFuture<S::Future> {
        tracing::debug!(why, "cache: bypass");
        Counters::count(&self.shared.counters.bypasses);
        ResponseFuture::inner(self.inner.call(request), CacheStatus::Bypass)
    }

    /// Phase 1 for methods other than GET and HEAD.
    #[cold]
    #[inline(never)]
    fn other_method(&mut self, request: Request<Body>) -> ResponseFuture<S::Future> {
        Counters::count(&self.shared.counters.bypasses);
        let safe = matches!(*request.method(), Method::OPTIONS | Method::TRACE);
        let key = if safe {
            None
        } else {
            key::primary_key(&request, &self.partition)
        };
        let future = self.inner.call(request);
        let Some(key) = key else {
            return ResponseFuture::inner(future, CacheStatus::Bypass);
        };
        let shared = Arc::clone(&self.shared);
        ResponseFuture::boxed(async move {
            let response = match future.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let status = response.status();
            if status.is_success() || status.is_redirection() {
                let removed = shared.store.remove(&key);
                tracing::debug!(%key, removed, "cache: invalidated by an unsafe method");
            }
            mark(response, CacheStatus::Bypass)
        })
    }
}
