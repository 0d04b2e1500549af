# Helpers the benchmark scripts share; sourced, not run.

# Whether something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# need COMMAND PACKAGE...: when COMMAND is missing (on PATH or in /usr/sbin,
# where nginx lives), installs the first PACKAGE that installs from Debian,
# and says so; exits when none does.
need() {
    command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] && return 0
    local command=$1 package
    shift
    echo "$(basename "$0"): installing $command from Debian (apt-get install $1)" >&2
    [ "${APT_UPDATED:-0}" = 1 ] || { timeout 600 apt-get update -qq >&2 || true; APT_UPDATED=1; }
    for package in "$@"; do
        timeout 900 apt-get install -y -qq "$package" >/dev/null 2>&1 && return 0
    done
    echo "$(basename "$0"): could not install $command" >&2
    exit 1
}

# bench_cert DIR: a scratch certificate for the TLS benchmarks, ECDSA P-256
# (as most sites have now) for bench.test and 127.0.0.1, valid two days:
# DIR/bench-cert.pem and DIR/bench-key.pem, the key readable by nginx's
# workers (a scratch key). Fails when openssl cannot make it.
bench_cert() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=bench.test" -addext "subjectAltName=DNS:bench.test,IP:127.0.0.1" \
        -keyout "$1/bench-key.pem" -out "$1/bench-cert.pem" 2>/dev/null &&
        chmod 644 "$1/bench-key.pem"
}

# wait_port PORT [PID]: waits up to 10 s for 127.0.0.1:PORT to accept, and
# not once process PID (when given) is gone; says so and fails otherwise.
wait_port() {
    local _
    for _ in $(seq 100); do
        port_open "$1" && return 0
        if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    echo "$(basename "$0"): nothing listening on 127.0.0.1:$1" >&2
    return 1
}

# train_scalwsd BIN REQUESTS: the training run of a profile-guided build
# (scripts/pgo.sh, scripts/bolt.sh): BIN, an instrumented scalwsd, serves what
# benches/multi.sh measures, REQUESTS requests each from `h2load -c16 -m1`:
# respond, static-small, proxy and cache-hit over HTTP/1.1 (the origin nginx
# as in multi.sh), then respond over TLS with HTTP/1.1 and with h2 (a scratch
# certificate). Each scalwsd is stopped with SIGTERM and must exit cleanly
# (an instrumented binary writes its profile at exit). BIN inherits the
# environment (LLVM_PROFILE_FILE, for one). Installs h2load, nginx and
# openssl from Debian when missing (`need`). Runs in a subshell, whose EXIT
# trap stops the origin and removes the scratch folder however it ends.
train_scalwsd() (
    bin=$1 requests=$2 me=$(basename "$0")
    need h2load nghttp2-client
    need nginx nginx-light nginx
    need openssl openssl
    nginx=$(command -v nginx || echo /usr/sbin/nginx)
    for port in 18080 18090 18443; do
        if port_open "$port"; then echo "$me: 127.0.0.1:$port is in use" >&2; exit 1; fi
    done
    work=$(mktemp -d)
    # shellcheck disable=SC2064 # $work now; $origin when the trap runs
    trap "[ -z \"\${origin:-}\" ] || kill -QUIT \"\$origin\" 2>/dev/null; rm -rf '$work'" EXIT
    bench_cert "$work" || { echo "$me: openssl could not make a certificate" >&2; exit 1; }
    cp benches/configs/scalws-tls.yaml "$work/tls.yaml"
    mkdir -p "$work/nginx"
    sed -e "s#NGINX_PREFIX#$work/nginx#g" benches/configs/nginx-origin.conf > "$work/origin.conf"
    "$nginx" -e /dev/stderr -c "$work/origin.conf" -p "$work/nginx" 2> "$work/origin.log" &
    origin=$!
    wait_port 18090 "$origin" || { cat "$work/origin.log" >&2; exit 1; }

    # serve CONFIG PORT URL...: one scalwsd, each URL in turn (plain http and a
    # URL ending in ",h1" over HTTP/1.1, other https URLs over h2).
    serve() {
        local config=$1 port=$2 pid url flags
        shift 2
        SCALWS_LOG=warn "$bin" --config "$config" > /dev/null 2> "$work/scalwsd.log" &
        pid=$!
        wait_port "$port" "$pid" || { cat "$work/scalwsd.log" >&2; return 1; }
        for url in "$@"; do
            flags=()
            case "$url" in http://*) flags=(--h1) ;; *,h1) flags=(--h1); url=${url%,h1} ;; esac
            echo "$me: training on $url ${flags[*]}" >&2
            if ! timeout 600 h2load -n "$requests" -c 16 -m1 "${flags[@]}" "$url" > "$work/h2load.txt" 2>&1 ||
                ! grep -q "^requests: $requests total, $requests started, $requests done, $requests succeeded" \
                    "$work/h2load.txt"; then
                cat "$work/h2load.txt" >&2; kill "$pid"; return 1
            fi
        done
        kill -TERM "$pid"
        wait "$pid" || { echo "$me: scalwsd did not exit cleanly" >&2; cat "$work/scalwsd.log" >&2; return 1; }
    }
    serve benches/configs/scalws.yaml 18080 \
        http://127.0.0.1:18080/respond http://127.0.0.1:18080/static/small.html \
        http://127.0.0.1:18080/proxy http://127.0.0.1:18080/cache/hit
    serve "$work/tls.yaml" 18443 https://127.0.0.1:18443/respond,h1 https://127.0.0.1:18443/respond
)
