#!/usr/bin/env bash
# Peak resident memory of one server process that serves the four scenarios of
# benches/multi.sh in turn (static-small, respond, proxy, cache-hit), each with
# wrk at CONNECTIONS connections for DURATION seconds: ScalWS as built, ScalWS
# with transparent huge pages off for the process (MIMALLOC_ALLOW_THP=0: the same
# as built where the system's THP setting is `madvise` or `never`, less where it
# is `always`; docs/benchmarks.md, "Peak memory"), and nginx, one after
# the other, each one process from start to end. After each scenario it prints
# the server's VmHWM (peak RSS so far); at the end also its resident memory
# split into anonymous (the heap, stacks: private to the process) and
# file-backed (the binary's code and read-only data, shared with every other
# process running the same binary, and reclaimable).
# It builds nothing: build first with `cargo build --release -p scalwsd`.
#
#   benches/rss.sh
#   SERVERS="scalws nginx" DURATION=5 benches/rss.sh
#
# Settings (environment): SERVERS ("scalws scalws-nothp nginx"), BIN
# (target/release/scalwsd), DURATION (10), CONNECTIONS (64). The server runs on
# CPU 0, wrk and the origin (nginx, configs/nginx-origin.conf) on CPU 1.
# Installs wrk and nginx (nginx-light) from Debian when they are missing, and
# says so. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SERVERS="${SERVERS:-scalws scalws-nothp nginx}"
BIN="${BIN:-target/release/scalwsd}"
DURATION="${DURATION:-10}"
CONNECTIONS="${CONNECTIONS:-64}"
SCENARIOS=(static-small respond proxy cache-hit)
declare -A URL_PATH=([static-small]=/static/small.html [respond]=/respond [proxy]=/proxy [cache-hit]=/cache/hit)

say() { echo "rss.sh: $*" >&2; }
[ -x "$BIN" ] || { say "$BIN missing; run: cargo build --release -p scalwsd"; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
# shellcheck source=benches/lib.sh
. benches/lib.sh
need wrk wrk
need nginx nginx-light nginx
need openssl openssl
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
# The server on CPU 0, the load and the origin on CPU 1 (taskset execs, so a
# process started as `"${CPU0[@]}" cmd &` is cmd itself).
CPU0=() CPU1=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then CPU0=(taskset -c 0) CPU1=(taskset -c 1); fi

WORK=$(mktemp -d)
SERVER_PID="" ORIGIN_PID=""
cleanup() {
    local pid
    for pid in "$SERVER_PID" "$ORIGIN_PID"; do
        if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# nginx workers run as nobody: they write their temp files and cache here. The
# peer configuration has a TLS server too, which needs a certificate.
mkdir -p "$WORK/nginx/cache" "$WORK/tls"
chmod 755 "$WORK"; chmod -R 777 "$WORK/nginx"
bench_cert "$WORK/tls"
sed -e "s#NGINX_PREFIX#$WORK/nginx#g" benches/configs/nginx-origin.conf > "$WORK/origin.conf"
sed -e "s#NGINX_PREFIX#$WORK/nginx#g" -e "s#STATIC_ROOT#$ROOT/benches/configs/static#g" \
    -e "s#TLS_DIR#$WORK/tls#g" benches/configs/nginx-peer.conf > "$WORK/peer.conf"

"${CPU1[@]}" "$NGINX" -e /dev/stderr -c "$WORK/origin.conf" -p "$WORK/nginx" 2> "$WORK/origin.log" &
ORIGIN_PID=$!
wait_port 18090 "$ORIGIN_PID"
for port in 18080 18081; do
    ! port_open "$port" || { say "something already listens on 127.0.0.1:$port"; exit 1; }
done

status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

printf '%-13s %-13s %10s %10s\n' server "after" "req/s" "peak RSS"
for server in $SERVERS; do
    case "$server" in
        scalws|scalws-nothp)
            thp=1; [ "$server" = scalws-nothp ] && thp=0
            # The static root in scalws.yaml is relative to the file's directory.
            (cd benches/configs && MIMALLOC_ALLOW_THP=$thp SCALWS_LOG=warn \
                exec "${CPU0[@]}" "$BIN" --config scalws.yaml --workers 1 2> "$WORK/server.log") &
            SERVER_PID=$!; port=18080
            wait_port "$port" "$SERVER_PID"
            measured=$SERVER_PID
            ;;
        nginx)
            "${CPU0[@]}" "$NGINX" -e /dev/stderr -c "$WORK/peer.conf" -p "$WORK/nginx" 2> "$WORK/server.log" &
            SERVER_PID=$!; port=18081
            wait_port "$port" "$SERVER_PID"
            sleep 0.5
            measured=$(pgrep -P "$SERVER_PID" -f 'worker process' | head -1)
            ;;
        *) say "unknown server $server (scalws, scalws-nothp, nginx)"; exit 2;;
    esac
    printf '%-13s %-13s %10s %10s\n' "$server" start - "$(mib "$(status_kib "$measured" VmHWM)")"
    for scenario in "${SCENARIOS[@]}"; do
        url="http://127.0.0.1:$port${URL_PATH[$scenario]}"
        code=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
        [ "$code" = 200 ] || { say "$server answered $code to $url"; tail -5 "$WORK/server.log" >&2; exit 3; }
        out=$("${CPU1[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$url")
        rps=$(awk '/^Requests\/sec:/ {printf "%d", $2}' <<< "$out")
        printf '%-13s %-13s %10s %10s\n' "$server" "$scenario" "$rps" "$(mib "$(status_kib "$measured" VmHWM)")"
    done
    printf '%-13s %-13s %10s %10s   (now: anonymous %s, file-backed %s)\n' "$server" "peak" - \
        "$(mib "$(status_kib "$measured" VmHWM)")" \
        "$(mib "$(status_kib "$measured" RssAnon)")" "$(mib "$(status_kib "$measured" RssFile)")"
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
done
