#!/usr/bin/env bash
# The load A/B harness: the scenarios static-small, respond, proxy and
# cache-hit against several scalwsd binaries (and, if asked, nginx or HAProxy), over
# several runs, with a gate on the result. It builds nothing: build first with
# `cargo build --release -p scalwsd`, and keep a copy of the binary to compare.
#
#   benches/multi.sh                                         # target/release/scalwsd alone
#   VARIANTS="base=/tmp/scalwsd-base new=target/release/scalwsd" benches/multi.sh
#   VARIANTS="a=target/release/scalwsd b=target/release/scalwsd" benches/multi.sh   # A/A: the noise
#   PEER=nginx SCENARIOS="respond proxy" RUNS=3 benches/multi.sh
#   WARMUP=1 DURATION=3 RUNS=2 benches/multi.sh             # a quick check of the harness
#   PEER=nginx RATE=20000 SCENARIOS=respond benches/multi.sh  # p50/p99/p99.9 at one offered rate
#   PEER=nginx SCENARIOS="tls-h1 tls-h2 tls-new" benches/multi.sh # respond over TLS
#
# Every (run, scenario, variant) is one measurement: a fresh server
# (`scalwsd --config CONFIG --workers WORKERS`, SCALWS_LOG=warn; or nginx with
# WORKERS workers) pinned to the server CPU; one curl request that must answer 2xx; a
# wrk warm-up of WARMUP seconds; then `wrk -tLOAD_THREADS -cCONNECTIONS -dDURATIONs
# --latency`, pinned to the load CPU, while the server's CPU time (utime +
# stime from /proc/PID/stat; nginx's worker processes) is read before and after.
# The kernel's part of that time (stime) is kept too, and the aggregate
# splits each column's CPU per request into user and kernel time: what a
# change in user space can at best take away. Its peak RSS (VmHWM) is read
# just before the server is stopped. The origin of
# proxy and cache-hit (nginx answering `return 200 "ok"` with max-age=3600, on
# 127.0.0.1:18090, configs/nginx-origin.conf) runs for the whole benchmark,
# pinned to the upstream CPU. Everything listens on 127.0.0.1 only.
#
# Noise. The order of the variants rotates between runs (run 1: A B C, run 2:
# B C A, ...), so with RUNS a multiple of the number of columns every variant
# holds every position equally often. Within one run a scenario is measured for
# every variant back to back, and the aggregator forms *paired* ratios
# (variant / first variant, same run, same scenario): drift of the machine
# between runs cancels out of them. The gate uses the median of these paired
# ratios (the ratio of the medians is in the csv too). Server CPU per request
# is the steadier figure: a slower load generator or a busy neighbour changes
# req/s much more than the work the server does for each request. The CV (in
# %) of every median is printed so the noise is visible, and so is how busy
# the server was (its CPU time over the wall time): far below 100 % means wrk,
# or a neighbour on the load CPU, set the pace rather than the server.
#
# Environment:
#   VARIANTS     "label=path label=path ...": the scalwsd binaries to compare.
#                The first is the base of every ratio. Default:
#                "scalws=target/release/scalwsd". Relative paths are from the
#                directory multi.sh is started in. Each binary is copied at the
#                start, so a rebuild during the benchmark changes nothing.
#   PEER         "nginx": Debian's nginx as an extra column (configs/nginx-peer.conf,
#                127.0.0.1:18081), measured and rotated like a variant but never
#                gated. "haproxy": Debian's HAProxy likewise (configs/haproxy-
#                peer.cfg, one thread), for respond, proxy and cache-hit only
#                (HAProxy serves no files: static-small is not measured for it).
#                Default: none.
#   WARMUP       Seconds of wrk before each measurement, not counted (default 10;
#                0 skips it).
#   DURATION     Seconds of each measurement (default 30).
#   RUNS         Runs; each measures every scenario for every column (default 5).
#   CONNECTIONS  wrk connections (default 64).
#   WORKERS      Worker threads of scalwsd (--workers), nginx's worker_processes and
#                HAProxy's nbthread (default 1). Give the server as many CPUs in
#                PIN; benches/workers.sh does, for 1, 2, 4 ... workers.
#   LOAD_THREADS wrk's and h2load's threads (default 1).
#   ORIGIN_WORKERS  worker_processes of the origin nginx (default 1).
#   RATE         Requests per second, in all: every column gets the same offered
#                load, and the latencies are compared at equal rates instead of at
#                each server's own maximum. The load generator is then oha (`oha
#                -q RATE --latency-correction`, so a late answer delays the requests
#                behind it on the clock and counts against p99, not against the
#                rate; installed with `cargo install oha --locked` when missing, said
#                on stderr) for the warm-up and the measurement; its JSON output is
#                SCENARIO.LABEL.oha.json and the aggregate adds p50 and p99.9. Take
#                the rate from a run without RATE (for example 50 % and 80 % of
#                nginx's req/s). Default: empty, wrk at its own pace.
#   PACER        The load generator of RATE: "oha" (the default, above) or
#                "paced", ScalWS's own (benches/src/bin/paced.rs; build it with
#                `cargo build --release -p scalws-benches --bin paced`): one
#                thread, open loop, latencies from when each request was due,
#                plain HTTP/1.1 only (no tls-* scenario). It holds rates oha
#                cannot from one load CPU. Its JSON (SCENARIO.LABEL.paced.json)
#                has oha's field names, and its own under `paced`: maxQueued
#                and sendLagP99 (requests waiting for a free connection: small
#                when the server keeps up) and reconnects. A request not
#                answered within 2 s after the run is an error (the run is not
#                valid), not left out of the latencies.
#   SCENARIOS    A subset of "static-small respond proxy cache-hit" (the default)
#                and of the TLS scenarios, which are measured only when named:
#                tls-h1 (respond over TLS 1.3 and HTTP/1.1 on kept connections,
#                wrk), tls-h2 (the same over h2: h2load -c CONNECTIONS -m1, one
#                stream at a time per connection; h2load reports no percentiles,
#                so no p99), tls-new (wrk sending `Connection: close`: a new TCP
#                and TLS connection for every request). ScalWS serves them from
#                TLS_CONFIG on 127.0.0.1:18443, nginx from nginx-peer.conf's TLS
#                server on 127.0.0.1:18444, both with one ECDSA P-256
#                certificate made with openssl for the run. HAProxy has none.
#   TLS_CONFIG   The ScalWS configuration of the TLS scenarios (default
#                benches/configs/scalws-tls.yaml); it is copied beside the
#                certificate, which it names as bench-cert.pem and bench-key.pem.
#   RESULTS      Output folder (default results/LABELS-YYYYmmdd-HHMMSS, LABELS
#                the variant labels joined by `-`; results/ is git-ignored). It
#                gets run-N/ with, per scenario and column, the wrk outputs
#                (SCENARIO.LABEL.wrk, .warmup.wrk), the server's stderr (.log)
#                and a record of the measurement (.rec); settings.env, meta.txt,
#                origin.log; and from benches/aggregate.py aggregate.csv,
#                aggregate.txt (also printed) and plot.svg.
#   PIN          CPU sets for taskset: "server=0 load=1 upstream=1" (the default on
#                2 or more CPUs; any taskset -c list such as 2-3 works), or
#                "none" (the default on 1 CPU) for no pinning.
#   GATE_RPS     Least req/s ratio variant/first that passes (default 0.98).
#   GATE_CPU     Greatest CPU-per-request ratio variant/first that passes
#                (default 1.02).
#   CONFIG       The ScalWS configuration (default benches/configs/scalws.yaml:
#                the four scenarios on 127.0.0.1:18080, told apart by path).
#
# Needs wrk (installed from Debian with apt-get when missing, said on stderr),
# nginx for proxy, cache-hit or PEER=nginx (nginx-light, else nginx, likewise),
# haproxy for PEER=haproxy (likewise),
# python3 (standard library) for the aggregate, curl if present.
#
# Exit status: 0 every gate passed (or a single variant); 1 a gate failed, or
# a variant's binary is missing, or the set-up failed; 2 a bad setting; 3 a
# measurement was invalid (the server did not start or died, a non-2xx answer,
# wrk errors or non-2xx/3xx responses, the origin died): its figures are left
# out and the gate cannot be trusted (3 wins over 1). 130 when interrupted;
# `python3 benches/aggregate.py RESULTS` then aggregates what was measured.
set -euo pipefail
CALLER_PWD=$PWD
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { echo "multi.sh: $*" >&2; }
die() { local code=$1; shift; say "$*"; exit "$code"; }

