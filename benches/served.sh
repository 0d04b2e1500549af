#!/usr/bin/env bash
# Instructions per request of the real scalwsd binary, served to h2load:
# what benches/instructions.sh cannot see (HTTP/2, TLS, scalwsd's own
# runtime), counted the same way, and (PEER=nginx) the same count for nginx
# serving the same requests. The server runs under valgrind's callgrind with
# benches/configs/scalws-tls.yaml (respond over TLS on 127.0.0.1:18443) or
# scalws.yaml (the four scenarios of multi.sh over plain HTTP/1.1 on
# 127.0.0.1:18080); h2load sends FEW requests in one run and MANY in another
# (16 connections, one stream at a time each), and the difference in the
# server's instructions divided by the difference in requests is the cost of
# one request, start-up, handshakes and shutdown cancelled out. h2load's (and
# the origin's) instructions are not counted; nor is the kernel's work, which
# callgrind does not see.
#
#   benches/served.sh                                   # tls-h2 and h1, BIN
#   BASE=/tmp/scalwsd-old NEW=target/release/scalwsd benches/served.sh   # A/B
#   PEER=nginx SCENARIOS="h1 static-small proxy cache-hit tls-h2" benches/served.sh
#
# Scenarios: tls-h2, tls-h1 (respond over TLS, HTTP/2 or HTTP/1.1), h1
# (respond), static-small, proxy and cache-hit (plain HTTP/1.1, as in
# multi.sh; proxy and cache-hit go to an nginx origin on 127.0.0.1:18090,
# configs/nginx-origin.conf, started here and not counted).
#
# Variables:
#   BIN        the scalwsd binary (default target/release/scalwsd)
#   BASE, NEW  two binaries for an A/B (each row then has both and new/base)
#   PEER       "nginx": also count nginx (configs/nginx-peer.conf, one worker,
#              on 127.0.0.1:18081 and, for TLS, 18444) serving the same
#              requests; the row then has BIN's count, nginx's and their ratio.
#              nginx's worker is counted (callgrind follows its fork), not its
#              master or cache processes.
#   SCENARIOS  any of "tls-h2 tls-h1 h1 static-small proxy cache-hit"
#              (default "tls-h2 h1")
#   FEW, MANY  request counts of the two runs (default 2000 and 6000)
#   CONNECTIONS  h2load's connections (default 16; the load runs of multi.sh
#              use 64, whose state no longer fits in the first-level caches)
#   CACHE      1: simulate the caches too (callgrind --cache-sim=yes, with the
#              first-level instruction and data caches this CPU reports) and
#              print, per request, the instruction-cache misses (I1) and the
#              data-cache misses (D1, reads and writes) beside the
#              instructions: what makes the same instructions take longer,
#              on a machine without hardware counters. About twice as slow.
#
# It builds nothing (`cargo build --release -p scalwsd`). It installs
# valgrind, h2load (nghttp2-client), openssl and, when a scenario or PEER
# needs it, nginx (nginx-light) from Debian when missing, and says so.
# Everything listens on 127.0.0.1; each run is bounded by a timeout. A
# callgrind run of 6,000 requests takes about half a minute.
set -euo pipefail
# A failed count inside $(...) stops the script instead of printing nonsense.
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
. benches/lib.sh

say() { echo "served.sh: $*" >&2; }

SCENARIOS="${SCENARIOS:-tls-h2 h1}"
FEW="${FEW:-2000}"
MANY="${MANY:-6000}"
CONNECTIONS="${CONNECTIONS:-16}"
CACHE="${CACHE:-}"
case "$CACHE" in ""|0|1) ;; *) say "CACHE is 1 or empty, not '$CACHE'"; exit 2 ;; esac
[ "$CACHE" = 0 ] && CACHE=
VALGRIND=(valgrind --tool=callgrind ${CACHE:+--cache-sim=yes})
[ "$MANY" -gt "$FEW" ] || { say "MANY ($MANY) must be more than FEW ($FEW)"; exit 2; }

need valgrind valgrind
need h2load nghttp2-client
need openssl openssl

case "${PEER:-}" in
    ""|nginx) ;;
    *) say "PEER is nginx or empty, not '$PEER'"; exit 2 ;;
esac
if [ -n "${PEER:-}" ] && { [ -n "${BASE:-}" ] || [ -n "${NEW:-}" ]; }; then
    say "PEER goes with BIN, not with BASE and NEW"; exit 2
