//! Which upstream address answered, carried in the response's extensions.

use std::net::SocketAddr;

/// The upstream address that answered a proxied request (after retries: the
/// one whose response the client gets). The proxy inserts it into the
/// extensions of responses from an upstream when the request carries
/// [`scalws_core::Observed`] (the access log puts it there; the extension
/// costs an allocation otherwise spared); responses made by ScalWS itself (a
/// 502 after every attempt failed, a cache hit) have none.
///
/// ```
/// # use scalws_proxy::upstream::UpstreamAddress;
/// # let response = http::Response::new(scalws_core::Body::empty());
/// let upstream = response.extensions().get::<UpstreamAddress>().map(|a| a.0);
/// # assert_eq!(upstream, None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamAddress(pub SocketAddr);
