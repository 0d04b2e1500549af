//! To the origin: the coalesced path of a GET that nothing stored could
//! answer at once, and the storing of what the origin sends back.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::AUTHORIZATION;
use http::{Request, Response};
use scalws_core::Body;
use tower::Service;

use crate::body::TeeBody;
use crate::cache::Shared;
use crate::cache_control::RequestDirectives;
use crate::entry::{Entry, Exchange, Head};
use crate::policy::{self, Use};
use crate::revalidate;
use crate::stats::Counters;
use crate::status::{CacheStatus, mark};
use scalws_core::coalesce::{FlightGuard, Outcome, Role};

/// A GET that goes to the origin: coalesced with concurrent ones for the same
/// key, then answered from what the cache holds after the wait, or revalidated,
/// or fetched.
///
/// Flights are per URL, not per `Vary` variant (the variant is known only
/// from the response): a follower whose variant differs from the one the
/// leader stored goes to the origin after the leader, without waiting longer.
pub(crate) async fn to_origin<S>(
    shared: Arc<Shared>,
    inner: S,
    key: String,
    request: Request<Body>,
    directives: RequestDirectives,
) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    let guard = match shared.flights.join(&key) {
        Role::Leader(guard) => Some(guard),
        Role::Follower(waiter) => {
            let outcome = waiter.wait(shared.options.coalesce_timeout).await;
            tracing::debug!(%key, ?outcome, "cache: waited for a concurrent request");
            None
        }
    };
    // Decide again: a concurrent request may have stored or refreshed the
    // response meanwhile (followers after waiting; a leader that raced one).
    let now = Instant::now();
    let authorized = request.headers().contains_key(AUTHORIZATION);
    let entry = shared.store.lookup(&key, request.headers());
    let usable = entry
        .as_ref()
        .map(|e| policy::usability(e, now, &directives, authorized));
    match (entry, usable) {
        (Some(entry), Some(Use::Fresh | Use::Stale)) => {
            if let Some(guard) = guard {
                guard.finish(Outcome::Stored);
            }
            let (counter, status) = if usable == Some(Use::Fresh) {
                (&shared.counters.hits, CacheStatus::Hit)
            } else {
                (&shared.counters.stale_served, CacheStatus::Stale)
            };
            Counters::count(counter);
            mark(entry.respond(now, false, request.headers()), status)
        }
        (Some(entry), Some(Use::Revalidate | Use::StaleWhileRevalidate)) => {
            revalidate::in_foreground(&shared, inner, key, request, directives, entry, guard).await
        }
        _ => fetch(&shared, inner, key, request, guard).await,
    }
}

/// Asks the origin for a full response and stores it if it may.
pub(crate) async fn fetch<S>(
    shared: &Arc<Shared>,
    inner: S,
    key: String,
    request: Request<Body>,
    guard: Option<FlightGuard>,
) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    Counters::count(&shared.counters.misses);
    let client = request.headers().clone();
    let request_time = SystemTime::now();
    let response = call(inner, request).await;
    let response = store(
        shared,
        key,
        &Exchange::now(&client, request_time),
        response,
        guard,
    );
    mark(response, CacheStatus::Miss)
}

/// Calls a service made ready before.
pub(crate) async fn call<S>(mut inner: S, request: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    match inner.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// The origin's `response`, teed into the store if it may be stored. The
/// flight (if this request leads one) ends when the body does.
pub(crate) fn store(
    shared: &Arc<Shared>,
    key: String,
    exchange: &Exchange<'_>,
    response: Response<Body>,
    guard: Option<FlightGuard>,
) -> Response<Body> {
    let head = match Head::evaluate(
        &shared.options,
        exchange,
        response.status(),
        response.headers(),
    ) {
        Ok(head) => head,
        Err(reason) => {
            tracing::debug!(%key, status = %response.status(), reason = reason.as_str(), "cache: not stored");
            return response;
        }
    };
    let expected = head.content_length;
    let limit = shared.options.max_object;
    let store = Arc::clone(shared);
    let (parts, body) = response.into_parts();
    let tee = TeeBody::new(body, limit, expected, move |bytes| {
        tracing::debug!(%key, len = bytes.len(), "cache: stored");
        store.store.insert(key, Arc::new(Entry::new(head, bytes)));
        Counters::count(&store.counters.stores);
        if let Some(guard) = guard {
            guard.finish(Outcome::Stored);
        }
    });
    Response::from_parts(parts, Body::new(tee))
}