# A path given by the user is relative to where multi.sh was started.
abspath() { case "$1" in /*) echo "$1";; *) echo "$CALLER_PWD/$1";; esac; }

VARIANTS="${VARIANTS:-scalws=target/release/scalwsd}"
PEER="${PEER:-}"
WARMUP="${WARMUP:-10}"
DURATION="${DURATION:-30}"
RUNS="${RUNS:-5}"
CONNECTIONS="${CONNECTIONS:-64}"
WORKERS="${WORKERS:-1}"
LOAD_THREADS="${LOAD_THREADS:-1}"
ORIGIN_WORKERS="${ORIGIN_WORKERS:-1}"
SCENARIOS="${SCENARIOS:-static-small respond proxy cache-hit}"
GATE_RPS="${GATE_RPS:-0.98}"
GATE_CPU="${GATE_CPU:-1.02}"
CONFIG="$(abspath "${CONFIG:-$ROOT/benches/configs/scalws.yaml}")"
if [ -z "${PIN+set}" ]; then
    if [ "$(nproc)" -ge 2 ]; then PIN="server=0 load=1 upstream=1"; else PIN=none; fi
fi

SCALWS_PORT=18080
PEER_PORT=18081
SCALWS_TLS_PORT=18443
PEER_TLS_PORT=18444
ORIGIN_PORT=18090

# --- settings -----------------------------------------------------------------

RATE="${RATE:-}"
PACER="${PACER:-oha}"
case "$PACER" in oha|paced) ;; *) die 2 "PACER is oha or paced, not '$PACER'";; esac
for v in WARMUP DURATION RUNS CONNECTIONS WORKERS LOAD_THREADS ORIGIN_WORKERS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die 2 "$v must be a whole number, not '${!v}'"
done
if [ -n "$RATE" ]; then
    [[ $RATE =~ ^[1-9][0-9]*$ ]] || die 2 "RATE must be a whole number of requests per second, not '$RATE'"
fi
for v in DURATION RUNS CONNECTIONS WORKERS LOAD_THREADS ORIGIN_WORKERS; do
    [ "${!v}" -ge 1 ] || die 2 "$v must be at least 1"
done
for v in GATE_RPS GATE_CPU; do
    [[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die 2 "$v must be a number such as 0.98, not '${!v}'"
done

declare -A URL_PATH=([static-small]=/static/small.html [respond]=/respond [proxy]=/proxy [cache-hit]=/cache/hit
    [tls-h1]=/respond [tls-h2]=/respond [tls-new]=/respond)
read -r -a SCENARIO_LIST <<< "$SCENARIOS"
[ "${#SCENARIO_LIST[@]}" -ge 1 ] || die 2 "SCENARIOS is empty"
NEEDS_ORIGIN=0 NEEDS_TLS=0 NEEDS_H2LOAD=0
for s in "${SCENARIO_LIST[@]}"; do
    [ -n "${URL_PATH[$s]:-}" ] || die 2 "unknown scenario '$s' (static-small, respond, proxy, cache-hit, tls-h1, tls-h2, tls-new)"
    case "$s" in proxy|cache-hit) NEEDS_ORIGIN=1;; tls-*) NEEDS_TLS=1;; esac
    if [ "$s" = tls-h2 ] && [ -z "${RATE:-}" ]; then NEEDS_H2LOAD=1; fi
done
is_tls() { [[ $1 == tls-* ]]; }
TLS_CONFIG="$(abspath "${TLS_CONFIG:-$ROOT/benches/configs/scalws-tls.yaml}")"

LABELS=()            # every column, in order: the variants, then the peer
declare -A BIN=()    # label -> absolute path of its scalwsd
read -r -a VARIANT_LIST <<< "$VARIANTS"
[ "${#VARIANT_LIST[@]}" -ge 1 ] || die 2 "VARIANTS is empty"
for item in "${VARIANT_LIST[@]}"; do
    label=${item%%=*} path=${item#*=}
    if [ "$label" = "$item" ] || [ -z "$path" ]; then die 2 "VARIANTS entries are label=path, not '$item'"; fi
    [[ $label =~ ^[A-Za-z0-9_.+]+$ ]] || die 2 "variant label '$label': use letters, digits, _ . + only"
    [ -z "${BIN[$label]:-}" ] || die 2 "variant label '$label' given twice"
    BIN[$label]=$(abspath "$path")
    LABELS+=("$label")
done
VARIANT_LABELS=("${LABELS[@]}")
case "$PEER" in
    "") ;;
    nginx|haproxy) [ -z "${BIN[$PEER]:-}" ] || die 2 "the label $PEER is taken by PEER=$PEER"; LABELS+=("$PEER");;
    *) die 2 "PEER is nginx, haproxy or empty, not '$PEER'";;
esac
# Scenarios a peer cannot serve: not measured for it.
PEER_SKIP=""
[ "$PEER" = haproxy ] && PEER_SKIP="static-small tls-h1 tls-h2 tls-new"
skipped() { [ "$1" = "$PEER" ] && [[ " $PEER_SKIP " == *" $2 "* ]]; } # label scenario

for label in "${VARIANT_LABELS[@]}"; do
    [ -x "${BIN[$label]}" ] || die 1 "variant $label: ${BIN[$label]} is missing or not executable; build it with: cargo build --release -p scalwsd (and copy target/release/scalwsd elsewhere to keep an old build)"
done
[ -r "$CONFIG" ] || die 1 "CONFIG $CONFIG is not readable"
[ "$NEEDS_TLS" = 0 ] || [ -r "$TLS_CONFIG" ] || die 1 "TLS_CONFIG $TLS_CONFIG is not readable"
command -v python3 >/dev/null || die 1 "python3 is needed for the aggregate"

declare -A CPUSET=()
if [ "$PIN" != none ]; then
    for item in $PIN; do
        role=${item%%=*} set=${item#*=}
        case "$role" in server|load|upstream) ;; *) die 2 "PIN roles are server, load and upstream, not '$role'";; esac
        [[ $set =~ ^[0-9,-]+$ ]] || die 2 "PIN: '$set' is not a CPU list"
        CPUSET[$role]=$set
    done
    command -v taskset >/dev/null || { say "taskset not found (util-linux): running without pinning"; CPUSET=(); PIN=none; }
fi

# --- tools ----------------------------------------------------------------------

APT_UPDATED=0
apt_install() { # package...: the first one that installs
    if [ "$APT_UPDATED" = 0 ]; then timeout 600 apt-get update -qq >&2 || true; APT_UPDATED=1; fi
    local p
    for p in "$@"; do
        timeout 900 apt-get install -y -qq "$p" >/dev/null && return 0
    done
    return 1
}
if ! command -v wrk >/dev/null; then
    say "installing wrk from Debian (apt-get install wrk)"
    apt_install wrk || die 1 "could not install wrk"
fi
NGINX=""
if [ "$NEEDS_ORIGIN" = 1 ] || [ "$PEER" = nginx ]; then
    NGINX=$(command -v nginx || true)
    [ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
    if [ -z "$NGINX" ]; then
        say "installing nginx from Debian for the origin or the peer (apt-get install nginx-light, else nginx)"
        apt_install nginx-light nginx || die 1 "could not install nginx"
        NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    fi
fi
HAPROXY=""
if [ "$PEER" = haproxy ]; then
    HAPROXY=$(command -v haproxy || true)
    [ -z "$HAPROXY" ] && [ -x /usr/sbin/haproxy ] && HAPROXY=/usr/sbin/haproxy
    if [ -z "$HAPROXY" ]; then
        say "installing HAProxy from Debian for the peer (apt-get install haproxy)"
        apt_install haproxy || die 1 "could not install haproxy"
        HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
    fi
fi
OHA="" PACED=""
if [ -n "$RATE" ] && [ "$PACER" = paced ]; then
    for s in "${SCENARIO_LIST[@]}"; do
        is_tls "$s" && die 2 "PACER=paced speaks plain HTTP/1.1: $s needs PACER=oha"
    done
    PACED=$ROOT/target/release/paced
    [ -x "$PACED" ] || die 1 "PACER=paced needs target/release/paced: cargo build --release -p scalws-benches --bin paced"
elif [ -n "$RATE" ]; then
    OHA=$(command -v oha || true)
    [ -z "$OHA" ] && [ -x "$HOME/.cargo/bin/oha" ] && OHA=$HOME/.cargo/bin/oha
    if [ -z "$OHA" ]; then
        command -v cargo >/dev/null || die 1 "RATE needs oha, and cargo is not here to install it"
        # oha's TLS (rustls on aws-lc) builds with cmake.
        command -v cmake >/dev/null || { say "installing cmake from Debian, to build oha"; apt_install cmake || true; }
        say "installing oha for RATE (cargo install oha --locked; a few minutes)"
        timeout 1800 cargo install oha --locked >&2 || die 1 "could not install oha"
        OHA=$(command -v oha || echo "$HOME/.cargo/bin/oha")
    fi
fi
if [ "$NEEDS_H2LOAD" = 1 ] && ! command -v h2load >/dev/null; then
    say "installing h2load from Debian for tls-h2 (apt-get install nghttp2-client)"
    apt_install nghttp2-client || die 1 "could not install h2load"
fi
# The TLS scenarios need a certificate, and so does nginx as the peer (its
# configuration has the TLS server too).
if { [ "$NEEDS_TLS" = 1 ] || [ "$PEER" = nginx ]; } && ! command -v openssl >/dev/null; then
    say "installing openssl from Debian, for the benchmark's certificate"
    apt_install openssl || die 1 "could not install openssl"
fi
if [ "$NEEDS_TLS" = 1 ] && ! command -v curl >/dev/null; then
    say "installing curl from Debian, for the first request of the TLS scenarios"
    apt_install curl || die 1 "could not install curl"
fi
HAVE_CURL=0; command -v curl >/dev/null && HAVE_CURL=1

# --- helpers ----------------------------------------------------------------------

# The command prefix that pins to a role's CPUs, as an array so that `cmd &` gives
# the real PID (taskset execs its command).
pin() { PINNED=(); if [ -n "${CPUSET[$1]:-}" ]; then PINNED=(taskset -c "${CPUSET[$1]}"); fi; }

# port_open PORT, wait_port PORT PID (up to 10 s, and not once the process is gone).
# shellcheck source=benches/lib.sh
. benches/lib.sh

stop() { # pid: SIGTERM, then SIGKILL after 10 s
    local pid=$1 _
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# CPU time of the measured processes (nginx with WORKERS=N: its N workers), every
# thread included, in clock ticks, and the kernel's part of it (stime: what the
# system calls and the network stack under them cost, which no user-space change
# takes away), from one read: "TOTAL KERNEL". Empty when one is gone.
cpu_ticks() { # pid...
    local p files=()
    for p in "$@"; do files+=("/proc/$p/stat"); done
    awk -v n=$# '{ t += $14 + $15; s += $15; k++ } END { if (k == n) print t, s }' "${files[@]}" 2>/dev/null || true
}
# And their peak RSS, summed.
peak_rss_kb() { # pid...
    local p files=()
    for p in "$@"; do files+=("/proc/$p/status"); done
    awk -v n=$# '/^VmHWM:/ { t += $2; k++ } END { if (k == n) print t }' "${files[@]}" 2>/dev/null || true
}

# nginx's worker process: among the master's children (also the cache manager and
# loader when proxy_cache_path is set), the one titled "worker process".
# With WORKERS=N, all N of them, space-separated.
nginx_worker() { # master-pid; waits up to 5 s
    local _ c children found
    for _ in $(seq 50); do
        read -r -a children <<< "$(cat /proc/"$1"/task/*/children 2>/dev/null)"
        found=()
        for c in "${children[@]}"; do
            if tr '\0' ' ' < "/proc/$c/cmdline" 2>/dev/null | grep -q 'worker process'; then
                found+=("$c")
            fi
        done
        if [ "${#found[@]}" -ge "$WORKERS" ]; then echo "${found[*]}"; return 0; fi
        sleep 0.1
    done
    return 1
}

