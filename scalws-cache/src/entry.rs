//! A stored response: its head as stored, its body, and what the cache
//! computed when it arrived (freshness lifetime, initial age, secondary key).

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{self, AGE, CONTENT_LENGTH, DATE, ETAG, LAST_MODIFIED};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use scalws_core::Body;

use crate::cache_control::ResponseDirectives;
use crate::conditional;
use crate::options::CacheOptions;
use crate::policy::{self, Lifetime, NotStorable};
use crate::vary::SecondaryKey;

/// Fixed cost of an entry in the size bound, beyond its bytes.
const ENTRY_OVERHEAD: usize = 256;
/// Cost of one header line beyond its name and value.
const HEADER_OVERHEAD: usize = 32;

/// One request/response exchange with the origin, as the cache saw it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange<'a> {
    /// The request's headers (for `Vary` and `Authorization`).
    pub(crate) request: &'a HeaderMap,
    pub(crate) request_time: SystemTime,
    pub(crate) response_time: SystemTime,
    pub(crate) received: Instant,
}

impl<'a> Exchange<'a> {
    /// An exchange whose request (with `request` headers) was sent at `request_time`
    /// and whose response arrived just now.
    pub(crate) fn now(request: &'a HeaderMap, request_time: SystemTime) -> Self {
        Self {
            request,
            request_time,
            response_time: SystemTime::now(),
            received: Instant::now(),
        }
    }
}

/// A storable response head, waiting for its body.
#[derive(Debug)]
pub(crate) struct Head {
    status: StatusCode,
    headers: HeaderMap,
    vary: SecondaryKey,
    directives: ResponseDirectives,
    lifetime: Duration,
    initial_age: Duration,
    received: Instant,
    /// The `Content-Length` the response announced.
    pub(crate) content_length: Option<u64>,
}

impl Head {
    /// The head to store for a response, or why it may not be stored.
    pub(crate) fn evaluate(
        options: &CacheOptions,
        exchange: &Exchange<'_>,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Result<Self, NotStorable> {
        let directives = ResponseDirectives::parse(headers);
        let authorized = exchange.request.contains_key(header::AUTHORIZATION);
        policy::check_storable(status, headers, &directives, authorized)?;
        let vary =
            SecondaryKey::new(headers, exchange.request).map_err(|_| NotStorable::VaryStar)?;
        let content_length = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if content_length.is_some_and(|len| len > options.max_object) {
            return Err(NotStorable::TooLarge);
        }
        let date = policy::date(headers).unwrap_or(exchange.response_time);
        let lifetime = Lifetime::of(&directives, headers, date, options.default_ttl);
        if !lifetime.storable(has_validator(headers), directives.no_cache) {
            return Err(NotStorable::NoFreshness);
        }
        Ok(Self {
            status,
            headers: stored_headers(headers, exchange.response_time),
            vary,
            directives,
            lifetime: lifetime.lifetime,
            initial_age: policy::initial_age(
                policy::age_header(headers),
                date,
                exchange.request_time,
                exchange.response_time,
            ),
            received: exchange.received,
            content_length,
        })
    }
}

/// A stored response.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) status: StatusCode,
    /// As received, less `Age` and hop-by-hop fields, plus `Date` if it had
    /// none and `Content-Length`.
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) vary: SecondaryKey,
    pub(crate) directives: ResponseDirectives,
    pub(crate) lifetime: Duration,
    initial_age: Duration,
    received: Instant,
    weight: usize,
}

impl Entry {
    /// The stored response made of `head` and its whole `body`.
    pub(crate) fn new(head: Head, body: Bytes) -> Self {
        let Head {
            status,
            mut headers,
            vary,
            directives,
            lifetime,
            initial_age,
            received,
            ..
        } = head;
        if status != StatusCode::NO_CONTENT {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        let header_bytes: usize = headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + HEADER_OVERHEAD)
            .sum();
        let weight = ENTRY_OVERHEAD + body.len() + header_bytes + vary.weight();
        Self {
            status,
            headers,
            body,
            vary,
            directives,
            lifetime,
            initial_age,
            received,
            weight,
        }
    }

