#!/usr/bin/env bash
# A sharded sweep of 10^9 simulated calls, measured: pool-40 at 1,000,000 calls a run over
# max_concurrency 31..=40 with 100 repeats (1,000 runs), split into P shards run as P local
# processes (each --jobs 1) for P = 1, 2 and 4, each set of shards then merged. Prints each
# P's wall time and parallel efficiency (T1 / (P x TP): on a machine of C cores at most C / P
# once P > C), the merge's own wall time and peak RSS, and checks that the three merges wrote
# the same bytes.
#
# Usage: scripts/shard-bench.sh [REPEATS]   (default 100: 10^9 calls; 10 gives 10^8)
set -euo pipefail
cd "$(dirname "$0")/.."

repeats=${1:-100}
cargo build --release --quiet --bin capsize
bin=${CARGO_TARGET_DIR:-target}/release/capsize
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(sweep scenarios/bench/pool-40.toml --set workload.queries=1000000
  --sweep "scheduler.max_concurrency=31..=40" --repeats "$repeats" --jobs 1)
echo "shard-bench: $((10 * repeats)) runs of 1,000,000 calls ($((10 * repeats)) million calls), $(nproc) cores"
now() { date +%s.%N; }
declare -A wall
for p in 1 2 4; do
  start=$(now)
  pids=()
  for i in $(seq 1 "$p"); do
    "$bin" "${args[@]}" --shard "$i/$p" --out "$out/p$p" >/dev/null 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  wall[$p]=$(echo "$(now) - $start" | bc -l)
  merged=$( { /usr/bin/time -f "%e %M" "$bin" merge "$out/p$p" --out "$out/merged-$p" >/dev/null; } 2>&1 | tail -1)
  printf 'P=%d: %8.1f s wall, parallel efficiency %5.1f %%; merge %s s, peak RSS %s KB\n' \
    "$p" "${wall[$p]}" "$(echo "100 * ${wall[1]} / ($p * ${wall[$p]})" | bc -l)" \
    "${merged% *}" "${merged#* }"
done
for p in 2 4; do
  diff -r "$out/merged-1" "$out/merged-$p" >/dev/null \
    || { echo "shard-bench: the merge of $p shards differs from 1's" >&2; exit 1; }
done
echo "shard-bench: the merges of 1, 2 and 4 shards are byte-identical"
