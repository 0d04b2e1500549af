#!/usr/bin/env bash
# Profile-guided optimisation, tried on the instruction workload: builds
# benches/src/bin/instructions.rs instrumented (-Cprofile-generate), runs the
# five scenarios of benches/instructions.sh on it, merges the profiles with
# llvm-profdata of the LLVM rustc uses, builds the workload again with
# -Cprofile-use, and compares the two with benches/instructions.sh (A/B).
#
#   scripts/pgo.sh                 # prints the A/B; builds in target/pgo-*
#   REQUESTS=50000 scripts/pgo.sh  # a longer profile run per scenario
#   SCALWSD=1 scripts/pgo.sh       # also target/pgo-use/release/scalwsd, built
#                                  # with the same profile (for benches/multi.sh)
#
# Needs llvm-profdata of rustc's LLVM major version (rustc -vV); installs
# llvm-N from Debian when missing, and says so. Two release builds with fat
# LTO into separate target directories (and target/release, when not current):
# about 25 minutes on two cores from nothing, 17 more with SCALWSD=1.
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

if [ "${SCALWSD:-0}" = 1 ]; then
    echo "pgo.sh: scalwsd with the profile (target/pgo-use/release/scalwsd)" >&2
    RUSTFLAGS="-Cprofile-use=$DATA/merged.profdata" cargo build --release -j2 -p scalwsd \
        --target-dir target/pgo-use >&2
fi

echo "pgo.sh: the plain build to compare with (target/release)" >&2
cargo build --release -j2 -p scalws-benches --bin instructions >&2
BASE=target/release/instructions NEW=target/pgo-use/release/instructions GATE=10 benches/instructions.sh
