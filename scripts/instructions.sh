#!/usr/bin/env bash
# The engine's cost gate: instructions per simulated call, counted by callgrind, on
# scenarios/bench/pool-40.toml (the engine, scheduler, provider model and recorder with no
# feature on) and scenarios/research-agent.toml (rate limits, rounds of tool calls), against the
# figures committed beside this script (scripts/instructions.baseline). A figure is the
# difference between two run lengths, (I(large) - I(small)) / (calls(large) - calls(small)), so
# start-up and report writing cancel out; it does not move with the machine's load and repeats
# to about +-1 % (start-up hashes with random seeds, so the two runs' fixed costs do not cancel
# to the instruction). Needs valgrind and python3; builds the release binary unless CAPSIZE
# names one.
#
# Usage: scripts/instructions.sh            measure both, print both, exit 1 if either is more
#                                           than 3 % above its committed figure
#        scripts/instructions.sh --update   measure both and rewrite the figures file (a change
#                                           that must cost more commits it with a reason)
#        scripts/instructions.sh --per-call SCENARIO KEY SMALL LARGE [capsize run options]
#                                           one figure: SCENARIO run with KEY=SMALL and KEY=LARGE
#        scripts/instructions.sh --count COMMAND [ARGS]
#                                           the instructions callgrind counts for one command
# Environment: CAPSIZE (default: the release build in $CARGO_TARGET_DIR or target/),
#              TOLERANCE_PCT (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."

figures=scripts/instructions.baseline
tolerance=${TOLERANCE_PCT:-3}
case "${1:-}" in
  "" | --update | --per-call | --count) ;;
  *)
    sed -n '/^# Usage/,/^# Environment/p' "$0" >&2
    exit 2
    ;;
esac

command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The instructions callgrind counts for one command (its output thrown away).
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null \
    | sed -n 's/.*Collected : //p'
}

# Calls made by a run of SCENARIO with the given options.
calls() {
  local scenario=$1
  shift
  "$CAPSIZE" run "$scenario" "$@" --out "$out" --json \
    | python3 -c "import json,sys; print(json.load(sys.stdin)['calls'])"
}

# Instructions per call: SCENARIO, the run's length KEY, its SMALL and LARGE values, then
# further `capsize run` options.
per_call() {
  local scenario=$1 key=$2 small_v=$3 large_v=$4 small large
  shift 4
  small=$(count "$CAPSIZE" run "$scenario" --set "$key=$small_v" "$@" --out "$out")
  large=$(count "$CAPSIZE" run "$scenario" --set "$key=$large_v" "$@" --out "$out")
  echo $(((large - small) / ($(calls "$scenario" --set "$key=$large_v" "$@") \
    - $(calls "$scenario" --set "$key=$small_v" "$@"))))
}

# The binary measured: CAPSIZE, or the release build (built now) unless only --count is asked.
if [ -z "${CAPSIZE:-}" ] && [ "${1:-}" != "--count" ]; then
  cargo build --release --quiet --bin capsize
  CAPSIZE="${CARGO_TARGET_DIR:-target}/release/capsize"
fi

case "${1:-}" in
  --per-call)
    shift
    per_call "$@"
    exit 0
    ;;
  --count)
    shift
    count "$@"
    exit 0
    ;;
esac

# The gated runs: name, scenario, length key, small and large values. research-agent makes
# 8 calls a query.
runs=(
  "pool-40 scenarios/bench/pool-40.toml workload.queries 20000 40000"
  "research-agent scenarios/research-agent.toml workload.queries 2500 5000"
)
declare -A measured
for run in "${runs[@]}"; do
  read -r name scenario key small large <<<"$run"
  measured[$name]=$(per_call "$scenario" "$key" "$small" "$large")
done

if [ "${1:-}" = "--update" ]; then
  {
    echo "# Instructions per simulated call, counted by callgrind: scripts/instructions.sh --update,"
    echo "# $(date -u +%Y-%m-%d), release build. scenario, instructions per call; the gate fails above +${tolerance} %."
    for run in "${runs[@]}"; do
      read -r name _ <<<"$run"
      echo "$name ${measured[$name]}"
    done
  } >"$figures"
  for run in "${runs[@]}"; do
    read -r name _ <<<"$run"
    echo "$name: ${measured[$name]} instructions per call (written to $figures)"
  done
  exit 0
fi

status=0
for run in "${runs[@]}"; do
  read -r name _ <<<"$run"
  committed=$(awk -v n="$name" '$1 == n { print $2 }' "$figures")
  now=${measured[$name]}
  if [ -z "$committed" ]; then
    echo "$name: $now instructions per call; $figures has no figure for it" >&2
    status=1
    continue
  fi
  pct=$(python3 -c "print(f'{($now - $committed) / $committed * 100:+.1f}')")
  echo "$name: $now instructions per call (committed $committed, $pct %)"
  if [ $((now * 100)) -gt $((committed * (100 + tolerance))) ]; then
    echo "instructions.sh: $name costs $now instructions per call, $pct % over its committed $committed (limit +$tolerance %): make it cheaper, or commit the new figure (scripts/instructions.sh --update) saying why" >&2
    status=1
  fi
done
exit $status