http_status() { # url: the status code of one GET, or 000
    if [ "$HAVE_CURL" = 1 ]; then
        curl -sk -o /dev/null -w '%{http_code}' --max-time 5 "$1" || true
    else
        local rest=${1#http://} hostport path line
        hostport=${rest%%/*} path=/${rest#*/}
        # shellcheck disable=SC2016 # expanded by the inner bash
        line=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1#*:}" || exit 1
            printf "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" "$2" "$1" >&3
            IFS= read -r l <&3; echo "$l"' _ "$hostport" "$path" 2>/dev/null) || true
        line=${line#* }; echo "${line:0:3}" | grep -E '^[0-9]{3}$' || echo 000
    fi
}

# The load generator's output of a scenario: wrk's text, h2load's text (tls-h2
# at its own pace) or, with RATE, oha's JSON.
load_tool() { # scenario
    if [ -n "$RATE" ]; then echo "$PACER"; elif [ "$1" = tls-h2 ]; then echo h2load; else echo wrk; fi
}

# One wrk (or h2load, or with RATE one oha at that rate), pinned to the load CPU,
# bounded, in the background so that a signal reaches the trap at once.
run_wrk() { # seconds url output scenario
    local rc=0 extra=()
    pin load
    case "$(load_tool "$4")" in
        oha)
            case "$4" in
                tls-h2) extra=(--insecure --http2);;
                tls-new) extra=(--insecure --disable-keepalive);;
                tls-*) extra=(--insecure);;
            esac
            timeout -k 5 $(( $1 + 30 )) "${PINNED[@]}" "$OHA" --no-tui --output-format json -z "$1s" \
                -c "$CONNECTIONS" -q "$RATE" --latency-correction "${extra[@]}" "$2" > "$3" 2> "$3.stderr" &
            ;;
        paced)
            timeout -k 5 $(( $1 + 30 )) "${PINNED[@]}" "$PACED" -z "$1" \
                -c "$CONNECTIONS" -q "$RATE" "$2" > "$3" 2> "$3.stderr" &
            ;;
        h2load)
            timeout -k 5 $(( $1 + 30 )) "${PINNED[@]}" h2load -t"$LOAD_THREADS" -c "$CONNECTIONS" -m1 -D "$1" "$2" > "$3" 2>&1 &
            ;;
        *)
            if [ "$4" = tls-new ]; then extra=(-H "Connection: close"); fi
            timeout -k 5 $(( $1 + 30 )) "${PINNED[@]}" wrk -t"$LOAD_THREADS" -c"$CONNECTIONS" -d"$1s" --latency "${extra[@]}" "$2" > "$3" 2>&1 &
            ;;
    esac
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=
    return "$rc"
}

