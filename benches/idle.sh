#!/usr/bin/env bash
# Resident memory per idle keep-alive connection, ScalWS against nginx in one
# run: each server (one worker) answers one request on each of N connections
# (benches/idle_client.py), which then stay open and idle; the server's
# VmRSS is read before the connections are opened (after one warm-up
# request) and once they are all idle, and the difference is divided by N.
# It builds nothing: build first with `cargo build --release -p scalwsd`.
#
#   benches/idle.sh                         # N=10000, HTTP/1.1, then HTTP/2
#   N=4000 PROTOS=http1 benches/idle.sh
#   BIN=/tmp/scalwsd-old benches/idle.sh    # another build
#   PROTOS="tls-h1 tls-h2" benches/idle.sh  # the same over TLS (ALPN)
#
# Settings (environment): N (10000), PROTOS ("http1 h2"; also tls-h1 and
# tls-h2: TLS 1.3 with an ECDSA P-256 certificate made with openssl for the
# run), BIN (target/release/scalwsd), SETTLE (seconds to wait once all are
# idle, 2). Installs nginx (nginx-light), and openssl for the TLS protocols,
# from Debian when they are missing, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${N:-10000}"
PROTOS="${PROTOS:-http1 h2}"
BIN="${BIN:-target/release/scalwsd}"
SETTLE="${SETTLE:-2}"

[ -x "$BIN" ] || { echo "idle.sh: $BIN missing; run: cargo build --release -p scalwsd" >&2; exit 1; }
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    echo "idle.sh: installing nginx from Debian (apt-get install nginx-light)" >&2
    apt-get update -qq && { apt-get install -y -qq nginx-light >/dev/null 2>&1 || apt-get install -y -qq nginx >/dev/null; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
case " $PROTOS " in
    *" tls-"*) TLS=1 ;;
    *) TLS=0 ;;
esac
if [ "$TLS" = 1 ] && ! command -v openssl >/dev/null; then
    echo "idle.sh: installing openssl from Debian, for the run's certificate" >&2
    apt-get update -qq && apt-get install -y -qq openssl >/dev/null
fi
# Two file descriptors per connection at most (the client's and the server's).
hard=$(ulimit -Hn); [ "$hard" = unlimited ] && hard=1048576
ulimit -n "$hard"

TMP=$(mktemp -d)
cleanup() {
    for pid in "${SERVER_PID:-}" "${CLIENT_PID:-}"; do
        [ -n "$pid" ] && kill "$pid" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=benches/lib.sh
. benches/lib.sh
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

TLS_LISTENER=""
if [ "$TLS" = 1 ]; then
    bench_cert "$TMP"
    TLS_LISTENER="
  - name: https
    address: \"127.0.0.1:18443\"
    protocol: https
    tls: { certificates: [ { cert: $TMP/bench-cert.pem, key: $TMP/bench-key.pem } ] }"
fi
cat > "$TMP/scalws.yaml" <<EOF
workers: 1
limits: { max_connections: $((N + 100)), keepalive_timeout: 300s }
listeners:
  - name: http
    address: "127.0.0.1:18080"$TLS_LISTENER
applications:
  - name: bench
    domains: ["*"]
    routes: [{ path: /, respond: { status: 200, body: "ok" } }]
EOF

# nginx 1.25.1 and later say `http2 on`; earlier ones `listen ... http2`.
nginx_version=$("$NGINX" -v 2>&1 | sed -n 's#.*nginx/\([0-9.]*\).*#\1#p')
nginx_conf() { # proto
    local port=18081 ssl="" tls=""
    case "$1" in
        tls-*)
            port=18444 ssl=" ssl"
            tls="ssl_certificate $TMP/bench-cert.pem; ssl_certificate_key $TMP/bench-key.pem; ssl_protocols TLSv1.3;"
            ;;
    esac
    local listen="listen 127.0.0.1:$port$ssl;" http2=""
    if [ "$1" = h2 ] || [ "$1" = tls-h2 ]; then
        if printf '%s\n1.25.1\n' "$nginx_version" | sort -V -C 2>/dev/null; then
            listen="listen 127.0.0.1:$port$ssl http2;"
        else
            http2="http2 on;"
        fi
    fi
    mkdir -p "$TMP/nginx"
    chmod 755 "$TMP"; chmod -R 777 "$TMP/nginx"
    cat > "$TMP/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $((N * 3 + 100));
daemon off;
error_log /dev/stderr warn;
pid $TMP/nginx/nginx.pid;
events { worker_connections $((N * 2 + 100)); }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    keepalive_timeout 300s;
    keepalive_requests 100000;
    server {
        $listen
        $http2
        $tls
        location / { default_type text/plain; return 200 "ok"; }
    }
}
EOF
}

# Starts the server ($1: scalws or nginx) for $2 (http1 or h2); sets
# SERVER_PID and MEASURED (the process whose memory counts).
start() {
    if [ "$1" = scalws ]; then
        SCALWS_LOG=warn "$BIN" --config "$TMP/scalws.yaml" --workers 1 > "$TMP/server.log" 2>&1 &
        SERVER_PID=$!; PORT=18080
        case "$2" in tls-*) PORT=18443 ;; esac
        wait_port "$PORT"
        MEASURED=$SERVER_PID
    else
        nginx_conf "$2"
        "$NGINX" -c "$TMP/nginx.conf" -p "$TMP/nginx" > "$TMP/server.log" 2>&1 &
        SERVER_PID=$!; PORT=18081
        case "$2" in tls-*) PORT=18444 ;; esac
        wait_port "$PORT"
        # nginx's worker is the master's only child.
        MEASURED=$(pgrep -P "$SERVER_PID" | head -1)
    fi
}

stop() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

printf '%-6s %-6s %7s %12s %12s %14s\n' proto server N "RSS before" "RSS idle" "KiB/connection"
for proto in $PROTOS; do
    for server in scalws nginx; do
        start "$server" "$proto"
        # One warm-up connection, so start-up allocations are in "before".
        python3 benches/idle_client.py "$PORT" 1 "$proto" < /dev/null > /dev/null
        sleep 0.5
        before=$(rss_kib "$MEASURED")
        coproc CLIENT { exec python3 benches/idle_client.py "$PORT" "$N" "$proto"; }
        if ! read -r ready count <&"${CLIENT[0]}" || [ "$ready" != ready ]; then
            echo "idle.sh: the client did not get $N answers from $server ($proto); server log:" >&2
            tail -5 "$TMP/server.log" >&2
            exit 3
        fi
        sleep "$SETTLE"
        after=$(rss_kib "$MEASURED")
        eval "exec ${CLIENT[1]}>&-"
        wait "$CLIENT_PID" 2>/dev/null || true
        CLIENT_PID=
        awk -v p="$proto" -v s="$server" -v n="$count" -v b="$before" -v a="$after" \
            'BEGIN { printf "%-6s %-6s %7d %9d KiB %9d KiB %14.2f\n", p, s, n, b, a, (a - b) / n }'
        stop
    done
done