    /// Its current age (RFC 9111 4.2.3): corrected initial age plus resident time.
    #[inline]
    pub(crate) fn age(&self, now: Instant) -> Duration {
        self.initial_age
            .saturating_add(now.saturating_duration_since(self.received))
    }

    /// Bytes it costs in the size bound (without its key).
    pub(crate) fn weight(&self) -> usize {
        self.weight
    }

    pub(crate) fn has_validator(&self) -> bool {
        has_validator(&self.headers)
    }

    /// How long after `now` it stays of any use when it cannot be revalidated
    /// (no validator): until the end of its freshness and stale allowances.
    /// `None`: keep it until the size bound evicts it.
    pub(crate) fn useful_for(&self, now: Instant) -> Option<Duration> {
        if self.has_validator() {
            return None;
        }
        let d = &self.directives;
        let grace = d.stale_while_revalidate.max(d.stale_if_error).unwrap_or(0);
        let end = self.lifetime.saturating_add(Duration::from_secs(grace));
        Some(end.saturating_sub(self.age(now)))
    }

    /// The response for a request with `request` headers: the stored one with
    /// `Age` (no body for HEAD), or a 304 if the request's own conditions hold.
    pub(crate) fn respond(&self, now: Instant, head: bool, request: &HeaderMap) -> Response<Body> {
        let age = HeaderValue::from(self.age(now).as_secs());
        if conditional::has_conditions(request) && conditional::not_modified(self, request) {
            return self.not_modified(age);
        }
        let body = if head {
            Body::empty()
        } else {
            Body::full(self.body.clone())
        };
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        *headers = self.headers.clone();
        headers.insert(AGE, age);
        response
    }

    /// A 304 with the fields RFC 9110 15.4.5 asks for.
    #[cold]
    fn not_modified(&self, age: HeaderValue) -> Response<Body> {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        let headers = response.headers_mut();
        for name in [
            header::CACHE_CONTROL,
            header::CONTENT_LOCATION,
            DATE,
            ETAG,
            header::EXPIRES,
            header::VARY,
            LAST_MODIFIED,
        ] {
            for value in self.headers.get_all(&name) {
                headers.append(name.clone(), value.clone());
            }
        }
        headers.insert(AGE, age);
        response
    }

    /// This entry updated by a 304 (RFC 9111 3.2 and 4.3.4), and whether the
    /// result may still be stored.
    pub(crate) fn refreshed(
        &self,
        options: &CacheOptions,
        exchange: &Exchange<'_>,
        not_modified: &HeaderMap,
    ) -> (Self, Result<(), NotStorable>) {
        let mut headers = self.headers.clone();
        let mut replaced: Vec<&HeaderName> = Vec::new();
        for (name, value) in not_modified {
            if !updatable(name, not_modified) {
                continue;
            }
            if !replaced.contains(&name) {
                headers.remove(name);
                replaced.push(name);
            }
            headers.append(name.clone(), value.clone());
        }
        if !not_modified.contains_key(DATE) {
            headers.insert(DATE, http_date(exchange.response_time));
        }
        let directives = ResponseDirectives::parse(&headers);
        let date = policy::date(&headers).unwrap_or(exchange.response_time);
        let lifetime = Lifetime::of(&directives, &headers, date, options.default_ttl);
        let storable = if directives.no_store {
            Err(NotStorable::NoStore)
        } else if directives.private {
            Err(NotStorable::Private)
        } else if !lifetime.storable(has_validator(&headers), directives.no_cache) {
            Err(NotStorable::NoFreshness)
        } else {
            Ok(())
        };
        let head = Head {
            status: self.status,
            headers,
            vary: self.vary.clone(),
            directives,
            lifetime: lifetime.lifetime,
            initial_age: policy::initial_age(
                policy::age_header(not_modified),
                date,
                exchange.request_time,
                exchange.response_time,
            ),
            received: exchange.received,
            content_length: None,
        };
        (Self::new(head, self.body.clone()), storable)
    }
}

fn has_validator(headers: &HeaderMap) -> bool {
    headers.contains_key(ETAG) || headers.contains_key(LAST_MODIFIED)
}

