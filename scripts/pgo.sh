#!/usr/bin/env bash
# Profile-guided optimisation. By default, tried on the instruction workload:
# builds benches/src/bin/instructions.rs instrumented (-Cprofile-generate), runs
# the five scenarios of benches/instructions.sh on it, merges the profiles with
# llvm-profdata of the LLVM rustc uses, builds the workload again with
# -Cprofile-use, and compares the two with benches/instructions.sh (A/B).
#
# With SCALWSD=1 it also builds `scalwsd` with a profile of `scalwsd` itself:
# an instrumented scalwsd serves the scenarios of benches/multi.sh under
# h2load (train_scalwsd in benches/lib.sh: respond, static-small, proxy and
# cache-hit over HTTP/1.1, respond over TLS with HTTP/1.1 and with h2; the
# origin of proxy and cache-hit is nginx, as in multi.sh), is stopped with
# SIGTERM, which writes its profile, and target/pgo-use/release/scalwsd is
# built from that profile, with the relocations scripts/bolt.sh needs.
# Compare it under load with `VARIANTS="plain=target/release/scalwsd
# pgo=target/pgo-use/release/scalwsd" benches/multi.sh`.
#
#   scripts/pgo.sh                 # prints the A/B; builds in target/pgo-*
#   REQUESTS=50000 scripts/pgo.sh  # a longer profile run per scenario
#   SCALWSD=1 scripts/pgo.sh       # also target/pgo-use/release/scalwsd
#   SCALWSD=only scripts/pgo.sh    # that alone, without the workload's A/B
#
# Needs llvm-profdata of rustc's LLVM major version (rustc -vV); installs
# llvm-N from Debian when missing, and says so; SCALWSD also needs h2load,
# nginx and openssl (installed from Debian likewise) and 127.0.0.1's ports
# 18080, 18090 and 18443 free.
# Release builds with fat LTO into separate target directories (and
# target/release, when not current): about 25 minutes on two cores from
# nothing, 20 more with SCALWSD=1.
# docs/benchmarks.md ("Profile-guided optimisation") has the figures and why
# the release build does not use it.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS="${REQUESTS:-20000}"
LLVM=$(rustc -vV | awk '/^LLVM version/ { split($3, v, "."); print v[1] }')
PROFDATA=$(command -v "llvm-profdata-$LLVM" || true)
if [ -z "$PROFDATA" ]; then
    echo "pgo.sh: installing llvm-$LLVM from Debian for llvm-profdata-$LLVM" >&2
    apt-get update -qq && apt-get install -y -qq "llvm-$LLVM" >/dev/null
    PROFDATA=$(command -v "llvm-profdata-$LLVM") || { echo "pgo.sh: no llvm-profdata-$LLVM" >&2; exit 1; }
fi

DATA=$PWD/target/pgo-data
rm -rf "$DATA"; mkdir -p "$DATA"
export CARGO_INCREMENTAL=0

SCALWSD="${SCALWSD:-0}"

if [ "$SCALWSD" != 0 ]; then
    echo "pgo.sh: instrumented scalwsd (target/pgo-gen)" >&2
    RUSTFLAGS="-Cprofile-generate=$DATA" cargo build --release -j2 -p scalwsd \
        --target-dir target/pgo-gen >&2
    # shellcheck source=../benches/lib.sh
    . benches/lib.sh
    LLVM_PROFILE_FILE="$DATA/scalwsd-%p.profraw" train_scalwsd target/pgo-gen/release/scalwsd "$REQUESTS"
    "$PROFDATA" merge -o "$DATA/scalwsd.profdata" "$DATA"/scalwsd-*.profraw
    echo "pgo.sh: scalwsd with its profile (target/pgo-use/release/scalwsd)" >&2
    # Relocations kept in the binary, so scripts/bolt.sh (SCALWSD=1) can lay
    # it out again; they are not loaded and cost nothing at run time.
    RUSTFLAGS="-Cprofile-use=$DATA/scalwsd.profdata -Clink-arg=-Wl,--emit-relocs" \
        cargo build --release -j2 -p scalwsd --target-dir target/pgo-use >&2
fi

if [ "$SCALWSD" != only ]; then
    echo "pgo.sh: instrumented build (target/pgo-gen)" >&2
    RUSTFLAGS="-Cprofile-generate=$DATA" cargo build --release -j2 -p scalws-benches \
        --bin instructions --target-dir target/pgo-gen >&2
    # The build's own build scripts and proc macros are instrumented too and leave
    # their profiles in $DATA (default_*.profraw): only the workload's are merged.
    for scenario in respond static-small proxy cache-hit route-layer; do
        LLVM_PROFILE_FILE="$DATA/workload-%p.profraw" \
            target/pgo-gen/release/instructions "$scenario" "$REQUESTS" >/dev/null
    done
    "$PROFDATA" merge -o "$DATA/merged.profdata" "$DATA"/workload-*.profraw

    echo "pgo.sh: optimised build (target/pgo-use)" >&2
    RUSTFLAGS="-Cprofile-use=$DATA/merged.profdata" cargo build --release -j2 -p scalws-benches \
        --bin instructions --target-dir target/pgo-use >&2

    echo "pgo.sh: the plain build to compare with (target/release)" >&2
    cargo build --release -j2 -p scalws-benches --bin instructions >&2
    BASE=target/release/instructions NEW=target/pgo-use/release/instructions GATE=10 benches/instructions.sh
fi
