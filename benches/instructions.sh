#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: a figure that
# does not move with the machine's load, so a 0.5 % regression shows in one
# run. The workload is target/release/instructions (benches/src/bin/
# instructions.rs): one thread serving requests over loopback to a client in
# the same process. Each scenario runs twice, with FEW and MANY requests; the
# difference in instructions divided by the difference in requests is the
# cost of one request (client and, for proxy and cache-hit, origin included),
# with start-up and shutdown cancelled out.
#
#   benches/instructions.sh                  # report, for BIN
#   benches/instructions.sh --check          # also compare with benches/budget.json
#   BASE=old/instructions NEW=new/instructions benches/instructions.sh   # A/B with a gate
#   BASE=target/release/instructions NEW=target/release/instructions benches/instructions.sh  # A/A
#
# Variables:
#   BIN        the workload binary (default target/release/instructions)
#   SCENARIOS  default "respond static-small proxy cache-hit route-layer"
#   FEW, MANY  request counts of the two runs (default 1000 and 3000)
#   BASE, NEW  two workload binaries for A/B; exit 1 when NEW costs more than
#              GATE times BASE in any scenario (default GATE=1.003, i.e. 0.3 %)
#   RUNTIME    passed to the workload: multi-thread runs it on tokio's
#              multi-thread scheduler with one worker instead of the
#              current-thread runtime (the worker-model comparison)
#   BUDGET     the budget file for --check (default benches/budget.json);
#              --check exits 1 when a scenario exceeds its budget by more than
#              TOLERANCE (default 0.01, i.e. 1 %)
#
# It builds nothing: `cargo build --release -p scalws-benches --bin instructions`.
# It installs valgrind from Debian if it is missing, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

SCENARIOS="${SCENARIOS:-respond static-small proxy cache-hit route-layer}"
FEW="${FEW:-1000}"
MANY="${MANY:-3000}"
GATE="${GATE:-1.003}"
BUDGET="${BUDGET:-benches/budget.json}"
TOLERANCE="${TOLERANCE:-0.01}"
CHECK=0
case "${1:-}" in
    --check) CHECK=1 ;;
    "") ;;
    *) echo "usage: benches/instructions.sh [--check]" >&2; exit 2 ;;
esac

if ! command -v valgrind >/dev/null; then
    echo "instructions.sh: installing valgrind from Debian (apt-get install valgrind)" >&2
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi

# Instructions of one run of BINARY SCENARIO COUNT.
collected() {
    local out
    out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" "$3" 2>&1) || {
        echo "instructions.sh: $1 $2 $3 failed:" >&2
        echo "$out" | grep -v '^==' >&2
        return 1
    }
    echo "$out" | awk '/Collected :/ { print $4 }'
}

# Instructions per request of BINARY SCENARIO, to one decimal.
per_request() {
    local few many
    few=$(collected "$1" "$2" "$FEW")
    many=$(collected "$1" "$2" "$MANY")
    awk -v a="$few" -v b="$many" -v n=$((MANY - FEW)) 'BEGIN { printf "%.1f\n", (b - a) / n }'
}

need() {
    [ -x "$1" ] || { echo "instructions.sh: $1 missing; run: cargo build --release -p scalws-benches --bin instructions" >&2; exit 1; }
}

if [ -n "${BASE:-}" ] || [ -n "${NEW:-}" ]; then
    [ -n "${BASE:-}" ] && [ -n "${NEW:-}" ] || { echo "instructions.sh: set both BASE and NEW" >&2; exit 2; }
    need "$BASE"; need "$NEW"
    status=0
    printf "%-14s %14s %14s %9s  gate (new/base <= %s)\n" scenario base new new/base "$GATE"
    for scenario in $SCENARIOS; do
        base=$(per_request "$BASE" "$scenario")
        new=$(per_request "$NEW" "$scenario")
        verdict=$(awk -v b="$base" -v n="$new" -v g="$GATE" \
            'BEGIN { r = n / b; printf "%9.5f  %s\n", r, (r <= g ? "pass" : "FAIL") }')
        printf "%-14s %14s %14s %s\n" "$scenario" "$base" "$new" "$verdict"
        case "$verdict" in *FAIL*) status=1 ;; esac
    done
    exit "$status"
fi

BIN="${BIN:-target/release/instructions}"
need "$BIN"
status=0
printf "%-14s %16s" scenario "instr/request"
[ "$CHECK" = 1 ] && printf " %12s %9s  check (<= budget x %s)" budget ratio "$(awk -v t="$TOLERANCE" 'BEGIN { print 1 + t }')"
echo
for scenario in $SCENARIOS; do
    measured=$(per_request "$BIN" "$scenario")
    printf "%-14s %16s" "$scenario" "$measured"
    if [ "$CHECK" = 1 ]; then
        budget=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["instructions_per_request"].get(sys.argv[2], ""))' "$BUDGET" "$scenario")
        if [ -z "$budget" ]; then
            printf " %12s %9s  FAIL (no budget for this scenario)" - -
            status=1
        else
            verdict=$(awk -v m="$measured" -v b="$budget" -v t="$TOLERANCE" \
                'BEGIN { r = m / b; printf "%9.4f  %s", r, (r <= 1 + t ? "pass" : "FAIL (over budget)") }')
            printf " %12s %s" "$budget" "$verdict"
            case "$verdict" in *FAIL*) status=1 ;; esac
        fi
    fi
    echo
done
exit "$status"
