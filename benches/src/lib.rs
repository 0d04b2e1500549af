//! # scalws-benches
//!
//! ScalWS's benchmark tools. The binaries of this crate:
//!
//! - `instructions` (`src/bin/instructions.rs`): the single-process workload
//!   that `benches/instructions.sh` counts instructions per request of, under
//!   valgrind (and that CI checks against `benches/budget.json`).
//! - `paced` (`src/bin/paced.rs`): an open-loop HTTP/1.1 load generator that
//!   holds a fixed rate, for `benches/multi.sh`'s `RATE=` with `PACER=paced`.
//! - `h3load` (`src/bin/h3load.rs`): an HTTP/3 load generator, since Debian's
//!   h2load and curl here have no HTTP/3; `benches/tls.sh` uses it.
//! - `kube_translate` and `kube_endpoints` (the `kubernetes` feature): the time
//!   and memory of translating a large cluster, and the time from an
//!   EndpointSlice event to the new endpoint serving.
//!
//! The criterion microbenchmarks are in `benches/micro.rs` (host lookup, route
//! match, cache hit, whole in-process requests through the Gateway). The shell
//! scripts beside this crate drive real servers: `multi.sh` (the load A/B
//! harness, with nginx or HAProxy as a peer), `instructions.sh`, `served.sh`
//! (instructions, and with `CACHE=1` simulated cache misses, of `scalwsd`
//! itself), `idle.sh` and `rss.sh` (memory), `scaling.sh` and `workers.sh` (how
//! cost grows), `quick.sh` and `tls.sh`, with their configurations in
//! `configs/`. `docs/benchmarks.md` has the method and every figure.
#![forbid(unsafe_code)]
