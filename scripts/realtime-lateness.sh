#!/usr/bin/env bash
# Real-time send lateness: how late the real-time client starts each query (and sends its one
# call, which waits for nothing) after its planned instant, at 1,000 calls/s for 10 s against
# the in-process mock, at model time = real time. Prints p50/p99/max in milliseconds.
# Usage: scripts/realtime-lateness.sh [CALLS_PER_S]
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/lateness.toml" <<TOML
name = "lateness"
seed = 1
[provider]
rpm = 100_000_000
latency = { dist = "constant", ms = 20 }
[workload]
mode = "open"
arrival = "constant"
arrival_rate = $rate
duration_s = 10
calls_per_query = 1
tokens_per_call = 10
[scheduler]
max_concurrency = 0
rate_limit = false
TOML
./target/release/capsize run "$out/lateness.toml" --mode realtime --out "$out/report" --json > "$out/summary.json"
python3 - "$out/summary.json" "$rate" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
l = s["latency_ms"]["query_start_lateness"]
print(f"{s['calls']} calls at {sys.argv[2]}/s in real time: send lateness "
      f"p50 {l['p50']:.3f} ms, p99 {l['p99']:.3f} ms, max {l['max']:.3f} ms")
PY
