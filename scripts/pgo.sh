#!/usr/bin/env bash
# Profile-guided optimisation. By default, tried on the instruction workload:
# builds benches/src/bin/instructions.rs instrumented (-Cprofile-generate), runs
# the five scenarios of benches/instructions.sh on it, merges the profiles with
# llvm-profdata of the LLVM rustc uses, builds the workload again with
# -Cprofile-use, and compares the two with benches/instructions.sh (A/B).
#
# With SCALWSD=1 it also builds `scalwsd` with a profile of `scalwsd` itself:
# an instrumented scalwsd serves the scenarios of benches/multi.sh under
# h2load (respond, static-small, proxy and cache-hit over HTTP/1.1, respond
# over TLS with HTTP/1.1 and with h2; the origin of proxy and cache-hit is
# nginx, as in multi.sh), is stopped with SIGTERM, which writes its profile,
# and target/pgo-use/release/scalwsd is built from that profile. Compare it
# under load with `VARIANTS="plain=target/release/scalwsd
# pgo=target/pgo-use/release/scalwsd" benches/multi.sh`.
#
#   scripts/pgo.sh                 # prints the A/B; builds in target/pgo-*
#   REQUESTS=50000 scripts/pgo.sh  # a longer profile run per scenario
#   SCALWSD=1 scripts/pgo.sh       # also target/pgo-use/release/scalwsd
#   SCALWSD=only scripts/pgo.sh    # that alone, without the workload's A/B
#
# Needs llvm-profdata of rustc's LLVM major version (rustc -vV); installs
# llvm-N from Debian when missing, and says so; SCALWSD also needs h2load,
# nginx and openssl (nghttp2-client and nginx-light from Debian, likewise).
# Release builds with fat LTO into separate target directories (and
# target/release, when not current): about 25 minutes on two cores from
# nothing, 20 more with SCALWSD=1.
# docs/benchmarks.md ("Profile-guided optimisation") has the figures and why
# the release build does not use it.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS="${REQUESTS:-20000}"
LLVM=$(rustc -vV | awk '/^LLVM version/ { split($3, v, "."); print v[1] }')
PROFDATA=$(command -v "llvm-profdata-$LLVM" || true)
if [ -z "$PROFDATA" ]; then
    echo "pgo.sh: installing llvm-$LLVM from Debian for llvm-profdata-$LLVM" >&2
    apt-get update -qq && apt-get install -y -qq "llvm-$LLVM" >/dev/null
    PROFDATA=$(command -v "llvm-profdata-$LLVM") || { echo "pgo.sh: no llvm-profdata-$LLVM" >&2; exit 1; }
fi

DATA=$PWD/target/pgo-data
rm -rf "$DATA"; mkdir -p "$DATA"
export CARGO_INCREMENTAL=0

SCALWSD="${SCALWSD:-0}"

