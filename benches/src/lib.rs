//! # scalws-benches
//!
//! The home of ScalWS's benchmarks. In this version it holds no code: the
//! criterion microbenchmarks and the A/B load harness (`multi.sh`) are still
//! to be built. `docs/benchmarks.md` gives the command behind the figures
//! measured so far, which uses `wrk` against a release build of `scalwsd`.
#![forbid(unsafe_code)]
