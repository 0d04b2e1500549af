//! `scalwsd`: see the `scalwsd` library and the README.

use clap::Parser;

/// mimalloc rather than the system allocator: a request allocates and frees
/// dozens of small objects (header maps, futures, buffers), and mimalloc's
/// per-thread free lists make that cheaper. docs/benchmarks.md has the A/B.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    scalwsd::run::main(scalwsd::cli::Cli::parse())
}
