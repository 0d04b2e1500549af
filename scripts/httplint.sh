#!/usr/bin/env bash
# Lints a response served from ScalWS's cache with httplint (the engine of
# REDbot, from PyPI). Two scalwsd processes: an origin answering with
# caching headers, and a caching proxy in front of it. The second request
# is a hit; its head goes through httplint.
#
#   cargo build --release -p scalwsd
#   scripts/httplint.sh
#
# Installs httplint into a virtualenv under target/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${BIN:-target/release/scalwsd}"
[ -x "$BIN" ] || { echo "httplint.sh: $BIN missing; run: cargo build --release -p scalwsd" >&2; exit 1; }
VENV=target/httplint-venv
if [ ! -x "$VENV/bin/httplint" ]; then
    echo "httplint.sh: installing httplint from PyPI into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q httplint
fi

TMP=$(mktemp -d)
cleanup() { kill "${ORIGIN:-}" "${PROXY:-}" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

cat > "$TMP/origin.yaml" <<'YAML'
listeners: [{ name: http, address: "127.0.0.1:18190" }]
applications:
  - name: origin
    domains: ["*"]
    routes:
      - path: /
        respond:
          body: "<!doctype html><title>cached</title><p>hello</p>\n"
          headers:
            content-type: text/html; charset=utf-8
            cache-control: public, max-age=300
            etag: '"v1"'
            last-modified: Mon, 30 Nov 2026 00:00:00 GMT
YAML
cat > "$TMP/proxy.yaml" <<'YAML'
listeners: [{ name: http, address: "127.0.0.1:18180" }]
upstreams:
  origin: { addresses: ["127.0.0.1:18190"] }
applications:
  - name: site
    domains: ["*"]
    cache: { max_size: 8MiB, max_object: 1MiB }
    routes: [{ path: /, proxy: origin }]
YAML

SCALWS_LOG=warn "$BIN" --config "$TMP/origin.yaml" & ORIGIN=$!
SCALWS_LOG=warn "$BIN" --config "$TMP/proxy.yaml" & PROXY=$!
for port in 18190 18180; do
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done

curl -s -o /dev/null http://127.0.0.1:18180/page          # miss: stored
sleep 1                                                    # so Age is at least 1
curl -s -i http://127.0.0.1:18180/page > "$TMP/hit.txt"    # hit
echo "== the cached response"
cat "$TMP/hit.txt"
echo
echo "== httplint"
"$VENV/bin/httplint" -n < "$TMP/hit.txt"
