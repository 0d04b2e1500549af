//! The rules of RFC 9111 for a shared cache: what may be stored (3, 3.5),
//! for how long (4.2.1), how old it is (4.2.3), and whether a stored response
//! may answer a request (4, 4.2.4, 5.2.1).

use std::time::{Duration, Instant, SystemTime};

use http::header::{AGE, DATE, EXPIRES, SET_COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::cache_control::{RequestDirectives, ResponseDirectives};
use crate::entry::Entry;

/// Why a response is not stored (for the debug log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotStorable {
    Status,
    NoStore,
    Private,
    SetCookie,
    Authorization,
    VaryStar,
    NoFreshness,
    TooLarge,
}

impl NotStorable {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Status => "status not cacheable",
            Self::NoStore => "no-store",
            Self::Private => "private",
            Self::SetCookie => "set-cookie",
            Self::Authorization => "authorized request without public/s-maxage/must-revalidate",
            Self::VaryStar => "vary: *",
            Self::NoFreshness => "no freshness and no validator",
            Self::TooLarge => "content-length over max_object",
        }
    }
}

/// The statuses stored by default (RFC 9110 15.1 "heuristically cacheable"),
/// less 206 (ranges are not stored) and 501 (no 5xx is ever stored).
pub(crate) fn cacheable_status(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414
    )
}

/// The response checks of RFC 9111 3 and 3.5 that do not need the body.
pub(crate) fn check_storable(
    status: StatusCode,
    headers: &HeaderMap,
    directives: &ResponseDirectives,
    request_has_authorization: bool,
) -> Result<(), NotStorable> {
    if !cacheable_status(status) {
        return Err(NotStorable::Status);
    }
    if directives.no_store {
        return Err(NotStorable::NoStore);
    }
    if directives.private {
        return Err(NotStorable::Private);
    }
    if headers.contains_key(SET_COOKIE) {
        return Err(NotStorable::SetCookie);
    }
    if request_has_authorization && !shareable_with_authorization(directives) {
        return Err(NotStorable::Authorization);
    }
    Ok(())
}

/// RFC 9111 3.5: a response to an authorized request may be stored (and a
/// stored response may answer one) only if it says so.
pub(crate) fn shareable_with_authorization(d: &ResponseDirectives) -> bool {
    d.public || d.s_maxage.is_some() || d.must_revalidate
}

/// A response's freshness lifetime (RFC 9111 4.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lifetime {
    pub(crate) lifetime: Duration,
    /// Given by the response (`s-maxage`, `max-age`, `Expires`), not by `default_ttl`.
    pub(crate) explicit: bool,
}

impl Lifetime {
    pub(crate) fn of(
        directives: &ResponseDirectives,
        headers: &HeaderMap,
        date: SystemTime,
        default_ttl: Duration,
    ) -> Self {
        let explicit = |secs: u64| Self {
            lifetime: Duration::from_secs(secs),
            explicit: true,
        };
        if let Some(s) = directives.s_maxage {
            return explicit(s);
        }
        if let Some(m) = directives.max_age {
            return explicit(m);
        }
        if let Some(expires) = headers.get(EXPIRES) {
            // An invalid Expires (`0`, say) means already expired.
            let lifetime = http_date(expires)
                .and_then(|e| e.duration_since(date).ok())
                .unwrap_or_default();
            return Self {
                lifetime,
                explicit: true,
            };
        }
        Self {
            lifetime: default_ttl,
            explicit: false,
        }
    }

    /// Worth storing: fresh for a while, or revalidatable (a validator, and
    /// freshness the response chose or `no-cache`).
    pub(crate) fn storable(&self, has_validator: bool, no_cache: bool) -> bool {
        !self.lifetime.is_zero() || (has_validator && (self.explicit || no_cache))
    }
}

/// The `Date` of a response.
pub(crate) fn date(headers: &HeaderMap) -> Option<SystemTime> {
    headers.get(DATE).and_then(http_date)
}

fn http_date(value: &HeaderValue) -> Option<SystemTime> {
    httpdate::parse_http_date(value.to_str().ok()?).ok()
}

/// The `Age` a response arrived with, in seconds (`0` when absent or invalid).
pub(crate) fn age_header(headers: &HeaderMap) -> u64 {
    headers
        .get(AGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |age| age.min(MAX_AGE))
}

/// The largest `Age` we believe (2^31 seconds, as for delta-seconds in
/// RFC 9111 1.2.2): larger values would overflow the age arithmetic.
const MAX_AGE: u64 = 1 << 31;

/// The corrected initial age (RFC 9111 4.2.3) of a response with `date`
/// and `age` seconds, asked for at `request_time` and received at `response_time`.
pub(crate) fn initial_age(
    age: u64,
    date: SystemTime,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let apparent_age = response_time.duration_since(date).unwrap_or_default();
    let response_delay = response_time
        .duration_since(request_time)
        .unwrap_or_default();
    let corrected_age_value = Duration::from_secs(age).saturating_add(response_delay);
    apparent_age.max(corrected_age_value)
}

