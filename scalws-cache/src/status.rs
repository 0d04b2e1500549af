//! What the cache did for a response, carried in the response's extensions so
//! that an access log (or a `Cache-Status` header) can say it.

use http::Response;
use scalws_core::Body;

/// What the cache did for one request, in the extensions of the responses a
/// [`CacheService`](crate::CacheService) returns: always on answers that went
/// to the origin, and on answers from the store when the request carries
/// [`scalws_core::Observed`] (the access log puts it there), since the
/// extension costs a stored answer an allocation:
///
/// ```
/// # use scalws_cache::CacheStatus;
/// # let response = http::Response::new(scalws_core::Body::empty());
/// let status = response.extensions().get::<CacheStatus>().map(|s| s.as_str());
/// # assert_eq!(status, None);
/// ```
///
/// The outcomes are those [`CacheStats`](crate::CacheStats) counts: `Hit` and
/// `Revalidated` count in `hits`, `Miss` in `misses`, `Stale` in
/// `stale_served`, `Bypass` in `bypasses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheStatus {
    /// Answered from a fresh stored response (also one that a concurrent
    /// request stored while this one waited).
    Hit,
    /// The origin's response: nothing usable was stored, the request was a
    /// HEAD or a range, or a revalidation got a new response or an error
    /// (also `only-if-cached` with nothing stored: a 504).
    Miss,
    /// A stale stored response: `stale-while-revalidate`, `stale-if-error`,
    /// or the request's `max-stale`.
    Stale,
    /// A stored response the origin confirmed with a 304 to a conditional
    /// request.
    Revalidated,
    /// Passed through without consulting the cache: a method other than GET
    /// and HEAD, a request `no-store`, or no usable host.
    Bypass,
}

impl CacheStatus {
    /// The lowercase name: `hit`, `miss`, `stale`, `revalidated`, `bypass`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Stale => "stale",
            Self::Revalidated => "revalidated",
            Self::Bypass => "bypass",
        }
    }
}

impl std::fmt::Display for CacheStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `response`, noted as answered with `status`.
#[inline]
pub(crate) fn mark(mut response: Response<Body>, status: CacheStatus) -> Response<Body> {
    response.extensions_mut().insert(status);
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::convert::Infallible;

    use http::{Method, Request, StatusCode, header};
    use http_body_util::BodyExt;
    use tower::{Layer, ServiceExt};

    use super::*;
    use crate::{Cache, CacheOptions};

    /// Every outcome, through a cache in front of an origin that answers by path.
    #[tokio::test]
    async fn every_response_says_what_the_cache_did() {
        let origin = tower::service_fn(|request: Request<Body>| async move {
            let revalidating = request.headers().contains_key(header::IF_NONE_MATCH);
            let mut response = Response::new(Body::from("body"));
            let cache_control = match request.uri().path() {
                "/fresh" => "max-age=60",
                "/no-cache" if revalidating => {
                    *response.status_mut() = StatusCode::NOT_MODIFIED;
                    *response.body_mut() = Body::empty();
                    "no-cache, max-age=60"
                }
                "/no-cache" => "no-cache, max-age=60",
                // Stored already older than its freshness: stale at once.
                _ => {
                    response
                        .headers_mut()
                        .insert(header::AGE, "100".parse().unwrap());
                    "max-age=60, stale-while-revalidate=600"
                }
            };
            let headers = response.headers_mut();
            headers.insert(header::CACHE_CONTROL, cache_control.parse().unwrap());
            headers.insert(header::ETAG, "\"v1\"".parse().unwrap());
            Ok::<_, Infallible>(response)
        });
        let cache = Cache::new(CacheOptions::default());
        let service = cache.layer().layer(origin);
        let status = |method: Method, path: &str| {
            let request = Request::builder()
                .method(method)
                .uri(format!("http://example.com{path}"))
                .extension(scalws_core::Observed)
                .body(Body::empty())
                .unwrap();
            let service = service.clone();
            async move {
                let response = service.oneshot(request).await.unwrap();
                let status = response.extensions().get::<CacheStatus>().copied();
                // Reading the body is what stores it.
                response.into_body().collect().await.unwrap();
                status.map(CacheStatus::as_str)
            }
        };
        let mut seen = Vec::new();
        for (method, path) in [
            (Method::POST, "/fresh"),
            (Method::GET, "/fresh"),
            (Method::GET, "/fresh"),
            (Method::HEAD, "/other"),
            (Method::GET, "/no-cache"),
            (Method::GET, "/no-cache"),
            (Method::GET, "/stale"),
            (Method::GET, "/stale"),
        ] {
            seen.push(status(method, path).await);
        }
        let expected = [
            "bypass",
            "miss",
            "hit",
            "miss",
            "miss",
            "revalidated",
            "miss",
            "stale",
        ];
        assert_eq!(seen, expected.map(Some));

        // Unobserved, a hit spares the extension.
        let request = Request::get("http://example.com/fresh")
            .body(Body::empty())
            .unwrap();
        let response = service.clone().oneshot(request).await.unwrap();
        assert_eq!(response.extensions().get::<CacheStatus>(), None);
    }
}
