#!/usr/bin/env bash
# `respond` over TLS: h2load (HTTP/2 over TLS, 64 clients) and h3load (this
# workspace's HTTP/3 load tool) against scalwsd with one worker pinned to
# CPU 0, the load on CPU 1. It builds nothing: first run
#   cargo build --release -p scalwsd -p scalws-benches
#
#   benches/tls.sh
#   DURATION=30 benches/tls.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-10}"
BIN="${BIN:-target/release/scalwsd}"
H3LOAD="${H3LOAD:-target/release/h3load}"

if ! command -v h2load >/dev/null; then
    echo "tls.sh: installing h2load from Debian (apt-get install nghttp2-client)" >&2
    apt-get update -qq && apt-get install -y -qq nghttp2-client >/dev/null
fi
for f in "$BIN" "$H3LOAD"; do
    [ -x "$f" ] || { echo "tls.sh: $f missing; run: cargo build --release -p scalwsd -p scalws-benches" >&2; exit 1; }
done

TMP=$(mktemp -d)
cleanup() { [ -n "${SCALWS_PID:-}" ] && kill "$SCALWS_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_cert "$TMP"
cp benches/configs/tls.yaml "$TMP/tls.yaml"

pin() { PIN=(); if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN=(taskset -c "$1"); fi; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

pin 0
SCALWS_LOG=warn "${PIN[@]}" "$BIN" --config "$TMP/tls.yaml" --workers 1 &
SCALWS_PID=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/18443) 2>/dev/null && break; sleep 0.1; done

report() { # name requests before after
    awk -v n="$1" -v q="$2" -v t=$(( $4 - $3 )) -v hz="$(getconf CLK_TCK)" -v d="$DURATION" \
        'BEGIN { printf "%-10s %10.0f req/s   %6.2f us CPU/request\n", n, q / d, t / hz * 1e6 / q }'
}

pin 1
before=$(cpu_ticks "$SCALWS_PID")
"${PIN[@]}" h2load -c 64 -m 1 -D "$DURATION" https://127.0.0.1:18443/ > "$TMP/h2load.txt"
after=$(cpu_ticks "$SCALWS_PID")
done_h2=$(awk '/^requests:/ {print $8}' "$TMP/h2load.txt")
grep -E "^requests:|^status codes:" "$TMP/h2load.txt"
report "https/h2" "$done_h2" "$before" "$after"

before=$(cpu_ticks "$SCALWS_PID")
"${PIN[@]}" "$H3LOAD" --addr 127.0.0.1:18443 --host bench.test --connections 4 --streams 16 --duration "$DURATION" | tee "$TMP/h3load.txt"
after=$(cpu_ticks "$SCALWS_PID")
done_h3=$(awk '{print $2}' "$TMP/h3load.txt")
report "http3" "$done_h3" "$before" "$after"
