//! What observes requests without changing them: the access log and the
//! per-route metrics, each a tower layer.

pub mod access_log;
pub mod metrics;
