#!/usr/bin/env bash
# How the cost of a request grows with the configuration: instructions per
# request (benches/instructions.sh, callgrind) of SCENARIO with 1 to 10,000
# applications (each a host of its own) and with 0 to 10,000 more routes in
# the application the requests go to. Flat is the target: host lookup and
# route matching should not depend on how many others there are.
#
#   benches/scaling.sh                     # respond, sizes 10 1000 10000
#   SIZES="10 100" benches/scaling.sh
#   SCENARIO=proxy benches/scaling.sh
#
# It builds nothing: `cargo build --release -p scalws-benches --bin instructions`.
# The largest sizes load a 10,000-application file under valgrind twice per
# figure: allow a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES="${SIZES:-10 1000 10000}"
SCENARIO="${SCENARIO:-respond}"

one() { # extra environment, then instructions.sh's per-request figure
    env "$@" SCENARIOS="$SCENARIO" benches/instructions.sh | awk -v s="$SCENARIO" '$1 == s { print $2 }'
}

base=$(one HOSTS=1 ROUTES=0)
printf '%-26s %14s %10s\n' "configuration" "instr/request" "vs base"
printf '%-26s %14s %10s\n' "1 host, the base routes" "$base" "1.0000"
for n in $SIZES; do
    for kind in hosts routes; do
        if [ "$kind" = hosts ]; then
            figure=$(one HOSTS="$n" ROUTES=0); label="$n hosts"
        else
            figure=$(one HOSTS=1 ROUTES="$n"); label="$n more routes"
        fi
        awk -v l="$label" -v f="$figure" -v b="$base" 'BEGIN { printf "%-26s %14s %10.4f\n", l, f, f / b }'
    done
done
