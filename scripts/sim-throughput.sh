#!/usr/bin/env bash
# Simulated calls per CPU second (and per wall second) and peak RSS of `capsize run` on
# research-agent (one session, max_concurrency 4, client RPM/TPM buckets on: the scheduler fully
# engaged), at 1M and 10M calls (memory must not grow with the number of calls), beside the
# floor: capsize-des doing nothing but one timer per call, with the same futures on tokio's
# paused clock for comparison (benches/engine_floor.rs, 4 tasks: research-agent's concurrency).
# Needs GNU time.
# Usage: scripts/sim-throughput.sh [--instructions]
#   --instructions (needs valgrind): instructions per simulated call on pool-40, on
#   research-agent and on fleet.toml (one client, and eight replicas of an eighth of its
#   concurrency), and per floor sleep, counted by callgrind (repeatable whatever else the
#   machine is doing): differences between two run lengths, so start-up and report writing
#   cancel out. Counted the way scripts/instructions.sh (the gate on the first two) counts.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
capsize="${CARGO_TARGET_DIR:-target}/release/capsize"
floor_bin=$(cargo bench --bench engine_floor --no-run --message-format=json 2>/dev/null \
  | python3 -c "import json,sys; print([m['executable'] for m in map(json.loads, sys.stdin) if m.get('executable') and m['target']['kind'] == ['bench']][-1])")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-10s %12s %8s %8s %14s %14s %12s\n' calls queries wall_s cpu_s calls_per_cpu_s calls_per_wall_s peak_rss_MiB
for queries in 125000 1250000; do
  stats=$( { /usr/bin/time -f '%e %U %S %M' "$capsize" run scenarios/research-agent.toml \
      --set workload.queries=$queries --out "$out" --json > "$out/stdout"; } 2>&1 | tail -1)
  read -r wall user sys rss_kb <<<"$stats"
  calls=$(python3 -c "import json; print(json.load(open('$out/summary.json'))['calls'])")
  python3 -c "cpu = $user + $sys; print(f'{$calls:<10} {$queries:>12} {$wall:>8.2f} {cpu:>8.2f} {$calls/cpu:>14,.0f} {$calls/$wall:>14,.0f} {$rss_kb/1024:>12.1f}')"
  [ "$queries" = 125000 ] && sim_rate=$(python3 -c "print($calls/$wall)")
done
floor=$("$floor_bin" both 1000000 4)
echo "$floor"
floor_rate=$(echo "$floor" | sed -n 's/^des .* = \([0-9]*\) sleeps\/s.*/\1/p')
python3 -c "print(f'simulator at 1M calls / des floor (wall): {$sim_rate/$floor_rate:.2f}')"

if [ "${1:-}" = "--instructions" ]; then
  # Counted by scripts/instructions.sh (the gate on pool-40 and research-agent), on this build.
  per_call() { CAPSIZE="$capsize" scripts/instructions.sh --per-call "$@"; }
  count() { scripts/instructions.sh --count "$@"; }
  echo "instructions per simulated call, pool-40: $(per_call scenarios/bench/pool-40.toml workload.queries 20000 40000)"
  echo "instructions per simulated call, research-agent: $(per_call scenarios/research-agent.toml workload.queries 2500 5000)"
  # A fleet's replicas cost per call what one client does: fleet.toml's 16 users served by
  # eight replicas of max_concurrency 8 sharing a limiter, and by one client of 64.
  echo "instructions per simulated call, fleet.toml, one client of 64: $(per_call scenarios/fleet.toml \
    workload.duration_s 600 1200 --set fleet.replicas=1 --set scheduler.max_concurrency=64)"
  echo "instructions per simulated call, fleet.toml, eight replicas of 8: $(per_call scenarios/fleet.toml \
    workload.duration_s 600 1200 --set fleet.replicas=8 --set fleet.limiter=shared)"
  small=$(count "$floor_bin" des 20000 4); large=$(count "$floor_bin" des 40000 4)
  echo "instructions per floor sleep (capsize-des): $(( (large - small) / 20000 ))"
  small=$(count "$floor_bin" tokio 20000 4); large=$(count "$floor_bin" tokio 40000 4)
  echo "instructions per floor sleep (tokio paused clock): $(( (large - small) / 20000 ))"
fi
