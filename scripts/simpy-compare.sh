#!/usr/bin/env bash
# capsize beside SimPy on the same model (the issue's goal: capsize >= 30x SimPy in simulated
# calls per wall-clock second). Model: N calls through a pool of 40, each served in U[200, 900] ms,
# no rate limits, no retries, no errors, 40 closed-loop sessions keeping the pool full:
#   capsize: scenarios/bench/pool-40.toml (--set workload.queries=N), release build;
#   SimPy:   scripts/simpy_pool.py N SEED (simpy.Resource(capacity=40), 40 session processes).
# Both single-threaded, one run each, printed as one table with the ratio.
# What each wall time includes:
#   capsize: the whole process (GNU time): start-up, scenario parsing, the simulation, writing
#            summary.json and the .hgrm files; the start-up/report share is printed (a 1,000-call
#            run) and is negligible at N = 1M.
#   SimPy:   time.perf_counter() around env.run() alone (not interpreter start-up or imports).
# Peak RSS is of each whole process (GNU time).
#
# Needs: cargo, GNU time (/usr/bin/time), python3 with venv and pip (Debian: python3-venv), PyPI
# access for `pip install simpy` (into a temporary venv, removed afterwards). CARGO_TARGET_DIR is
# honoured. Takes about 30 s on 2 cores after a release build (the venv and pip ~10 s, SimPy
# ~13 s and capsize ~3 s at 1M).
# Usage: scripts/simpy-compare.sh [N [SIMPY_N]]   (default N = 1000000; SIMPY_N defaults to N:
#        give a smaller one if SimPy is too slow; the table states both Ns)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cd "$root"
n=${1:-1000000}
simpy_n=${2:-$n}
seed=42

if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    echo "python3 venv/ensurepip missing: install it with \`apt-get install -y python3-venv\`" >&2
    exit 1
fi
[[ -x /usr/bin/time ]] || { echo "GNU time missing: \`apt-get install -y time\`" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check simpy
cargo build --release --quiet
bin=$target/release/capsize

# capsize: whole process, wall seconds and peak RSS from GNU time.
run_capsize() {
    /usr/bin/time -f '%e %M' -o "$tmp/time" "$bin" run scenarios/bench/pool-40.toml \
        --set workload.queries="$1" --out "$tmp/out" --json >"$tmp/capsize.json"
}
run_capsize 1000
read -r startup_wall _ <"$tmp/time"
run_capsize "$n"
read -r capsize_wall capsize_rss_kb <"$tmp/time"

# SimPy: env.run() alone, timed inside the script; peak RSS of the process from GNU time.
/usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/venv/bin/python" scripts/simpy_pool.py \
    "$simpy_n" "$seed" >"$tmp/simpy.json"
read -r _ simpy_rss_kb <"$tmp/time"

python3 - "$tmp/capsize.json" "$capsize_wall" "$capsize_rss_kb" "$startup_wall" \
    "$tmp/simpy.json" "$simpy_rss_kb" "$(rustc --version)" <<'PY'
import json, sys
cap = json.load(open(sys.argv[1]))
cap_wall, cap_rss, startup = float(sys.argv[2]), int(sys.argv[3]) / 1024, float(sys.argv[4])
sp = json.load(open(sys.argv[5]))
sp_rss = int(sys.argv[6]) / 1024
cap_rate = cap["calls"] / cap_wall
sp_rate = sp["calls_per_wall_s"]
# Sanity: both must be the same model (pool of 40 binding, mean service ~0.55 s).
for name, calls, virt, mean_ms in [
    ("capsize", cap["calls"], cap["virtual_seconds"], cap["latency_ms"]["call"]["mean"]),
    ("simpy", sp["calls"], sp["simulated_seconds"], sp["mean_latency_s"] * 1000),
]:
    expect = calls * 0.55 / 40
    if not (530 < mean_ms < 570 and abs(virt - expect) / expect < 0.02):
        sys.exit(f"{name}: not the pool-40 model (mean {mean_ms:.1f} ms, {virt:.0f} s simulated, "
                 f"expected ~550 ms and ~{expect:.0f} s)")
print(f"pool of 40, U[200, 900] ms, 40 closed-loop sessions, seed 42")
print(f"{'tool':<8} {'N':>10} {'wall_s':>8} {'calls/s (wall)':>15} {'sim_s':>10} "
      f"{'mean_ms':>8} {'peak_rss_MiB':>13}")
print(f"{'capsize':<8} {cap['calls']:>10} {cap_wall:>8.2f} {cap_rate:>15,.0f} "
      f"{cap['virtual_seconds']:>10.0f} {cap['latency_ms']['call']['mean']:>8.1f} {cap_rss:>13.1f}")
print(f"{'simpy':<8} {sp['calls']:>10} {sp['wall_s']:>8.2f} {sp_rate:>15,.0f} "
      f"{sp['simulated_seconds']:>10.0f} {sp['mean_latency_s'] * 1000:>8.1f} {sp_rss:>13.1f}")
ratio = cap_rate / sp_rate
print(f"ratio capsize/simpy (calls per wall second): {ratio:.1f}x "
      f"(goal >= 30x: {'met' if ratio >= 30 else 'NOT met'})")
print(f"capsize wall = whole process (start-up, parsing, report files: {startup:.2f} s at 1,000 "
      f"calls); simpy wall = env.run() alone")
print(f"versions: simpy {sp['simpy_version']}, {sp['python_implementation']} "
      f"{sp['python_version']}; {sys.argv[7]}")
PY