/// How a stored response may answer a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// Serve it.
    Fresh,
    /// Serve it stale: the request accepts that (`max-stale`).
    Stale,
    /// Serve it stale and refresh it in the background.
    StaleWhileRevalidate,
    /// Ask the origin first (conditionally if it has validators).
    Revalidate,
    /// It may not answer this request at all (authorization).
    Unusable,
}

/// RFC 9111 4 (reuse), 4.2.4 (stale), 5.2.1 (request directives), 3.5
/// (authorization), and RFC 5861 (`stale-while-revalidate`).
#[inline]
pub(crate) fn usability(
    entry: &Entry,
    now: Instant,
    request: &RequestDirectives,
    request_has_authorization: bool,
) -> Use {
    let d = &entry.directives;
    if request_has_authorization && !shareable_with_authorization(d) {
        return Use::Unusable;
    }
    if d.no_cache || request.no_cache {
        return Use::Revalidate;
    }
    let age = entry.age(now);
    let lifetime = entry.lifetime;
    if request
        .max_age
        .is_some_and(|max| age > Duration::from_secs(max))
    {
        return Use::Revalidate;
    }
    if request
        .min_fresh
        .is_some_and(|min| age.saturating_add(Duration::from_secs(min)) > lifetime)
    {
        return Use::Revalidate;
    }
    if age < lifetime {
        return Use::Fresh;
    }
    if d.must_revalidate {
        return Use::Revalidate;
    }
    let staleness = age.saturating_sub(lifetime);
    let within = |secs: Option<u64>| secs.is_some_and(|s| staleness <= Duration::from_secs(s));
    if within(request.max_stale) {
        return Use::Stale;
    }
    if within(d.stale_while_revalidate) {
        return Use::StaleWhileRevalidate;
    }
    Use::Revalidate
}

/// Whether a stale `entry` may answer in place of an origin error
/// (RFC 5861 `stale-if-error`, from the response or the request).
pub(crate) fn stale_if_error(entry: &Entry, now: Instant, request: &RequestDirectives) -> bool {
    if entry.directives.must_revalidate || entry.directives.no_cache {
        return false;
    }
    let staleness = entry.age(now).saturating_sub(entry.lifetime);
    let allowed = entry.directives.stale_if_error.max(request.stale_if_error);
    allowed.is_some_and(|s| staleness <= Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hm(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, v.parse().expect("value"));
        }
        h
    }

    #[test]
    fn lifetime_prefers_s_maxage_then_max_age_then_expires() {
        let now = SystemTime::now();
        let expires = httpdate::fmt_http_date(now + Duration::from_secs(100));
        let h = hm(&[
            ("cache-control", "max-age=5, s-maxage=7"),
            ("expires", &expires),
        ]);
        let d = ResponseDirectives::parse(&h);
        assert_eq!(
            Lifetime::of(&d, &h, now, Duration::ZERO).lifetime.as_secs(),
            7
        );
        let h = hm(&[("cache-control", "max-age=5"), ("expires", &expires)]);
        let d = ResponseDirectives::parse(&h);
        assert_eq!(
            Lifetime::of(&d, &h, now, Duration::ZERO).lifetime.as_secs(),
            5
        );
        let h = hm(&[("expires", &expires)]);
        let d = ResponseDirectives::parse(&h);
        let l = Lifetime::of(&d, &h, now, Duration::ZERO);
        assert!(l.explicit && (99..=100).contains(&l.lifetime.as_secs()));
        let h = hm(&[("expires", "0")]);
        let l = Lifetime::of(
            &ResponseDirectives::parse(&h),
            &h,
            now,
            Duration::from_secs(9),
        );
        assert_eq!(l.lifetime, Duration::ZERO);
        let l = Lifetime::of(
            &ResponseDirectives::default(),
            &HeaderMap::new(),
            now,
            Duration::from_secs(9),
        );
        assert!(!l.explicit && l.lifetime.as_secs() == 9);
    }

    #[test]
    fn an_absurd_age_is_capped() {
        let h = hm(&[("age", "18446744073709551615")]);
        assert_eq!(age_header(&h), 1 << 31);
        let now = SystemTime::now();
        assert_eq!(
            initial_age(age_header(&h), now, now, now).as_secs(),
            1 << 31
        );
    }

    #[test]
    fn initial_age_takes_the_larger_estimate() {
        let now = SystemTime::now();
        let date = now - Duration::from_secs(30);
        assert_eq!(initial_age(5, date, now, now).as_secs(), 30);
        assert_eq!(initial_age(50, date, now, now).as_secs(), 50);
        // A Date in the future is no age.
        assert_eq!(
            initial_age(0, now + Duration::from_secs(60), now, now),
            Duration::ZERO
        );
    }

    #[test]
    fn five_hundreds_and_partial_content_are_never_stored() {
        for s in [206, 302, 304, 500, 501, 502, 503] {
            assert!(
                !cacheable_status(StatusCode::from_u16(s).expect("status")),
                "{s}"
            );
        }
    }
}
