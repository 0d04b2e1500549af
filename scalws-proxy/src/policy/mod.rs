//! Route policies, the Gateway API filters: what a route does to a request
//! before its action and to the response after it, and the `redirect` action.
//!
//! - [`Rewrite`]: the path (whole, or the matched prefix) and the host.
//! - [`HeaderModifier`]: `set`, `add`, `remove` on request or response headers.
//! - [`Redirect`]: answers with a redirect instead of an action.
//! - `https_redirect`: plain-HTTP requests get 308 to https; decided by the
//!   gateway behind one precomputed flag per application.

mod headers;
mod https_redirect;
mod path;
mod redirect;
mod rewrite;

pub use headers::HeaderModifier;
pub(crate) use https_redirect::https_redirect;
pub(crate) use path::matched_prefix;
pub use path::{InvalidPathModifier, PathModifier};
pub use redirect::{NotARedirectStatus, Redirect};
pub use rewrite::Rewrite;

/// A host name a policy cannot use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid host \"{host}\"")]
pub struct InvalidHostName {
    /// The host as given.
    pub host: String,
}
