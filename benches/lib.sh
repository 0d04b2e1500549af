# Helpers the benchmark scripts share; sourced, not run.

# Whether something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

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