fi
NEEDS_NGINX=${PEER:+1}
for scenario in $SCENARIOS; do
    case "$scenario" in
        tls-h2|tls-h1|h1|static-small) ;;
        proxy|cache-hit) NEEDS_NGINX=1 ;;
        *) say "unknown scenario $scenario"; exit 2 ;;
    esac
done
NGINX=
if [ -n "$NEEDS_NGINX" ]; then
    NGINX=$(command -v nginx || true)
    [ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
    if [ -z "$NGINX" ]; then
        need nginx nginx-light
        NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    fi
fi

WORK=$(mktemp -d)
ORIGIN_PID=
cleanup() {
    pkill -f "callgrind-out-file=$WORK" 2>/dev/null || true
    [ -z "$ORIGIN_PID" ] || kill -QUIT "$ORIGIN_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
bench_cert "$WORK"
cp benches/configs/scalws-tls.yaml "$WORK/tls.yaml"
cp benches/configs/scalws.yaml "$WORK/plain.yaml"
cp -r benches/configs/static "$WORK/"
if [ -n "$NGINX" ]; then
    # nginx's workers run as nobody: their temp files, cache and callgrind
    # output go here.
    mkdir -p "$WORK/nginx/cache" "$WORK/cg"
    chmod 644 "$WORK/bench-key.pem"
    chmod -R 777 "$WORK/nginx" "$WORK/cg"
    chmod 755 "$WORK"
    sed -e "s#NGINX_PREFIX#$WORK/nginx#g" benches/configs/nginx-origin.conf > "$WORK/origin.conf"
    sed -e "s#NGINX_PREFIX#$WORK/nginx#g" -e "s#STATIC_ROOT#$PWD/benches/configs/static#g" \
        -e "s#TLS_DIR#$WORK#g" benches/configs/nginx-peer.conf > "$WORK/peer.conf"
fi
if [[ " $SCENARIOS " == *" proxy "* || " $SCENARIOS " == *" cache-hit "* ]]; then
    if port_open 18090; then say "127.0.0.1:18090 (the origin's) is in use"; exit 1; fi
    "$NGINX" -e /dev/stderr -c "$WORK/origin.conf" -p "$WORK/nginx" 2> "$WORK/origin.log" &
    ORIGIN_PID=$!
    wait_port 18090 "$ORIGIN_PID" || { cat "$WORK/origin.log" >&2; exit 1; }
fi

# counts_of FILE: the totals of a callgrind output file: its instructions,
# and with CACHE its I1 misses and D1 misses (reads and writes), by name.
counts_of() {
    awk -v cache="$CACHE" '
        /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
        /^(summary|totals):/ {
            if (cache) print $(col["Ir"]), $(col["I1mr"]), $(col["D1mr"]) + $(col["D1mw"])
            else print $(col["Ir"])
            exit
        }' "$1"
}

# count SERVER SCENARIO N: the server's instructions (and, with CACHE, its
# misses) while it serves N requests; SERVER is a scalwsd binary or "nginx".
count() {
    local bin=$1 scenario=$2 n=$3 config path=/respond tls=0 flags=(--h1) port url
    case "$scenario" in
        tls-h2) config=tls.yaml; tls=1; flags=() ;;
        tls-h1) config=tls.yaml; tls=1 ;;
        h1) config=plain.yaml ;;
        static-small) config=plain.yaml; path=/static/small.html ;;
        proxy) config=plain.yaml; path=/proxy ;;
        cache-hit) config=plain.yaml; path=/cache/hit ;;
    esac
    if [ "$bin" = nginx ]; then
        port=$([ "$tls" = 1 ] && echo 18444 || echo 18081)
    else
        port=$([ "$tls" = 1 ] && echo 18443 || echo 18080)
    fi
    url=$([ "$tls" = 1 ] && echo https || echo http)://127.0.0.1:$port$path
    local out="$WORK/cg/$scenario.$n" log="$WORK/vg.$scenario.$n"
    mkdir -p "$WORK/cg"
    if port_open "$port"; then say "127.0.0.1:$port is in use"; exit 1; fi
    if [ "$bin" = nginx ]; then
        # One file per process (%p): the master, the worker and the cache's.
        rm -f "$out".*
        (cd "$WORK" && exec "${VALGRIND[@]}" --callgrind-out-file="$out.%p" \
            "$NGINX" -e /dev/stderr -c "$WORK/peer.conf" -p "$WORK/nginx" >/dev/null 2>"$log") &
    else
        (cd "$WORK" && SCALWS_LOG=warn exec "${VALGRIND[@]}" --callgrind-out-file="$out" \
            "$bin" --config "$config" >/dev/null 2>"$log") &
    fi
    local vg=$!
    # valgrind starts slowly: up to a minute, while it runs.
    local tries=0
    until port_open "$port"; do
        tries=$((tries + 1))
        if [ "$tries" -gt 600 ] || ! kill -0 "$vg" 2>/dev/null; then
            say "$bin did not listen on $port:"; cat "$log" >&2; kill "$vg" 2>/dev/null; exit 1
        fi
        sleep 0.1
    done
    # The first request of cache-hit fills the cache; it is in both runs.
    if ! timeout 300 h2load -n "$n" -c "$CONNECTIONS" -m1 "${flags[@]}" "$url" > "$WORK/h2load.txt" 2>&1 \
        || ! grep -q "^requests: $n total, $n started, $n done, $n succeeded" "$WORK/h2load.txt"; then
        say "h2load did not get $n answers from $bin:"; cat "$WORK/h2load.txt" >&2
        kill "$vg" 2>/dev/null; exit 1
    fi
    if [ "$bin" = nginx ]; then
        # The master waits for its worker to exit, which writes its counts.
        kill -QUIT "$vg"; wait "$vg" 2>/dev/null || true
        # The worker is the process that served: the one with the most instructions.
        local most=0 busiest= file total
        for file in "$out".*; do
            total=$(counts_of "$file" | cut -d' ' -f1)
            if [ "${total:-0}" -gt "$most" ]; then most=$total; busiest=$file; fi
        done
        counts_of "$busiest"
    else
        kill -INT "$vg"; wait "$vg" 2>/dev/null || true
        counts_of "$out"
    fi
}

