#!/usr/bin/env bash
# The official Python SDKs' own time per request (issue 34's measurement): each SDK, unmodified,
# fans out through one shared async client (scripts/clients/sdk_fanout.py) against capsize's
# mock answering in a constant LATENCY_MS (default 50), at 1, 20 and 50 tasks, 1,000 requests
# each. It prints each run's p50, p95 and mean latency as the client saw it, and what that
# implies: the overhead over the provider's latency, and the throughput over the tasks, whose
# inverse at the most tasks is the event loop's busy time per request when one thread is
# saturated (tasks / mean latency = requests a second). Then what `[scheduler.client]`'s
# presets are made of: the loop's time per request (the median at 50 tasks over 50, since the
# median request waits for the other 49), and how the SDK divides its own time between
# sending and parsing with one task, its warm-up (a process's first request over a new
# client's) and a new connection's cost (a new client's first request over a warm one), each
# the median of 5 processes (scripts/clients/sdk_own_time.py).
#
# Needs the SDK venv (scripts/test.sh makes it at target/sdk-venv) and a release build.
# Measure on a quiet machine: the client and the mock share its cores.
# Usage: scripts/sdk-client-cost.sh      (LATENCY_MS, CARGO_TARGET_DIR honoured)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
py=$PWD/target/sdk-venv/bin/python
[[ -x "$py" ]] || { echo "scripts/sdk-client-cost.sh: no SDK venv at target/sdk-venv: run scripts/test.sh once" >&2; exit 2; }
cargo build --release --quiet --bin capsize
latency=${LATENCY_MS:-50}
out=$(mktemp)
"$target/release/capsize" mock --rpm 1000000 --tpm 1000000000 --latency-ms "$latency" --port 0 >"$out" &
mock=$!
trap 'kill "$mock" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do [[ -s "$out" ]] && break; sleep 0.05; done
url=$(head -1 "$out")
echo "the SDKs against a mock answering in $latency ms ($url)"
for sdk in openai anthropic; do
  for tasks in 1 20 50; do
    per=$(( (1000 + tasks - 1) / tasks ))
    "$py" scripts/clients/sdk_fanout.py "$sdk" "$url" "$tasks" "$per" |
      "$py" -c '
import json, statistics, sys
sdk, tasks, latency = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lat = sorted(json.load(sys.stdin)["latencies_s"])
n = len(lat)
p = lambda q: lat[min(n - 1, int(q * n))] * 1000
mean = statistics.mean(lat) * 1000
print(f"{sdk:9} {tasks:2} tasks: p50 {p(.5):6.1f} ms  p95 {p(.95):6.1f} ms  mean {mean:6.1f} ms"
      f"  overhead {mean - latency:5.1f} ms  {tasks / mean * 1000:5.0f} requests/s")
' "$sdk" "$tasks" "$latency"
  done
  per=$(( 2000 / 50 ))
  "$py" scripts/clients/sdk_fanout.py "$sdk" "$url" 50 "$per" |
    "$py" -c '
import json, statistics, sys
run = json.load(sys.stdin)
lat, cpu = run["latencies_s"], run["cpu_s"]
print(f"{sys.argv[1]:9} the loop per request: {statistics.median(lat) * 1000 / 50:.2f} ms (p50 at 50 tasks / 50);"
      f" its CPU time per request {cpu * 1000 / len(lat):.2f} ms")
' "$sdk"
  # One task, 5 processes: the split of the SDK's own time, its warm-up and a connection's
  # cost, each the median of the 5.
  for _ in 1 2 3 4 5; do
    (cd scripts/clients && "$py" sdk_own_time.py "$sdk" "$url" 30)
  done | "$py" -c '
import json, statistics, sys
rows = [json.loads(line) for line in sys.stdin]
send, parse, share, warmup, connect = (
    statistics.median(r[k] for r in rows)
    for k in ("send", "parse", "sending_share", "warmup", "connect")
)
print(f"{sys.argv[1]:9} one task, median of {len(rows)} processes: send {send:.2f} ms, parse {parse:.2f} ms,"
      f" sending share {share:.2f}; warm-up {warmup:.0f} ms; a connection {connect:.2f} ms")
' "$sdk"
done
