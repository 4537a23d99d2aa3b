#!/usr/bin/env bash
# Simulated calls per wall-clock second and peak RSS of `capsize run` on research-agent (one
# session, max_concurrency 4, client RPM/TPM buckets on: the scheduler fully engaged), at 1M and
# 10M calls. Memory must not grow with the number of calls. Needs GNU time (/usr/bin/time).
# Usage: scripts/sim-throughput.sh [--instructions]   (the second needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-10s %12s %10s %14s %12s\n' calls queries wall_s calls_per_s peak_rss_MiB
for queries in 125000 1250000; do
  stats=$( { /usr/bin/time -f '%e %M' ./target/release/capsize run scenarios/research-agent.toml \
      --set workload.queries=$queries --out "$out" --json > "$out/stdout"; } 2>&1 | tail -1)
  wall=${stats% *}; rss_kb=${stats#* }
  calls=$(python3 -c "import json; print(json.load(open('$out/summary.json'))['calls'])")
  python3 -c "print(f'{$calls:<10} {$queries:>12} {$wall:>10.2f} {$calls/$wall:>14,.0f} {$rss_kb/1024:>12.1f}')"
done

# With --instructions: instructions per simulated call, counted by callgrind (repeatable whatever
# else the machine is doing): the difference between 5,000 and 2,500 queries, over 20,000 calls.
if [ "${1:-}" = "--instructions" ]; then
  count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null ./target/release/capsize run \
      scenarios/research-agent.toml --set workload.queries="$1" --out "$out" 2>&1 >/dev/null \
      | sed -n 's/.*Collected : //p'
  }
  small=$(count 2500); large=$(count 5000)
  echo "instructions per simulated call: $(( (large - small) / 20000 ))"
fi
