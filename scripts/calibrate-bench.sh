#!/usr/bin/env bash
# How fast `capsize calibrate` reads traces, and that its memory does not grow with them: wall
# and CPU time and peak RSS on OTLP JSON traces of 250,000 and 1,000,000 spans (written by
# scripts/gen_traces.py: closed-loop sessions, a model turn around 3 rounds of 4 tool calls),
# with --no-check (the check's run is a simulation: sim-throughput.sh measures those).
# Needs GNU time and python3. Usage: scripts/calibrate-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
capsize="${CARGO_TARGET_DIR:-target}/release/capsize"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-10s %10s %8s %8s %14s %12s\n' spans file_MiB wall_s cpu_s spans_per_s peak_rss_MiB
for spans in 250000 1000000; do
  python3 scripts/gen_traces.py "$spans" "$out/traces.jsonl"
  size=$(stat -c %s "$out/traces.jsonl")
  stats=$( { /usr/bin/time -f '%e %U %S %M' "$capsize" calibrate "$out/traces.jsonl" \
      --out "$out/cal" --no-check > "$out/stdout"; } 2>&1 | tail -1)
  read -r wall user sys rss_kb <<<"$stats"
  read_spans=$(python3 -c "import json; print(json.load(open('$out/cal/calibration.json'))['inputs'][0]['spans'])")
  python3 -c "print(f'{$read_spans:<10} {$size/2**20:>10.1f} {$wall:>8.2f} {$user+$sys:>8.2f} {$read_spans/$wall:>14,.0f} {$rss_kb/1024:>12.1f}')"
  rm -rf "$out/cal"
done
