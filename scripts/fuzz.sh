#!/usr/bin/env bash
# Runs the fuzz targets (scalwsd/fuzz) with cargo-fuzz and libFuzzer, one
# after the other, then minimises each corpus in place. Long: not for CI.
#
#   scripts/fuzz.sh                      # every target, 10 minutes each
#   DURATION=60 scripts/fuzz.sh host path
#
# Needs the nightly toolchain (`rustup toolchain install nightly`); installs
# cargo-fuzz if it is missing. Each target reads its corpus
# (scalwsd/fuzz/corpus/NAME, kept in the repository) and the seeds written
# by hand (scalwsd/fuzz/seeds/NAME) and the inputs that once failed
# (scalwsd/fuzz/regressions/NAME); what it finds new goes to the corpus, a
# failing input to scalwsd/fuzz/artifacts/NAME/. Once fixed, copy that input
# to scalwsd/fuzz/regressions/NAME/: `cargo test` replays seeds, corpus and
# regressions through the same code (scalwsd/tests/adversarial/fuzz_corpora.rs).
#
# Prints, per target: executions, executions per second, coverage (libFuzzer's
# `cov`, edges reached) and features (`ft`), corpus size, peak RSS, and whether
# anything failed. Environment:
#   DURATION   seconds per target (default 600)
#   RSS_MB     libFuzzer's memory limit per process (default 2048)
set -euo pipefail
cd "$(dirname "$0")/../scalwsd"

DURATION="${DURATION:-600}"
RSS_MB="${RSS_MB:-2048}"
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(config host path routes cache http1)
fi

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
cargo +nightly fuzz build -O

mkdir -p fuzz/logs
printf '%-8s %12s %10s %6s %7s %7s %8s  %s\n' target executions exec/s cov ft corpus rss_mb result
for target in "${TARGETS[@]}"; do
    mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
    log="fuzz/logs/$target.log"
    result=ok
    mkdir -p "fuzz/regressions/$target"
    cargo +nightly fuzz run -O "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" "fuzz/regressions/$target" -- \
        -max_total_time="$DURATION" -rss_limit_mb="$RSS_MB" -timeout=10 \
        -max_len=8192 -print_final_stats=1 >"$log" 2>&1 || result="FAILED (see $log and fuzz/artifacts/$target)"
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
    rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$log" | tail -1)
    rss=$(sed -nE 's/^stat::peak_rss_mb: *([0-9]+)/\1/p' "$log" | tail -1)
    # Minimised by edges (-use_counters=0): libFuzzer's own merge keeps an
    # input for every new hit count too, three times as many files.
    merged=$(mktemp -d)
    if "fuzz/target/x86_64-unknown-linux-gnu/release/$target" -merge=1 -use_counters=0 \
        -rss_limit_mb=4096 "$merged" "fuzz/corpus/$target" >>"$log" 2>&1; then
        rm -rf "fuzz/corpus/$target"
        mv "$merged" "fuzz/corpus/$target"
    else
        rm -rf "$merged"
    fi
    corpus=$(find "fuzz/corpus/$target" -type f | wc -l)
    printf '%-8s %12s %10s %6s %7s %7s %8s  %s\n' "$target" "${runs:-?}" "${rate:-?}" \
        "${cov:-?}" "${ft:-?}" "$corpus" "${rss:-?}" "$result"
done
