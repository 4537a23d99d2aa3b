#!/usr/bin/env bash
# Throughput of the mock provider on loopback: requests/s of the release `capsize-mock` (no
# limits, zero latency: every request a 200 from the model) under wrk at 64 connections, beside
# a bare 200-OK hyper server (mock-server/examples/bare.rs, on one thread like the mock's own server) for scale.
# Both get the same POST of an OpenAI chat body. Prints both figures and their ratio.
#
# Needs: cargo, wrk (Debian: apt-get install -y wrk), python3.
# Usage: scripts/mock-bench.sh [SECONDS]      (default 10 s per server; CARGO_TARGET_DIR honoured)
set -euo pipefail

SECONDS_PER_RUN=${1:-10}
CONNECTIONS=64
THREADS=2
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
command -v wrk >/dev/null || { echo "mock-bench: wrk not found (apt-get install -y wrk)" >&2; exit 1; }

cd "$root"
cargo build --release --quiet -p capsize-mock --bin capsize-mock --example bare

tmp=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

cat >"$tmp/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'
LUA

# Starts "$@" (printing its URI first), runs wrk against PATH, prints requests/s.
measure() {
    local path=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 100); do [[ -s $tmp/out ]] && break; sleep 0.05; done
    local uri
    uri=$(head -n1 "$tmp/out")
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" -s "$tmp/post.lua" "$uri$path" >"$tmp/wrk" 2>&1
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
    if grep -q "Non-2xx" "$tmp/wrk"; then
        echo "mock-bench: non-2xx responses from $1:" >&2
        cat "$tmp/wrk" >&2
        exit 1
    fi
    sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/wrk"
}

mock=$(measure /v1/chat/completions "$target/release/capsize-mock" --port 0)
bare=$(measure /v1/chat/completions "$target/release/examples/bare" 0)
ratio=$(python3 -c "print(f'{$mock / $bare:.2f}')")
echo "mock-bench: wrk -t$THREADS -c$CONNECTIONS -d${SECONDS_PER_RUN}s, POST /v1/chat/completions on loopback, $(nproc) cores"
echo "mock-bench: capsize-mock  ${mock} requests/s"
echo "mock-bench: bare hyper    ${bare} requests/s"
echo "mock-bench: mock / bare   ${ratio}"
