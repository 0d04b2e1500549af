//! Revalidation (RFC 9111 4.3): asking the origin whether a stored response
//! is still good, with its validators (`If-None-Match` / `If-Modified-Since`).
//!
//! - 304: the stored headers are updated from it, freshness starts again, the
//!   stored body answers.
//! - A full response: it replaces the stored one (if it may be stored).
//! - 5xx: the stale response answers if `stale-if-error` allows, else the
//!   error goes to the client.
//!
//! In the foreground a request waits for this; with `stale-while-revalidate`
//! the stale response answers at once and one background task per key does it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::{
    AUTHORIZATION, CONTENT_LENGTH, EXPECT, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE,
    IF_UNMODIFIED_SINCE, RANGE, TRANSFER_ENCODING,
};
use http::{HeaderMap, HeaderName, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use scalws_core::Body;
use tower::{Service, ServiceExt};

use crate::cache::Shared;
use crate::cache_control::RequestDirectives;
use crate::conditional;
use crate::entry::{Entry, Exchange};
use crate::fetch;
use crate::policy;
use crate::stats::Counters;
use crate::status::{CacheStatus, mark};
use scalws_core::coalesce::{FlightGuard, Outcome, Role};

/// Revalidates `entry` for `request`, which waits for the answer.
pub(crate) async fn in_foreground<S>(
    shared: &Arc<Shared>,
    inner: S,
    key: String,
    mut request: Request<Body>,
    directives: RequestDirectives,
    entry: Arc<Entry>,
    guard: Option<FlightGuard>,
) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    let authorized = request.headers().contains_key(AUTHORIZATION);
    if authorized && !policy::shareable_with_authorization(&entry.directives) {
        return fetch::fetch(shared, inner, key, request, guard).await;
    }
    let client = request.headers().clone();
    // Without a validator there is nothing to ask but the whole response;
    // `stale-if-error` still applies to it.
    let has_validators = conditional::make_conditional(request.headers_mut(), &entry);
    if has_validators {
        Counters::count(&shared.counters.revalidations);
    }
    let request_time = SystemTime::now();
    let response = fetch::call(inner, request).await;
    let exchange = Exchange::now(&client, request_time);
    let counters = &shared.counters;
    match response.status() {
        StatusCode::NOT_MODIFIED if has_validators => {
            let (refreshed, stored) = refresh(shared, &key, &entry, &exchange, response.headers());
            if let (Some(guard), true) = (guard, stored) {
                guard.finish(Outcome::Stored);
            }
            Counters::count(&counters.hits);
            let answer = refreshed.respond(Instant::now(), false, &client);
            mark(from_origin(answer, response), CacheStatus::Revalidated)
        }
        status if status.is_server_error() => {
            let now = Instant::now();
            if policy::stale_if_error(&entry, now, &directives) {
                tracing::debug!(%key, %status, "cache: stale-if-error");
                Counters::count(&counters.stale_served);
                let answer = entry.respond(now, false, &client);
                mark(from_origin(answer, response), CacheStatus::Stale)
            } else {
                Counters::count(&counters.misses);
                mark(response, CacheStatus::Miss)
            }
        }
        _ => {
            Counters::count(&counters.misses);
            let response = fetch::store(shared, key, &exchange, response, guard);
            mark(response, CacheStatus::Miss)
        }
    }
}

/// A stored `answer` to a request the origin was asked about: it carries the
/// extensions of the origin's `response` (such as the upstream that answered).
fn from_origin(mut answer: Response<Body>, response: Response<Body>) -> Response<Body> {
    *answer.extensions_mut() = response.into_parts().0.extensions;
    answer
}

/// Starts a background revalidation of `entry` for the client `request`, unless
/// one (or any request to the origin for this key) is already in flight.
pub(crate) fn in_background<S>(
    shared: &Arc<Shared>,
    inner: &S,
    key: String,
    request: &Request<Body>,
    entry: &Arc<Entry>,
) where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let Role::Leader(guard) = shared.flights.join(&key) else {
        return;
    };
    tracing::debug!(%key, "cache: stale-while-revalidate, refreshing in the background");
    // The client's request, as a GET without body (a HEAD may have asked).
    let mut revalidation = Request::new(Body::empty());
    *revalidation.method_mut() = Method::GET;
    *revalidation.uri_mut() = request.uri().clone();
    *revalidation.version_mut() = request.version();
    *revalidation.headers_mut() = background_headers(request.headers());
    *revalidation.extensions_mut() = request.extensions().clone();
    let client = request.headers().clone();
    let has_validators = conditional::make_conditional(revalidation.headers_mut(), entry);
    let (shared, inner, entry) = (Arc::clone(shared), inner.clone(), Arc::clone(entry));
    tokio::spawn(async move {
        if has_validators {
            Counters::count(&shared.counters.revalidations);
        }
        let request_time = SystemTime::now();
        let Ok(response) = inner.oneshot(revalidation).await;
        let exchange = Exchange::now(&client, request_time);
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED && has_validators {
            if refresh(&shared, &key, &entry, &exchange, response.headers()).1 {
                guard.finish(Outcome::Stored);
            }
        } else if status.is_server_error() {
            tracing::debug!(%key, %status, "cache: background refresh failed, keeping the stale response");
        } else {
            let response = fetch::store(&shared, key, &exchange, response, Some(guard));
            // Reading the body is what stores it (the tee keeps at most
            // `max_object`); each frame is dropped as soon as it is read.
            drain(response.into_body()).await;
        }
    });
}

/// The client's headers for a background refresh: without framing (the
/// refresh has no body), ranges, the client's own conditions and `Expect`;
/// the cache adds its own validators.
fn background_headers(client: &HeaderMap) -> HeaderMap {
    let dropped: [HeaderName; 9] = [
        CONTENT_LENGTH,
        TRANSFER_ENCODING,
        RANGE,
        IF_RANGE,
        IF_NONE_MATCH,
        IF_MODIFIED_SINCE,
        IF_MATCH,
        IF_UNMODIFIED_SINCE,
        EXPECT,
    ];
    let mut headers = HeaderMap::with_capacity(client.keys_len());
    for (name, value) in client {
        if !dropped.contains(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// Reads `body` to its end frame by frame, keeping nothing.
pub(crate) async fn drain(mut body: Body) {
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
}

/// Applies a 304 to `entry`: stores the refreshed response (or removes the
/// URL if it may no longer be stored). Returns it, and whether it was stored.
fn refresh(
    shared: &Shared,
    key: &str,
    entry: &Entry,
    exchange: &Exchange<'_>,
    not_modified: &HeaderMap,
) -> (Arc<Entry>, bool) {
    let (refreshed, storable) = entry.refreshed(&shared.options, exchange, not_modified);
    let refreshed = Arc::new(refreshed);
    match storable {
        Ok(()) => {
            tracing::debug!(%key, "cache: revalidated (304)");
            shared.store.insert(key.to_owned(), Arc::clone(&refreshed));
            (refreshed, true)
        }
        Err(reason) => {
            tracing::debug!(%key, reason = reason.as_str(), "cache: revalidated, no longer storable");
            shared.store.remove(key);
            (refreshed, false)
        }
    }
}