# --- servers ----------------------------------------------------------------------

WORK=$(mktemp -d /tmp/scalws-multi.XXXXXX)
SERVER_PID="" ORIGIN_PID="" WRK_PID=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    trap - EXIT INT TERM
    if [ -n "$WRK_PID" ]; then kill "$WRK_PID" 2>/dev/null || true; fi
    stop "$SERVER_PID"
    stop "$ORIGIN_PID"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# Each variant runs from a copy taken now, so that a rebuild of target/ during a
# long benchmark changes nothing half-way.
declare -A ORIG_BIN=()
mkdir -p "$WORK/bin"
for label in "${VARIANT_LABELS[@]}"; do
    ORIG_BIN[$label]=${BIN[$label]}
    cp "${BIN[$label]}" "$WORK/bin/$label"
    BIN[$label]=$WORK/bin/$label
done

# nginx workers run as nobody: they write their temp files and the cache here.
mkdir -p "$WORK/nginx/cache"
chmod 755 "$WORK"
chmod -R 777 "$WORK/nginx"
# One certificate for both servers' TLS listeners (ECDSA P-256, as most sites
# have now), beside a copy of TLS_CONFIG, which names it.
if [ "$NEEDS_TLS" = 1 ] || [ "$PEER" = nginx ]; then
    mkdir -p "$WORK/tls"
    bench_cert "$WORK/tls" || die 1 "openssl could not make the benchmark's certificate"
    if [ "$NEEDS_TLS" = 1 ]; then cp "$TLS_CONFIG" "$WORK/tls/scalws-tls.yaml"; fi
