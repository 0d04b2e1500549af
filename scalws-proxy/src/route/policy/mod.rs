//! Route policies, the Gateway API filters: what a route does to a request
//! before its action and to the response after it. Each is also a tower
//! layer ([`layers`](self::layers)) for use outside a gateway.
//!
//! - [`Rewrite`]: the path (whole, or the matched prefix) and the host.
//! - [`HeaderModifier`]: `set`, `add`, `remove` on request or response headers.
//! - [`HttpsRedirect`]: plain-HTTP requests get 308 to https; in a gateway,
//!   decided behind one precomputed flag per application.
//! - the timeout: [`TimeoutLayer`].

mod headers;
mod https_redirect;
pub(crate) mod layers;
mod path;
mod rewrite;

pub use headers::HeaderModifier;
pub use https_redirect::HttpsRedirect;
pub(crate) use https_redirect::https_redirect;
pub use layers::{
    PolicyLayer, PolicyService, RequestHeaders, RequestPolicy, ResponseHeaders,
    ResponseHeadersLayer, Timeout, TimeoutLayer,
};
pub(crate) use path::matched_prefix;
pub use path::{InvalidPathModifier, PathModifier};
pub use rewrite::Rewrite;

/// A host name a policy cannot use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid host \"{host}\"")]
pub struct InvalidHostName {
    /// The host as given.
    pub host: String,
}