per_request() {
    local few many server=$1
    # The server runs in the scratch directory: a binary's path must not be relative.
    [ "$server" = nginx ] || server=$(realpath "$server")
    few=$(count "$server" "$2" "$FEW"); many=$(count "$server" "$2" "$MANY")
    python3 -c "
few, many = '$few'.split(), '$many'.split()
print(' '.join(f'{(int(m) - int(f)) / ($MANY - $FEW):.1f}' for f, m in zip(few, many)))"
}

LABELS=(instructions "I1 misses" "D1 misses")
# The two-column tables (BASE and NEW, BIN and nginx). table A B RATIO: the
# header. row SCENARIO A B ORDER DIGITS: A's and B's counts (with CACHE, a
# line per measure) and their ratio, a/b or b/a as ORDER says.
table() {
    if [ -n "$CACHE" ]; then
        printf '%-13s %-13s %14s %14s %12s\n' scenario measure "$@"
    else
        printf '%-13s %14s %14s %12s\n' scenario "$@"
    fi
}
row() {
    local -a a b
    read -r -a a <<< "$2"; read -r -a b <<< "$3"
    local i num den ratio
    for i in "${!a[@]}"; do
        num=${a[$i]} den=${b[$i]}
        [ "$4" = a/b ] || { num=${b[$i]}; den=${a[$i]}; }
        ratio=$(python3 -c "print(f'{$num / $den:.$5f}' if $den else '-')")
        if [ -n "$CACHE" ]; then
            printf '%-13s %-13s %14s %14s %12s\n' "$1" "${LABELS[$i]}" "${a[$i]}" "${b[$i]}" "$ratio"
        else
            printf '%-13s %14s %14s %12s\n' "$1" "${a[$i]}" "${b[$i]}" "$ratio"
        fi
    done
}

if [ -n "${BASE:-}" ] || [ -n "${NEW:-}" ]; then
    : "${BASE:?BASE and NEW go together}" "${NEW:?BASE and NEW go together}"
    table base new new/base
    for scenario in $SCENARIOS; do
        base=$(per_request "$BASE" "$scenario"); new=$(per_request "$NEW" "$scenario")
        row "$scenario" "$base" "$new" b/a 5
    done
elif [ -n "${PEER:-}" ]; then
    BIN="${BIN:-target/release/scalwsd}"
    table scalws nginx scalws/nginx
    for scenario in $SCENARIOS; do
        ours=$(per_request "$BIN" "$scenario"); theirs=$(per_request nginx "$scenario")
        row "$scenario" "$ours" "$theirs" a/b 3
    done
else
    BIN="${BIN:-target/release/scalwsd}"
    measures=1
    [ -z "$CACHE" ] || measures=${#LABELS[@]}
    printf '%-13s' scenario; printf ' %14s' "${LABELS[@]:0:$measures}"; echo
    for scenario in $SCENARIOS; do
        counted=$(per_request "$BIN" "$scenario")
        read -r -a got <<< "$counted"
        printf '%-13s' "$scenario"; printf ' %14s' "${got[@]}"; echo
    done
fi
