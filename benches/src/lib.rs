//! # scalws-benches
//!
//! ScalWS's benchmark tools. In this version:
//!
//! - `h3load` (`src/bin/h3load.rs`): an HTTP/3 load generator, since Debian's
//!   h2load and curl here have no HTTP/3; `benches/tls.sh` uses it.
//! - the shell scripts beside this crate: `quick.sh` (respond, proxy and
//!   cache-hit against nginx with wrk) and `tls.sh` (HTTPS/h2 with h2load,
//!   HTTP/3 with h3load), with their configurations in `configs/`.
//!
//! - the criterion microbenchmarks in `benches/micro.rs` (host lookup, route
//!   match, cache hit, whole in-process requests through the Gateway).
//!
//! Instruction counts and the A/B harness (`multi.sh`) are still to be built. `docs/benchmarks.md` has the method and
//! the figures measured so far.
#![forbid(unsafe_code)]
