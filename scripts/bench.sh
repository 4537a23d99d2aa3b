#!/usr/bin/env bash
# Runs capsize's benchmarks, the figures of the performance table in CONTRIBUTING.md: first
# the median of each criterion benchmark (cargo bench --bench scheduler), then, each under a heading, the
# sub-scripts (each also runnable alone):
#   scripts/sim-throughput.sh   simulated calls per wall second and peak RSS, 1M and 10M calls
#   scripts/sweep-efficiency.sh parallel efficiency of `capsize sweep` (64 points, medians of 3)
#   scripts/simpy-compare.sh    capsize beside SimPy on a pool of 40, 1M calls (needs PyPI access)
# Usage: scripts/bench.sh [--quick]
#   Full: about 3.5 minutes on 2 cores after the builds (criterion ~1.5 min, sim-throughput ~35 s,
#   sweep-efficiency ~1-1.5 min, simpy-compare ~30 s including its venv), more when it has to compile.
#   --quick: the criterion medians only (about two minutes, most of it compiling).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
case "${1:-}" in
  --quick) quick=true ;;
  "") ;;
  *) echo "usage: scripts/bench.sh [--quick]" >&2; exit 2 ;;
esac
cargo bench --bench scheduler >/dev/null
python3 - <<'PY'
import json, os, pathlib
target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", "target"))
paths = sorted(target.glob("criterion/*/*/new/estimates.json"))
if not paths:
    raise SystemExit(f"no criterion estimates under {target}/criterion")
rows = []
for path in paths:
    group, name = path.parts[-4], path.parts[-3]
    e = json.loads(path.read_text())
    rows.append((f"{group}/{name}", e["median"]["point_estimate"]))
print(f"{'benchmark':<28} median per call")
for name, ns in rows:
    print(f"{name:<28} {ns:>10.1f} ns")
PY
$quick && exit 0

# A failing sub-script is reported and the others still run; the exit status is then 1.
failed=()
for script in sim-throughput.sh sweep-efficiency.sh simpy-compare.sh; do
  printf '\n== scripts/%s ==\n' "$script"
  "scripts/$script" || { rc=$?; failed+=("$script"); echo "scripts/$script failed (exit $rc)" >&2; }
done
if ((${#failed[@]})); then
  printf '\nfailed: %s\n' "${failed[*]}" >&2
  exit 1
fi