fi
if [ -n "$NGINX" ]; then
    sed -e "s#NGINX_PREFIX#$WORK/nginx#g" -e "s#^worker_processes 1;#worker_processes $ORIGIN_WORKERS;#" \
        benches/configs/nginx-origin.conf > "$WORK/origin.conf"
    sed -e "s#NGINX_PREFIX#$WORK/nginx#g" -e "s#STATIC_ROOT#$ROOT/benches/configs/static#g" \
        -e "s#TLS_DIR#$WORK/tls#g" -e "s#^worker_processes 1;#worker_processes $WORKERS;#" \
        benches/configs/nginx-peer.conf > "$WORK/peer.conf"
fi

start_origin() {
    pin upstream
    "${PINNED[@]}" "$NGINX" -e /dev/stderr -c "$WORK/origin.conf" -p "$WORK/nginx" 2>> "$RESULTS/origin.log" &
    ORIGIN_PID=$!
    wait_port "$ORIGIN_PORT" "$ORIGIN_PID"
}
origin_alive() { [ -n "$ORIGIN_PID" ] && kill -0 "$ORIGIN_PID" 2>/dev/null; }

# Starts the server of a column, pinned, fresh; sets SERVER_PID (what to stop),
# CPU_PID (what to measure) and PORT (where it answers the scenario).
start_server() { # label log scenario
    pin server
    if [ "$1" = nginx ] && [ "$PEER" = nginx ]; then
        rm -rf "$WORK/nginx/cache"; mkdir -m 777 "$WORK/nginx/cache"   # a fresh cache too
        "${PINNED[@]}" "$NGINX" -e /dev/stderr -c "$WORK/peer.conf" -p "$WORK/nginx" 2> "$2" &
        SERVER_PID=$! PORT=$PEER_PORT
        wait_port "$PORT" "$SERVER_PID" || return 1
        CPU_PID=$(nginx_worker "$SERVER_PID") || return 1
        if is_tls "$3"; then PORT=$PEER_TLS_PORT; fi
    elif [ "$1" = haproxy ] && [ "$PEER" = haproxy ]; then
        # -db: in the foreground, one process (nbthread 1): the one measured.
        sed "s#^    nbthread 1\$#    nbthread $WORKERS#" "$ROOT/benches/configs/haproxy-peer.cfg" > "$WORK/haproxy.cfg"
        "${PINNED[@]}" "$HAPROXY" -db -f "$WORK/haproxy.cfg" 2> "$2" &
        SERVER_PID=$! PORT=$PEER_PORT CPU_PID=$!
        wait_port "$PORT" "$SERVER_PID" || return 1
    else
        local config=$CONFIG port=$SCALWS_PORT
        if is_tls "$3"; then config=$WORK/tls/scalws-tls.yaml port=$SCALWS_TLS_PORT; fi
        SCALWS_LOG=warn "${PINNED[@]}" "${BIN[$1]}" --config "$config" --workers "$WORKERS" 2> "$2" &
        SERVER_PID=$! PORT=$port CPU_PID=$SERVER_PID
        wait_port "$PORT" "$SERVER_PID" || return 1
    fi
}

