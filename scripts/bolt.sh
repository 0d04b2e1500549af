#!/usr/bin/env bash
# BOLT (LLVM's post-link optimiser), instrumentation mode, on the instruction
# workload: builds benches/src/bin/instructions.rs linked with
# --emit-relocs (target/bolt), instruments it with llvm-bolt, runs the five
# scenarios of benches/instructions.sh on the instrumented binary, merges the
# profiles with merge-fdata, rewrites the binary with the profile (hot code
# together, blocks in the order they run, cold parts split off) and compares
# the two with benches/instructions.sh (A/B).
#
#   scripts/bolt.sh                 # prints the A/B; builds in target/bolt
#   REQUESTS=50000 scripts/bolt.sh  # a longer profile run per scenario
#   SCALWSD=1 scripts/bolt.sh       # scalwsd instead: see below
#
# With SCALWSD=1 it lays out a scalwsd binary instead (SCALWSD_BIN, default
# target/pgo-use/release/scalwsd, the profile-guided build of
# `SCALWSD=only scripts/pgo.sh`, which keeps the relocations BOLT needs):
# instruments it, has it serve the scenarios of benches/multi.sh under h2load
# (train_scalwsd in benches/lib.sh, as pgo.sh does), and writes
# target/bolt/scalwsd.bolt. Compare it under load with `VARIANTS="pgo=...
# bolt=target/bolt/scalwsd.bolt" benches/multi.sh`.
#
# Instrumentation needs no hardware counters (this kind of machine has none).
# Needs llvm-bolt of rustc's LLVM major version (rustc -vV); installs Debian's
# bolt-N when missing, and says so. One release build with fat LTO into its own
# target directory: about 8 minutes on two cores. BOLT moves code rather than
# removing it, so callgrind's instruction count shows only part of the gain
# (fewer jumps); docs/benchmarks.md ("Profile-guided optimisation and BOLT")
# has the figures, BOLT's own branch counts, and why the release build does
# not use it.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS="${REQUESTS:-20000}"
LLVM=$(rustc -vV | awk '/^LLVM version/ { split($3, v, "."); print v[1] }')
BOLT=$(command -v "llvm-bolt-$LLVM" || true)
if [ -z "$BOLT" ]; then
    echo "bolt.sh: installing bolt-$LLVM from Debian for llvm-bolt-$LLVM" >&2
    apt-get update -qq && apt-get install -y -qq "bolt-$LLVM" >/dev/null
    BOLT=$(command -v "llvm-bolt-$LLVM") || { echo "bolt.sh: no llvm-bolt-$LLVM" >&2; exit 1; }
fi
MERGE=$(command -v "merge-fdata-$LLVM") || { echo "bolt.sh: no merge-fdata-$LLVM" >&2; exit 1; }

DATA=$PWD/target/bolt-data
rm -rf "$DATA"; mkdir -p "$DATA"
export CARGO_INCREMENTAL=0
# What BOLT does with the profile: hot blocks in the order they run, hot
# functions together, each function's cold part split off.
LAYOUT=(-reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold)

if [ "${SCALWSD:-0}" = 1 ]; then
    IN=${SCALWSD_BIN:-target/pgo-use/release/scalwsd}
    [ -x "$IN" ] || { echo "bolt.sh: $IN missing; run: SCALWSD=only scripts/pgo.sh" >&2; exit 1; }
    # Without relocations BOLT could not move functions, only blocks.
    readelf -S "$IN" | grep -q '\.rela\.text' ||
        { echo "bolt.sh: $IN was linked without --emit-relocs" >&2; exit 1; }
    mkdir -p target/bolt
    echo "bolt.sh: instrument $IN, train it, merge" >&2
    "$BOLT" "$IN" -instrument -o target/bolt/scalwsd.instr \
        --instrumentation-file="$DATA/prof" --instrumentation-file-append-pid >&2
    # shellcheck source=../benches/lib.sh
    . benches/lib.sh
    train_scalwsd target/bolt/scalwsd.instr "$REQUESTS"
    "$MERGE" "$DATA"/prof.*.fdata > "$DATA/merged.fdata"
    echo "bolt.sh: optimise (target/bolt/scalwsd.bolt)" >&2
    "$BOLT" "$IN" -o target/bolt/scalwsd.bolt -data="$DATA/merged.fdata" "${LAYOUT[@]}" \
        -dyno-stats 2>&1 | grep -E "executed instructions|total branches|taken branches" >&2 || true
    exit 0
fi
PLAIN=target/bolt/release/instructions

echo "bolt.sh: build with relocations kept (target/bolt)" >&2
RUSTFLAGS="-Clink-arg=-Wl,--emit-relocs" cargo build --release -j2 -p scalws-benches \
    --bin instructions --target-dir target/bolt >&2

echo "bolt.sh: instrument, run the scenarios, merge" >&2
"$BOLT" "$PLAIN" -instrument -o target/bolt/instructions.instr \
    --instrumentation-file="$DATA/prof" --instrumentation-file-append-pid >&2
for scenario in respond static-small proxy cache-hit route-layer; do
    target/bolt/instructions.instr "$scenario" "$REQUESTS" >/dev/null
done
"$MERGE" "$DATA"/prof.*.fdata > "$DATA/merged.fdata"

echo "bolt.sh: optimise (target/bolt/instructions.bolt)" >&2
"$BOLT" "$PLAIN" -o target/bolt/instructions.bolt -data="$DATA/merged.fdata" \
    "${LAYOUT[@]}" -dyno-stats 2>&1 | grep -E "executed instructions|total branches|taken branches" >&2 || true

BASE=$PLAIN NEW=target/bolt/instructions.bolt GATE=10 benches/instructions.sh
