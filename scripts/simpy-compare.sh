#!/usr/bin/env bash
# capsize beside SimPy on the same model, in simulated calls per CPU second (the goal: capsize
# >= 30x SimPy) and per wall second, medians of 3 runs each, measured in one run of this script.
# Model: N calls through a pool of 40, each served in U[200, 900] ms, no rate limits, no retries,
# no errors, 40 closed-loop sessions keeping the pool full:
#   capsize: scenarios/bench/pool-40.toml (--set workload.queries=N), release build;
#   SimPy:   scripts/simpy_pool.py N SEED (simpy.Resource(capacity=40), 40 session processes).
# Both single-threaded, printed as one table with the ratios. What each time includes:
#   capsize: the whole process (GNU time: wall, and user + sys CPU): start-up, scenario parsing,
#            the simulation, writing summary.json and the .hgrm files; the start-up/report
#            share is printed (a 1,000-call run) and is negligible at N = 1M.
#   SimPy:   time.perf_counter() (wall) and time.process_time() (CPU) around env.run() alone
#            (not interpreter start-up or imports).
# CPU seconds are the figure a loaded machine moves least; wall seconds are shown beside them.
# Peak RSS is of each whole process (GNU time).
#
# Needs: cargo, GNU time (/usr/bin/time), python3 with venv and pip (Debian: python3-venv), PyPI
# access for `pip install simpy` (into a temporary venv, removed afterwards). CARGO_TARGET_DIR is
# honoured. Takes about a minute on 2 cores after a release build (the venv and pip ~10 s, SimPy
# 3 x ~12 s and capsize 3 x ~1 s at 1M).
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

# capsize: whole process; wall, CPU (user + sys) and peak RSS from GNU time. Three runs each.
run_capsize() {
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$bin" run scenarios/bench/pool-40.toml \
        --set workload.queries="$1" --out "$tmp/out" --json >"$tmp/capsize.json"
    cat "$tmp/time" >>"$tmp/capsize.times"
}
run_capsize 1000
read -r startup_wall _ <"$tmp/time"
: >"$tmp/capsize.times"
for _ in 1 2 3; do run_capsize "$n"; done

# SimPy: env.run() alone, timed inside the script; peak RSS of the process from GNU time.
for i in 1 2 3; do
    /usr/bin/time -f '%M' -o "$tmp/simpy.rss" "$tmp/venv/bin/python" scripts/simpy_pool.py \
        "$simpy_n" "$seed" >"$tmp/simpy$i.json"
done
read -r simpy_rss_kb <"$tmp/simpy.rss"

python3 - "$tmp" "$startup_wall" "$simpy_rss_kb" "$(rustc --version)" <<'PY'
import json, statistics, sys
tmp, startup, sp_rss, rustc = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) / 1024, sys.argv[4]
cap = json.load(open(f"{tmp}/capsize.json"))
times = [list(map(float, line.split())) for line in open(f"{tmp}/capsize.times")]
cap_wall = statistics.median(t[0] for t in times)
cap_cpu = statistics.median(t[1] + t[2] for t in times)
cap_rss = max(t[3] for t in times) / 1024
sps = [json.load(open(f"{tmp}/simpy{i}.json")) for i in (1, 2, 3)]
sp = sps[0]
sp_wall = statistics.median(s["wall_s"] for s in sps)
sp_cpu = statistics.median(s["cpu_s"] for s in sps)
# Sanity: both must be the same model (pool of 40 binding, mean service ~0.55 s).
for name, calls, virt, mean_ms in [
    ("capsize", cap["calls"], cap["virtual_seconds"], cap["latency_ms"]["call"]["mean"]),
    ("simpy", sp["calls"], sp["simulated_seconds"], sp["mean_latency_s"] * 1000),
]:
    expect = calls * 0.55 / 40
    if not (530 < mean_ms < 570 and abs(virt - expect) / expect < 0.02):
        sys.exit(f"{name}: not the pool-40 model (mean {mean_ms:.1f} ms, {virt:.0f} s simulated, "
                 f"expected ~550 ms and ~{expect:.0f} s)")
print("pool of 40, U[200, 900] ms, 40 closed-loop sessions, seed 42; medians of 3 runs")
print(f"{'tool':<8} {'N':>10} {'cpu_s':>7} {'calls/cpu_s':>12} {'wall_s':>7} {'calls/wall_s':>13} "
      f"{'sim_s':>9} {'mean_ms':>8} {'peak_rss_MiB':>13}")
for name, c, cpu, wall, virt, mean, rss in [
    ("capsize", cap["calls"], cap_cpu, cap_wall, cap["virtual_seconds"],
     cap["latency_ms"]["call"]["mean"], cap_rss),
    ("simpy", sp["calls"], sp_cpu, sp_wall, sp["simulated_seconds"],
     sp["mean_latency_s"] * 1000, sp_rss),
]:
    print(f"{name:<8} {c:>10} {cpu:>7.2f} {c / cpu:>12,.0f} {wall:>7.2f} {c / wall:>13,.0f} "
          f"{virt:>9.0f} {mean:>8.1f} {rss:>13.1f}")
ratio_cpu = (cap["calls"] / cap_cpu) / (sp["calls"] / sp_cpu)
ratio_wall = (cap["calls"] / cap_wall) / (sp["calls"] / sp_wall)
print(f"ratio capsize/simpy per CPU second: {ratio_cpu:.1f}x "
      f"(goal >= 30x: {'met' if ratio_cpu >= 30 else 'NOT met'}); per wall second: {ratio_wall:.1f}x")
print(f"capsize = whole process (start-up, parsing, report files: {startup:.2f} s wall at 1,000 "
      f"calls); simpy = env.run() alone")
print(f"versions: simpy {sp['simpy_version']}, {sp['python_implementation']} "
      f"{sp['python_version']}; {rustc}")
PY