# One measurement: writes run-N/SCENARIO.LABEL.{log,warmup.wrk,wrk,rec}.
measure() { # run scenario label position
    local run=$1 scenario=$2 label=$3 dir="$RESULTS/run-$1" base url code
    local valid=1 reason="" note="" before="" after="" sys_before="" sys_after="" hwm="" kind=variant t0 t1="" out tool scheme=http
    base="$dir/$scenario.$label"
    tool=$(load_tool "$scenario") out=$tool
    case "$tool" in oha|paced) out=$tool.json;; esac
    if is_tls "$scenario"; then scheme=https; fi
    PORT=$SCALWS_PORT
    [ "$label" = "${VARIANT_LABELS[0]}" ] && kind=first
    [ -n "$PEER" ] && [ "$label" = "$PEER" ] && kind=peer PORT=$PEER_PORT
    invalid() { [ "$valid" = 0 ] || { valid=0; reason=$1; }; }

    if [ "$NEEDS_ORIGIN" = 1 ] && [[ $scenario == proxy || $scenario == cache-hit ]] && ! origin_alive; then
        say "the origin is gone; starting it again"
        start_origin || invalid "origin did not start"
    fi
    if [ "$valid" = 1 ] && ! start_server "$label" "$base.log" "$scenario"; then
        invalid "server did not start (see $base.log)"
    fi
    url="$scheme://127.0.0.1:${PORT}${URL_PATH[$scenario]}"
    if [ "$valid" = 1 ]; then
        code=$(http_status "$url")
        [[ $code == 2?? ]] || invalid "GET $url answered $code, not 2xx"
    fi
    # ScalWS marks what it serves from its cache with Age; no Age on the second
    # request means the scenario measures the proxy, not the cache.
    if [ "$valid" = 1 ] && [ "$scenario" = cache-hit ] && [ "$kind" != peer ] && [ "$HAVE_CURL" = 1 ] &&
        ! curl -s -D - -o /dev/null --max-time 5 "$url" | grep -qi '^age:'; then
        note="no Age header on the second request: not a cache hit?"
        say "$scenario $label: $note"
    fi
    if [ "$valid" = 1 ] && [ "$WARMUP" -gt 0 ]; then
        run_wrk "$WARMUP" "$url" "$base.warmup.$out" "$scenario" || invalid "the load generator's warm-up failed"
    fi
    if [ "$valid" = 1 ]; then
        # shellcheck disable=SC2086 # CPU_PID is one PID or several
        read -r before sys_before <<< "$(cpu_ticks $CPU_PID)"; t0=$(date +%s.%N)
        run_wrk "$DURATION" "$url" "$base.$out" "$scenario" || invalid "the load generator failed"
        # shellcheck disable=SC2086
        t1=$(date +%s.%N); read -r after sys_after <<< "$(cpu_ticks $CPU_PID)"
        # shellcheck disable=SC2086
        hwm=$(peak_rss_kb $CPU_PID)
        if ! kill -0 "$SERVER_PID" 2>/dev/null || [ -z "$after" ]; then invalid "the server died"; fi
        if [[ $scenario == proxy || $scenario == cache-hit ]] && ! origin_alive; then
            invalid "the origin died"
        fi
    fi
    stop "$SERVER_PID"; SERVER_PID=
    {
        echo "run=$run"
        echo "scenario=$scenario"
        echo "variant=$label"
        echo "kind=$kind"
        echo "position=$4"
        echo "url=$url"
        echo "valid=$valid"
        echo "reason=$reason"
        echo "note=$note"
        echo "cpu_ticks_before=$before"
        echo "cpu_ticks_after=$after"
        echo "sys_ticks_before=$sys_before"
        echo "sys_ticks_after=$sys_after"
        echo "clk_tck=$CLK_TCK"
        echo "vmhwm_kb=$hwm"
        [ -n "$t1" ] && echo "wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
        echo "$tool=$(basename "$base.$out")"
    } > "$base.rec"
    python3 benches/aggregate.py --show "$base.rec" || true
}

