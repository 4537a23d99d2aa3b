#!/usr/bin/env bash
# Runs capsize's benchmarks and prints the median of each, as quoted in the README's performance
# table. Usage: scripts/bench.sh   (takes about two minutes on 2 cores, most of it compiling)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench scheduler >/dev/null
python3 - <<'PY'
import json, pathlib
rows = []
for path in sorted(pathlib.Path("target/criterion").glob("*/*/new/estimates.json")):
    group, name = path.parts[-4], path.parts[-3]
    e = json.loads(path.read_text())
    rows.append((f"{group}/{name}", e["median"]["point_estimate"]))
print(f"{'benchmark':<28} median per call")
for name, ns in rows:
    print(f"{name:<28} {ns:>10.1f} ns")
PY
