# Helpers the benchmark scripts share; sourced, not run.

# Whether something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

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