# --- the benchmark ------------------------------------------------------------------

for port in "$SCALWS_PORT" "$ORIGIN_PORT" $([ -n "$PEER" ] && echo "$PEER_PORT") \
    $([ "$NEEDS_TLS" = 1 ] && echo "$SCALWS_TLS_PORT") $([ "$PEER" = nginx ] && echo "$PEER_TLS_PORT"); do
    port_open "$port" && die 1 "something already listens on 127.0.0.1:$port: stop it first"
done

if [ -z "${RESULTS:-}" ]; then
    RESULTS="$ROOT/results/$(IFS=-; echo "${VARIANT_LABELS[*]}")-$(date +%Y%m%d-%H%M%S)"
else
    RESULTS=$(abspath "$RESULTS")
fi
mkdir -p "$RESULTS"
CLK_TCK=$(getconf CLK_TCK)
PIN_TEXT=$PIN; [ "$PIN" = none ] && [ "$(nproc)" -lt 2 ] && PIN_TEXT="none (1 CPU)"

{
    echo "variants=${VARIANT_LABELS[*]}"
    echo "columns=${LABELS[*]}"
    echo "peer=$PEER"
    echo "peer_skip=$PEER_SKIP"
    echo "scenarios=${SCENARIO_LIST[*]}"
    echo "runs=$RUNS"
    echo "warmup=$WARMUP"
    echo "duration=$DURATION"
    echo "connections=$CONNECTIONS"
    echo "workers=$WORKERS"
    echo "load_threads=$LOAD_THREADS"
    echo "rate=$RATE"
    echo "pacer=$PACER"
    echo "pin=$PIN_TEXT"
    echo "gate_rps=$GATE_RPS"
    echo "gate_cpu=$GATE_CPU"
} > "$RESULTS/settings.env"
{
    echo "date: $(date -Is)"
    echo "host: $(uname -srm), $(nproc) CPUs"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (work tree modified)')"
    echo "config: $CONFIG"
    for label in "${VARIANT_LABELS[@]}"; do
        echo "variant $label: ${ORIG_BIN[$label]} sha256 $(sha256sum "${BIN[$label]}" | cut -c1-16) $("${BIN[$label]}" --version 2>/dev/null || true)"
    done
    [ "$PEER" = nginx ] && echo "peer nginx: $NGINX $("$NGINX" -v 2>&1)"
    [ "$PEER" = haproxy ] && echo "peer haproxy: $HAPROXY $("$HAPROXY" -v 2>&1 | head -1)"
    echo "wrk: $(wrk --version 2>&1 | head -1)"
    [ "$NEEDS_H2LOAD" = 1 ] && echo "h2load: $(h2load --version 2>&1 | head -1)"
    [ "$NEEDS_TLS" = 1 ] && echo "tls config: $TLS_CONFIG; certificate ECDSA P-256, $(openssl version)"
    if [ -n "$RATE" ] && [ "$PACER" = paced ]; then echo "paced: $PACED, -q $RATE"
    elif [ -n "$RATE" ]; then echo "oha: $OHA $("$OHA" --version 2>&1 | head -1), -q $RATE --latency-correction"; fi
} > "$RESULTS/meta.txt"

