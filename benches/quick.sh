#!/usr/bin/env bash
# A first, rough figure for one scenario, ScalWS against nginx in one run:
# wrk, 64 connections, DURATION seconds, the server (one worker) pinned to
# CPU 0, wrk (and, for `proxy`, the origin) on CPU 1. Reports req/s, server
# CPU microseconds per request, p99 and the ratio. It builds nothing: build
# first with `cargo build --release -p scalwsd`.
#
#   benches/quick.sh                       # respond, 10 s per server
#   SCENARIO=proxy benches/quick.sh        # proxy to a local nginx origin
#   SCENARIO=cache-hit benches/quick.sh    # the same behind the response cache
#   DURATION=30 benches/quick.sh
#
# For comparisons that decide anything, use multi.sh (several runs, rotation,
# medians, a gate) and instructions.sh (instruction counts, noise-free).
set -euo pipefail
cd "$(dirname "$0")/.."

SCENARIO="${SCENARIO:-respond}"
DURATION="${DURATION:-10}"
CONNECTIONS="${CONNECTIONS:-64}"
BIN="${BIN:-target/release/scalwsd}"

case "$SCENARIO" in respond|proxy|cache-hit) ;; *) echo "quick.sh: SCENARIO is respond, proxy or cache-hit" >&2; exit 2;; esac
if ! command -v wrk >/dev/null; then
    echo "quick.sh: installing wrk from Debian (apt-get install wrk)" >&2
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
[ -x "$BIN" ] || { echo "quick.sh: $BIN missing; run: cargo build --release -p scalwsd" >&2; exit 1; }

# `taskset -c N` when there are two CPUs or more; an array, so `cmd &` gives the real PID.
pin() { PIN=(); if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN=(taskset -c "$1"); fi; }

# shellcheck source=benches/lib.sh
. benches/lib.sh

# CPU time (user + system, in clock ticks) of a process and its children threads.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

measure() { # name port server-pid
    local before after rps requests p99 errors
    before=$(cpu_ticks "$3")
    pin 1; "${PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$2/" > "$TMP/$1.wrk"
    after=$(cpu_ticks "$3")
    rps=$(awk '/^Requests\/sec/ {print $2}' "$TMP/$1.wrk")
    requests=$(awk '/requests in/ {print $1}' "$TMP/$1.wrk")
    p99=$(awk '$1 == "99%" {print $2}' "$TMP/$1.wrk")
    errors=$(grep -E "Non-2xx|Socket errors" "$TMP/$1.wrk" || true)
    awk -v n="$1" -v r="$rps" -v p="$p99" -v t=$((after - before)) -v q="$requests" -v hz="$(getconf CLK_TCK)" -v e="$errors" \
        'BEGIN { printf "%-8s %12s req/s   %6.2f us CPU/request   p99 %8s   %s\n", n, r, t / hz * 1e6 / q, p, e }'
    echo "$rps" > "$TMP/$1.rps"
}

TMP=$(mktemp -d)
cleanup() {
    for pid in "${SCALWS_PID:-}" "${NGINX_PID:-}" "${ORIGIN_PID:-}"; do
        [ -n "$pid" ] && kill "$pid" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
mkdir -p "$TMP/nginx/cache"
# nginx workers run as nobody: they write the cache and temp files here.
chmod 755 "$TMP"
chmod -R 777 "$TMP/nginx"
if [ "$SCENARIO" != respond ]; then
    [ -x "$NGINX" ] || { echo "quick.sh: the $SCENARIO scenario needs nginx as its origin (apt-get install nginx-light)" >&2; exit 1; }
    sed "s#NGINX_PREFIX#$TMP/nginx#g" benches/configs/nginx-origin.conf > "$TMP/origin.conf"
    pin 1
    "${PIN[@]}" "$NGINX" -c "$TMP/origin.conf" -p "$TMP/nginx" &
    ORIGIN_PID=$!
    wait_port 18090
fi

pin 0
SCALWS_LOG=warn "${PIN[@]}" "$BIN" --config "benches/configs/$SCENARIO.yaml" --workers 1 &
SCALWS_PID=$!
wait_port 18080
measure scalws 18080 "$SCALWS_PID"
kill "$SCALWS_PID"; wait "$SCALWS_PID" 2>/dev/null || true; SCALWS_PID=

if [ -x "$NGINX" ]; then
    sed "s#NGINX_PREFIX#$TMP/nginx#g" "benches/configs/nginx-$SCENARIO.conf" > "$TMP/nginx.conf"
    pin 0
    "${PIN[@]}" "$NGINX" -c "$TMP/nginx.conf" -p "$TMP/nginx" &
    NGINX_PID=$!
    wait_port 18081
    # nginx's worker is the master's only child.
    measure nginx 18081 "$(pgrep -P "$NGINX_PID" | head -1)"
    kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true; NGINX_PID=
    awk -v a="$(cat "$TMP/scalws.rps")" -v b="$(cat "$TMP/nginx.rps")" \
        'BEGIN { printf "ratio    scalws/nginx = %.2f\n", a / b }'
else
    echo "nginx not installed: no peer column (apt-get install nginx-light)"
fi
