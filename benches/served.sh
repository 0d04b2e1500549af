#!/usr/bin/env bash
# Instructions per request of the real scalwsd binary, served to h2load:
# what benches/instructions.sh cannot see (HTTP/2, TLS), counted the same
# way. scalwsd runs under valgrind's callgrind with benches/configs/
# scalws-tls.yaml (respond over TLS on 127.0.0.1:18443) or scalws.yaml
# (respond over plain HTTP/1.1 on 127.0.0.1:18080); h2load sends FEW
# requests in one run and MANY in another (16 connections, one stream at a
# time each), and the difference in scalwsd's instructions divided by the
# difference in requests is the cost of one request, start-up, handshakes
# and shutdown cancelled out. h2load's own instructions are not counted.
#
#   benches/served.sh                                   # tls-h2 and h1, BIN
#   BASE=/tmp/scalwsd-old NEW=target/release/scalwsd benches/served.sh   # A/B
#
# Variables:
#   BIN        the scalwsd binary (default target/release/scalwsd)
#   BASE, NEW  two binaries for an A/B (each row then has both and new/base)
#   SCENARIOS  a subset of "tls-h2 tls-h1 h1" (default "tls-h2 h1")
#   FEW, MANY  request counts of the two runs (default 2000 and 6000)
#
# It builds nothing (`cargo build --release -p scalwsd`). It installs
# valgrind, h2load (nghttp2-client) and openssl from Debian when missing,
# and says so. Everything listens on 127.0.0.1; each run is bounded by a
# timeout. A callgrind run of 6,000 requests takes about half a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

say() { echo "served.sh: $*" >&2; }

SCENARIOS="${SCENARIOS:-tls-h2 h1}"
FEW="${FEW:-2000}"
MANY="${MANY:-6000}"
[ "$MANY" -gt "$FEW" ] || { say "MANY ($MANY) must be more than FEW ($FEW)"; exit 2; }

need() {
    command -v "$1" >/dev/null && return
    say "installing $1 from Debian (apt-get install $2)"
    { apt-get update -q && apt-get install -y -q "$2"; } >/dev/null 2>&1 || { say "could not install $2"; exit 1; }
}
need valgrind valgrind
need h2load nghttp2-client
need openssl openssl

WORK=$(mktemp -d)
trap 'pkill -f "callgrind-out-file=$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -keyout "$WORK/bench-key.pem" -out "$WORK/bench-cert.pem" 2>/dev/null
cp benches/configs/scalws-tls.yaml "$WORK/tls.yaml"
cp benches/configs/scalws.yaml "$WORK/plain.yaml"
cp -r benches/configs/static "$WORK/"

# count BIN SCENARIO N: scalwsd's instructions while it serves N requests.
count() {
    local bin=$1 scenario=$2 n=$3 config url port flags=()
    case "$scenario" in
        tls-h2) config=tls.yaml; url=https://127.0.0.1:18443/respond; port=18443 ;;
        tls-h1) config=tls.yaml; url=https://127.0.0.1:18443/respond; port=18443; flags=(--h1) ;;
        h1) config=plain.yaml; url=http://127.0.0.1:18080/respond; port=18080; flags=(--h1) ;;
        *) say "unknown scenario $scenario"; exit 2 ;;
    esac
    local out="$WORK/cg.$scenario.$n" log="$WORK/vg.$scenario.$n"
    if port_open "$port"; then say "127.0.0.1:$port is in use"; exit 1; fi
    (cd "$WORK" && SCALWS_LOG=warn exec valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" --config "$config" >/dev/null 2>"$log") &
    local vg=$!
    # valgrind starts slowly: up to a minute, while it runs.
    local tries=0
    until port_open "$port"; do
        tries=$((tries + 1))
        if [ "$tries" -gt 600 ] || ! kill -0 "$vg" 2>/dev/null; then
            say "scalwsd did not listen on $port:"; cat "$log" >&2; kill "$vg" 2>/dev/null; exit 1
        fi
        sleep 0.1
    done
    if ! timeout 300 h2load -n "$n" -c 16 -m1 "${flags[@]}" "$url" > "$WORK/h2load.txt" 2>&1 \
        || ! grep -q "^requests: $n total, $n started, $n done, $n succeeded" "$WORK/h2load.txt"; then
        say "h2load did not get $n answers:"; cat "$WORK/h2load.txt" >&2
        kill "$vg" 2>/dev/null; exit 1
    fi
    kill -INT "$vg"; wait "$vg" 2>/dev/null || true
    grep -o 'refs: *[0-9,]*' "$log" | tr -dc 0-9
}

per_request() {
    local few many
    few=$(count "$1" "$2" "$FEW"); many=$(count "$1" "$2" "$MANY")
    python3 -c "print(f'{($many - $few) / ($MANY - $FEW):.1f}')"
}

if [ -n "${BASE:-}" ] || [ -n "${NEW:-}" ]; then
    : "${BASE:?BASE and NEW go together}" "${NEW:?BASE and NEW go together}"
    printf '%-10s %14s %14s %9s\n' scenario base new new/base
    for scenario in $SCENARIOS; do
        base=$(per_request "$BASE" "$scenario"); new=$(per_request "$NEW" "$scenario")
        printf '%-10s %14s %14s %9s\n' "$scenario" "$base" "$new" "$(python3 -c "print(f'{$new / $base:.5f}')")"
    done
else
    BIN="${BIN:-target/release/scalwsd}"
    printf '%-10s %14s\n' scenario instructions/request
    for scenario in $SCENARIOS; do
        printf '%-10s %14s\n' "$scenario" "$(per_request "$BIN" "$scenario")"
    done
fi