fn http_date(time: SystemTime) -> HeaderValue {
    HeaderValue::from_str(&httpdate::fmt_http_date(time))
        .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

/// Hop-by-hop fields (RFC 9110 7.6.1): never stored. The proxy removes them
/// already; the cache does not rely on it.
fn hop_by_hop(name: &HeaderName, headers: &HeaderMap) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    ) || headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|listed| listed.trim().eq_ignore_ascii_case(name.as_str()))
        })
    })
}

/// A response's headers as stored: no `Age` (it is computed on each use) and
/// no hop-by-hop field; a `Date` if the origin sent none (RFC 9110 6.6.1).
fn stored_headers(headers: &HeaderMap, response_time: SystemTime) -> HeaderMap {
    let mut stored = HeaderMap::with_capacity(headers.keys_len() + 1);
    for (name, value) in headers {
        if *name != AGE && !hop_by_hop(name, headers) {
            stored.append(name.clone(), value.clone());
        }
    }
    if !stored.contains_key(DATE) {
        stored.insert(DATE, http_date(response_time));
    }
    stored
}

/// Whether a 304's field `name` replaces the stored one. Not: the body's
/// framing and coding (the stored body stays as it was), `Age` (computed),
/// `Set-Cookie` (never stored by a shared cache), `Vary` (the stored
/// secondary key stays), hop-by-hop fields.
fn updatable(name: &HeaderName, not_modified: &HeaderMap) -> bool {
    !matches!(
        name.as_str(),
        "content-length" | "content-encoding" | "content-range" | "age" | "set-cookie" | "vary"
    ) && !hop_by_hop(name, not_modified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, v.parse().expect("value"));
        }
        h
    }

    fn stored(response: &HeaderMap, body: &'static str) -> Entry {
        let request = HeaderMap::new();
        let exchange = Exchange::now(&request, SystemTime::now());
        let head = Head::evaluate(
            &CacheOptions::default(),
            &exchange,
            StatusCode::OK,
            response,
        )
        .expect("storable");
        Entry::new(head, Bytes::from_static(body.as_bytes()))
    }

    #[test]
    fn stored_headers_drop_age_and_hop_by_hop_and_gain_date_and_length() {
        let entry = stored(
            &headers(&[
                ("cache-control", "max-age=60"),
                ("age", "7"),
                ("connection", "x-private"),
                ("x-private", "1"),
                ("transfer-encoding", "chunked"),
                ("x-kept", "yes"),
            ]),
            "hello",
        );
        assert!(entry.headers.get(AGE).is_none());
        assert!(entry.headers.get("x-private").is_none());
        assert!(entry.headers.get("transfer-encoding").is_none());
        assert_eq!(entry.headers["x-kept"], "yes");
        assert_eq!(entry.headers[CONTENT_LENGTH], "5");
        assert!(entry.headers.contains_key(DATE));
        assert!(entry.age(Instant::now()) >= Duration::from_secs(7));
    }

    #[test]
    fn head_answer_has_the_headers_and_no_body() {
        let entry = stored(&headers(&[("cache-control", "max-age=60")]), "hello");
        let response = entry.respond(Instant::now(), true, &HeaderMap::new());
        assert_eq!(response.headers()[CONTENT_LENGTH], "5");
        assert_eq!(response.headers()[AGE], "0");
        assert!(http_body::Body::is_end_stream(response.body()));
    }

    #[test]
    fn a_304_updates_all_but_framing_and_cookies() {
        let entry = stored(
            &headers(&[
                ("cache-control", "max-age=0"),
                ("etag", "\"a\""),
                ("x-v", "1"),
            ]),
            "hello",
        );
        let request = HeaderMap::new();
        let exchange = Exchange::now(&request, SystemTime::now());
        let not_modified = headers(&[
            ("cache-control", "max-age=60"),
            ("x-v", "2"),
            ("content-length", "0"),
            ("set-cookie", "a=b"),
        ]);
        let (refreshed, storable) =
            entry.refreshed(&CacheOptions::default(), &exchange, &not_modified);
        assert!(storable.is_ok());
        assert_eq!(refreshed.headers["x-v"], "2");
        assert_eq!(refreshed.headers[CONTENT_LENGTH], "5");
        assert!(refreshed.headers.get("set-cookie").is_none());
        assert_eq!(refreshed.lifetime, Duration::from_secs(60));
    }
}
