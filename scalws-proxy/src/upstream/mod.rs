//! Upstream pools (in progress).
