#!/usr/bin/env bash
# How throughput and CPU per request grow with worker threads: benches/multi.sh
# once per worker count N, with scalwsd --workers N and nginx's worker_processes
# N, the server pinned to N CPUs and the load (wrk with one thread per load CPU)
# and the proxy's origin on the CPUs left. It builds nothing: first run
#   cargo build --release -p scalwsd
#
#   benches/workers.sh                          # N = 1, 2, 4, ... up to half the CPUs
#   WORKERS_LIST="1 2 4 8" SCENARIOS=respond benches/workers.sh
#   PEER= benches/workers.sh                    # ScalWS alone
#   SCHEDULERS=per_worker benches/workers.sh    # one scheduler only
#
# Each scheduler of SCHEDULERS (default "per_worker work_stealing", see
# `scheduler` in docs/configuration.md) is a column of its own: the release
# binary run with --scheduler S, through a wrapper script in RESULTS/bin.
# Setting VARIANTS instead compares those binaries, each on its default.
#
# Fair only when the load has as many CPUs as the server, or more: on a machine
# with C CPUs, N goes up to C/2, and N=1 is all a two-CPU machine can measure
# (one CPU each); its scaling cannot be told from it. Everything else (WARMUP,
# DURATION, RUNS, CONNECTIONS, RATE, VARIANTS) is passed to multi.sh; CONNECTIONS
# defaults here to 64 per worker, RUNS to 2. One results folder per N under
# RESULTS (default results/workers-YYYYmmdd-HHMMSS), and at the end a table:
# req/s and server CPU microseconds per request for every column and N, and
# req/s per worker relative to N=1 (1.00 is linear scaling).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "workers.sh: $*" >&2; }
CPUS=$(nproc)
HALF=$(( CPUS / 2 ))
if [ "$HALF" -lt 1 ]; then
    say "one CPU: the server and the load cannot be kept apart; nothing measured"
    exit 1
fi
if [ -z "${WORKERS_LIST:-}" ]; then
    WORKERS_LIST="" n=1
    while [ "$n" -le "$HALF" ]; do WORKERS_LIST="$WORKERS_LIST $n"; n=$(( n * 2 )); done
fi
for n in $WORKERS_LIST; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { say "WORKERS_LIST: '$n' is not a worker count"; exit 2; }
    if [ "$n" -gt "$HALF" ]; then
        say "N=$n needs $(( 2 * n )) CPUs ($n for the server, as many for the load); this machine has $CPUS"
        exit 2
    fi
done
[ "$HALF" -eq 1 ] && say "two CPUs: only N=1 can be measured here; run this on a larger machine to see scaling"

export PEER="${PEER-nginx}" RUNS="${RUNS:-2}" SCENARIOS="${SCENARIOS:-respond proxy}"
RESULTS="${RESULTS:-results/workers-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RESULTS"
PER_CONN="${CONNECTIONS:-}"
if [ -z "${VARIANTS:-}" ]; then
    bin="$(pwd)/target/release/scalwsd"
    [ -x "$bin" ] || { say "no $bin: run cargo build --release -p scalwsd first"; exit 2; }
    mkdir -p "$RESULTS/bin"
    VARIANTS=""
    for scheduler in ${SCHEDULERS:-per_worker work_stealing}; do
        case "$scheduler" in
            per_worker|work_stealing) ;;
            *) say "SCHEDULERS: '$scheduler' is not per_worker or work_stealing"; exit 2;;
        esac
        printf '#!/usr/bin/env bash\nexec %q --scheduler %s "$@"\n' "$bin" "$scheduler" > "$RESULTS/bin/$scheduler"
        chmod +x "$RESULTS/bin/$scheduler"
        VARIANTS="$VARIANTS $scheduler=$RESULTS/bin/$scheduler"
    done
    export VARIANTS="${VARIANTS# }"
fi

for n in $WORKERS_LIST; do
    server="0-$(( n - 1 ))"; [ "$n" = 1 ] && server=0
    load="$n-$(( CPUS - 1 ))"; [ "$n" = $(( CPUS - 1 )) ] && load=$n
    say "N=$n: server on CPUs $server, load and origin on $load"
    rc=0
    PIN="server=$server load=$load upstream=$load" WORKERS="$n" \
        LOAD_THREADS=$(( CPUS - n )) ORIGIN_WORKERS=$(( CPUS - n )) \
        CONNECTIONS="${PER_CONN:-$(( 64 * n ))}" RESULTS="$RESULTS/n$n" \
        benches/multi.sh || rc=$?
    # 1: a gate between variants failed; the figures still stand.
    [ "$rc" -le 1 ] || { say "multi.sh for N=$n ended with $rc: see $RESULTS/n$n"; exit "$rc"; }
done

python3 - "$RESULTS" $WORKERS_LIST <<'PY'
import csv, os, sys
results, ns = sys.argv[1], [int(n) for n in sys.argv[2:]]
rows = {}
for n in ns:
    with open(os.path.join(results, f"n{n}", "aggregate.csv"), newline="") as f:
        for r in csv.DictReader(f):
            rows[(r["scenario"], r["variant"], n)] = r
keys = sorted({(s, v) for (s, v, _) in rows})
print(f"{'scenario':<14}{'column':<15}{'workers':>8}{'req/s':>12}{'us CPU/req':>12}{'req/s per worker vs N=1':>26}")
for s, v in keys:
    base = None
    for n in ns:
        r = rows.get((s, v, n))
        if not r or not r.get("rps_median"):
            print(f"{s:<14}{v:<15}{n:>8}{'-':>12}{'-':>12}{'-':>26}")
            continue
        rps, cpu = float(r["rps_median"]), float(r["cpu_us_per_req_median"] or "nan")
        base = base or rps
        print(f"{s:<14}{v:<15}{n:>8}{rps:>12,.0f}{cpu:>12.2f}{rps / n / base:>26.2f}")
PY
