//! Route matching and precedence (SPEC section 4): which of an application's routes
//! a request takes.

mod allow;
mod builder;
mod explain;
mod index;
mod matcher;
mod params;
mod prefix;
mod query;
mod spec;
mod table;

#[cfg(test)]
mod tests;

pub use builder::{InvalidRoute, RouteTableBuilder};
pub use explain::{Conditions, Considered, Verdict};
pub use params::Params;
pub use spec::{PathMatch, RouteSpec};
pub use table::{NoRoute, RouteMatch, RouteTable};
