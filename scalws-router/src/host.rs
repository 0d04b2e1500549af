//! Host matching (SPEC section 3): normalising the request's host, parsing configured
//! domain patterns, and the per-listener table that maps one to the other.

mod normalize;
mod pattern;
mod table;

pub use normalize::{InvalidHost, normalize_host};
pub use pattern::{HostPattern, InvalidHostPattern};
pub use table::{DuplicateDomain, HostEntry, HostTable, HostTableBuilder};