# train_scalwsd BIN: BIN serves every scenario under h2load, REQUESTS requests
# each; its profiles go to $DATA/scalwsd-*.profraw.
# In a subshell, so its EXIT trap stops the origin and removes the scratch
# folder however it ends.
train_scalwsd() (
    local bin=$1 work origin=
    # shellcheck source=../benches/lib.sh
    . benches/lib.sh
    for tool in h2load:nghttp2-client nginx:nginx-light; do
        if ! command -v "${tool%%:*}" >/dev/null; then
            echo "pgo.sh: installing ${tool#*:} from Debian for ${tool%%:*}" >&2
            apt-get update -qq && apt-get install -y -qq "${tool#*:}" >/dev/null
        fi
    done
    for port in 18080 18090 18443; do
        if port_open "$port"; then echo "pgo.sh: 127.0.0.1:$port is in use" >&2; return 1; fi
    done
    work=$(mktemp -d)
    bench_cert "$work" || { echo "pgo.sh: openssl could not make a certificate" >&2; return 1; }
    cp benches/configs/scalws-tls.yaml "$work/tls.yaml"
    mkdir -p "$work/nginx"
    sed -e "s#NGINX_PREFIX#$work/nginx#g" benches/configs/nginx-origin.conf > "$work/origin.conf"
    nginx -e /dev/stderr -c "$work/origin.conf" -p "$work/nginx" 2> "$work/origin.log" &
    origin=$!
    # shellcheck disable=SC2064 # the values now
    trap "kill -QUIT $origin 2>/dev/null; rm -rf '$work'" EXIT
    wait_port 18090 "$origin" || { cat "$work/origin.log" >&2; return 1; }

    # serve CONFIG PORT URL...: one instrumented scalwsd, each URL in turn (plain
    # http and a URL ending in ",h1" over HTTP/1.1, other https URLs over h2).
    serve() {
        local config=$1 port=$2 pid url
        shift 2
        SCALWS_LOG=warn LLVM_PROFILE_FILE="$DATA/scalwsd-%p.profraw" "$bin" --config "$config" \
            > /dev/null 2> "$work/scalwsd.log" &
        pid=$!
        wait_port "$port" "$pid" || { cat "$work/scalwsd.log" >&2; return 1; }
        while [ $# -gt 0 ]; do
            url=$1; shift
            local flags=()
            case "$url" in http://*) flags=(--h1) ;; *,h1) flags=(--h1); url=${url%,h1} ;; esac
            echo "pgo.sh: training on $url ${flags[*]}" >&2
            timeout 600 h2load -n "$REQUESTS" -c 16 -m1 "${flags[@]}" "$url" > "$work/h2load.txt" 2>&1 ||
                { cat "$work/h2load.txt" >&2; kill "$pid"; return 1; }
            grep -q "^requests: $REQUESTS total, $REQUESTS started, $REQUESTS done, $REQUESTS succeeded" \
                "$work/h2load.txt" || { cat "$work/h2load.txt" >&2; kill "$pid"; return 1; }
        done
        # SIGTERM: scalwsd drains and exits, and the profile is written at exit.
        kill -TERM "$pid"
        wait "$pid" || { echo "pgo.sh: scalwsd did not exit cleanly" >&2; cat "$work/scalwsd.log" >&2; return 1; }
    }
    serve benches/configs/scalws.yaml 18080 \
        http://127.0.0.1:18080/respond http://127.0.0.1:18080/static/small.html \
        http://127.0.0.1:18080/proxy http://127.0.0.1:18080/cache/hit
    serve "$work/tls.yaml" 18443 https://127.0.0.1:18443/respond,h1 https://127.0.0.1:18443/respond
)

if [ "$SCALWSD" != 0 ]; then
    echo "pgo.sh: instrumented scalwsd (target/pgo-gen)" >&2
    RUSTFLAGS="-Cprofile-generate=$DATA" cargo build --release -j2 -p scalwsd \
        --target-dir target/pgo-gen >&2
    train_scalwsd target/pgo-gen/release/scalwsd
    "$PROFDATA" merge -o "$DATA/scalwsd.profdata" "$DATA"/scalwsd-*.profraw
    echo "pgo.sh: scalwsd with its profile (target/pgo-use/release/scalwsd)" >&2
    RUSTFLAGS="-Cprofile-use=$DATA/scalwsd.profdata" cargo build --release -j2 -p scalwsd \
        --target-dir target/pgo-use >&2
fi

if [ "$SCALWSD" != only ]; then
    echo "pgo.sh: instrumented build (target/pgo-gen)" >&2
    RUSTFLAGS="-Cprofile-generate=$DATA" cargo build --release -j2 -p scalws-benches \
        --bin instructions --target-dir target/pgo-gen >&2
    # The build's own build scripts and proc macros are instrumented too and leave
    # their profiles in $DATA (default_*.profraw): only the workload's are merged.
    for scenario in respond static-small proxy cache-hit route-layer; do
        LLVM_PROFILE_FILE="$DATA/workload-%p.profraw" \
            target/pgo-gen/release/instructions "$scenario" "$REQUESTS" >/dev/null
    done
    "$PROFDATA" merge -o "$DATA/merged.profdata" "$DATA"/workload-*.profraw

    echo "pgo.sh: optimised build (target/pgo-use)" >&2
    RUSTFLAGS="-Cprofile-use=$DATA/merged.profdata" cargo build --release -j2 -p scalws-benches \
        --bin instructions --target-dir target/pgo-use >&2

    echo "pgo.sh: the plain build to compare with (target/release)" >&2
    cargo build --release -j2 -p scalws-benches --bin instructions >&2
    BASE=target/release/instructions NEW=target/pgo-use/release/instructions GATE=10 benches/instructions.sh
fi