for label in "${VARIANT_LABELS[@]}"; do
    "${BIN[$label]}" --check --config "$CONFIG" >/dev/null 2>"$RESULTS/check.$label.log" ||
        say "variant $label rejects $CONFIG (see $RESULTS/check.$label.log): its measurements will be invalid"
    if [ "$NEEDS_TLS" = 1 ]; then
        "${BIN[$label]}" --check --config "$WORK/tls/scalws-tls.yaml" >/dev/null 2>"$RESULTS/check-tls.$label.log" ||
            say "variant $label rejects $TLS_CONFIG (see $RESULTS/check-tls.$label.log): its TLS measurements will be invalid"
    fi
done

COLUMNS_N=${#LABELS[@]}
total=$(( RUNS * ${#SCENARIO_LIST[@]} * COLUMNS_N ))
say "$total measurements of ${WARMUP}+${DURATION} s: about $(( total * (WARMUP + DURATION + 2) / 60 + 1 )) min; results in $RESULTS"

if [ "$NEEDS_ORIGIN" = 1 ]; then
    start_origin || die 1 "the origin nginx did not start (see $RESULTS/origin.log)"
fi

for run in $(seq "$RUNS"); do
    mkdir -p "$RESULTS/run-$run"
    order=()
    for i in $(seq 0 $(( COLUMNS_N - 1 ))); do
        order+=("${LABELS[$(( (i + run - 1) % COLUMNS_N ))]}")
    done
    say "run $run/$RUNS: ${order[*]}"
    for scenario in "${SCENARIO_LIST[@]}"; do
        pos=0
        for label in "${order[@]}"; do
            skipped "$label" "$scenario" && continue
            pos=$(( pos + 1 ))
            measure "$run" "$scenario" "$label" "$pos"
        done
    done
done

stop "$ORIGIN_PID"; ORIGIN_PID=
rc=0
python3 benches/aggregate.py "$RESULTS" || rc=$?
exit "$rc"
