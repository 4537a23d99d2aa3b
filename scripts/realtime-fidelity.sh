#!/usr/bin/env bash
# Real time against virtual time on one scenario (default scenarios/research-agent.toml): runs
# it in virtual time and in real time against the in-process mock at --time-scale SCALE
# (default 50), and prints query p50/p95 and queries/s of each and the real run's gap in %.
# Every exchange's timer rounding and overhead is multiplied by the scale, so the gap measures
# how precise the real-time path's waits are. Needs: cargo, python3 (standard library only).
#
# Usage: scripts/realtime-fidelity.sh [SCENARIO] [SCALE] [--set KEY=VALUE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-scenarios/research-agent.toml}
scale=${2:-50}
shift $(( $# > 2 ? 2 : $# ))
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bin=./target/release/capsize
"$bin" run "$scenario" "$@" --out "$out/virtual" --json >"$out/virtual.json"
"$bin" run "$scenario" "$@" --mode realtime --time-scale "$scale" --out "$out/real" --json >"$out/real.json"
python3 - "$out/virtual.json" "$out/real.json" "$scale" <<'PY'
import json, sys
v, r = (json.load(open(p)) for p in sys.argv[1:3])
print(f"{v['scenario']}: virtual time against real time at --time-scale {sys.argv[3]}")
rows = [("query p50 (ms)", lambda s: s["latency_ms"]["query"]["p50"]),
        ("query p95 (ms)", lambda s: s["latency_ms"]["query"]["p95"]),
        ("queries/s", lambda s: s["throughput"]["queries_per_s"])]
for name, get in rows:
    a, b = get(v), get(r)
    gap = (b - a) / a * 100 if a else float("nan")
    print(f"  {name:<16} virtual {a:>12.3f}  real {b:>12.3f}  gap {gap:+6.2f} %")
PY
