#!/usr/bin/env bash
# Simulated calls per wall-clock second and peak RSS of `capsize run` on research-agent (one
# session, max_concurrency 4, client RPM/TPM buckets on: the scheduler fully engaged), at 1M and
# 10M calls, beside the floor: tokio's paused clock doing nothing but one timer per call
# (benches/tokio_floor.rs). Memory must not grow with the number of calls. Needs GNU time.
# Usage: scripts/sim-throughput.sh [--instructions]   (the second needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
cargo bench --bench tokio_floor --no-run --quiet 2>/dev/null
floor_bin=$(cargo bench --bench tokio_floor --no-run --message-format=json 2>/dev/null \
  | python3 -c "import json,sys; print([m['executable'] for m in map(json.loads, sys.stdin) if m.get('executable') and m['target']['kind'] == ['bench']][-1])")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-10s %12s %10s %14s %12s\n' calls queries wall_s calls_per_s peak_rss_MiB
for queries in 125000 1250000; do
  stats=$( { /usr/bin/time -f '%e %M' ./target/release/capsize run scenarios/research-agent.toml \
      --set workload.queries=$queries --out "$out" --json > "$out/stdout"; } 2>&1 | tail -1)
  wall=${stats% *}; rss_kb=${stats#* }
  calls=$(python3 -c "import json; print(json.load(open('$out/summary.json'))['calls'])")
  python3 -c "print(f'{$calls:<10} {$queries:>12} {$wall:>10.2f} {$calls/$wall:>14,.0f} {$rss_kb/1024:>12.1f}')"
  [ "$queries" = 125000 ] && sim_rate=$(python3 -c "print($calls/$wall)")
done
floor=$("$floor_bin" 1000000)
echo "$floor"
floor_rate=$(echo "$floor" | sed -n 's/.* = \([0-9]*\) sleeps\/s.*/\1/p')
python3 -c "print(f'simulator at 1M calls / floor: {$sim_rate/$floor_rate:.2f}')"

# With --instructions: instructions per simulated call and per floor sleep, counted by
# callgrind (repeatable whatever else the machine is doing): differences between two run
# lengths, so start-up and report writing cancel out.
if [ "${1:-}" = "--instructions" ]; then
  collected() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null \
      | sed -n 's/.*Collected : //p'; }
  sim() { collected ./target/release/capsize run scenarios/research-agent.toml \
      --set workload.queries="$1" --out "$out"; }
  small=$(sim 2500); large=$(sim 5000)
  echo "instructions per simulated call: $(( (large - small) / 20000 ))"
  small=$(collected "$floor_bin" 20000); large=$(collected "$floor_bin" 40000)
  echo "instructions per floor sleep: $(( (large - small) / 20000 ))"
fi
