#!/usr/bin/env bash
# Parallel efficiency of `capsize sweep`: a 64-point sweep of research-agent (max_concurrency
# 1..=16 x headroom 0.5, 0.7, 0.9, 1.0), 10,000 queries a point, run with --jobs 1 (the sum of
# single-point times) and with --jobs N (default: the cores). Efficiency = T1 / (N x TN).
# The machine is shared, so each is timed 3 times, alternating, and the medians are compared.
# Also checks that both wrote the same sweep.csv. Needs GNU time (/usr/bin/time).
# Usage: scripts/sweep-efficiency.sh [QUERIES_PER_POINT]
set -euo pipefail
cd "$(dirname "$0")/.."
queries=${1:-10000}
cores=$(nproc)
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sweep() {
  /usr/bin/time -f '%e' ./target/release/capsize sweep scenarios/research-agent.toml \
    --sweep scheduler.max_concurrency=1..=16 --sweep scheduler.headroom=0.5,0.7,0.9,1.0 \
    --set workload.queries="$queries" --jobs "$1" --out "$out/jobs$1" 2>&1 >/dev/null | tail -1
}
t1s=(); tns=()
for _ in 1 2 3; do
  t1s+=("$(sweep 1)")
  tns+=("$(sweep "$cores")")
done
cmp -s "$out/jobs1/sweep.csv" "$out/jobs$cores/sweep.csv" || { echo "sweep.csv differs between --jobs 1 and $cores" >&2; exit 1; }
python3 - "$cores" "${t1s[*]}" "${tns[*]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
t1s = [float(x) for x in sys.argv[2].split()]
tns = [float(x) for x in sys.argv[3].split()]
t1, tn = statistics.median(t1s), statistics.median(tns)
print(f"64 points, medians of 3: --jobs 1 {t1:.2f} s, --jobs {n} {tn:.2f} s: {64/tn:.2f} points/s, "
      f"parallel efficiency {t1/(n*tn)*100:.0f} % (runs: {t1s} vs {tns})")
PY
