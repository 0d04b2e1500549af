//! The `Allow` header of a 405: methods of the routes that matched all but the method.

use http::{HeaderMap, HeaderValue, Method};

use super::matcher::Route;

/// The union of the methods of the routes that match `path`, `query` and `headers`,
/// deduplicated, standard methods in RFC 9110 order, then others by name.
#[cold]
#[inline(never)]
pub(super) fn allow<T>(
    routes: &[Route<T>],
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> HeaderValue {
    let mut methods: Vec<&Method> = routes
        .iter()
        .filter(|r| r.match_path(path).is_some() && r.conditions_hold(query, headers))
        .filter_map(|r| r.methods.as_deref())
        .flatten()
        .collect();
    methods.sort_by(|a, b| (order(a), a.as_str()).cmp(&(order(b), b.as_str())));
    methods.dedup();
    let list = methods
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    // Method names are tokens, always a valid header value.
    HeaderValue::try_from(list).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn order(method: &Method) -> u8 {
    const STANDARD: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::CONNECT,
        Method::OPTIONS,
        Method::TRACE,
        Method::PATCH,
    ];
    STANDARD
        .iter()
        .position(|m| m == method)
        .map_or(u8::MAX, |i| i as u8)
}
