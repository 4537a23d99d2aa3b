#!/usr/bin/env bash
# capsize's own regression gate: runs `capsize check` on every example and article scenario
# against its committed baseline in reports/baselines/ (scenarios/X.toml ->
# reports/baselines/X.json, scenarios/article/Y.toml -> reports/baselines/article/Y.json), so a
# change that regresses their simulated capacity fails. Virtual time: deterministic, so an
# unchanged simulator reproduces every baseline exactly.
#
# Usage: scripts/check-baselines.sh            check (exit 1 if any check fails, 2 if one can't run)
#        scripts/check-baselines.sh --refresh  rewrite every baseline on purpose (then review
#                                              `git diff reports/baselines` and commit it)
# Environment: CAPSIZE (default: cargo run -q --release --), TOLERANCE (default 5%: a
#              percentage such as 5%, or a fraction below 1 such as 0.05; a bare 5 is refused),
#              REPORTS (where each check's run, JUnit XML and Markdown go; default a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."

refresh=false
case "${1:-}" in
  --refresh) refresh=true ;;
  "") ;;
  *) echo "usage: $0 [--refresh]" >&2; exit 2 ;;
esac
read -r -a capsize <<<"${CAPSIZE:-cargo run -q --release --}"
tolerance="${TOLERANCE:-5%}"
reports="${REPORTS:-$(mktemp -d)}"
mkdir -p "$reports"

scenarios=(scenarios/*.toml scenarios/article/*.toml)
failed=()
for scenario in "${scenarios[@]}"; do
  rel="${scenario#scenarios/}"
  baseline="reports/baselines/${rel%.toml}.json"
  name="${rel%.toml}"; name="${name//\//-}"
  if $refresh; then
    "${capsize[@]}" baseline "$scenario" --out "$baseline"
    continue
  fi
  if [[ ! -f "$baseline" ]]; then
    echo "check-baselines: $scenario has no baseline $baseline (write it with --refresh)" >&2
    exit 2
  fi
  set +e
  "${capsize[@]}" check "$scenario" --baseline "$baseline" --tolerance "$tolerance" \
    --out "$reports/$name" --junit "$reports/$name/junit.xml" \
    --summary-md "$reports/$name/summary.md" >"$reports/$name.txt" 2>&1
  code=$?
  set -e
  case $code in
    0) echo "pass  $scenario" ;;
    1) echo "FAIL  $scenario"; failed+=("$scenario"); cat "$reports/$name.txt" | grep -E "FAIL|no value|checks," ;;
    *) echo "ERROR $scenario (exit $code)"; cat "$reports/$name.txt"; exit 2 ;;
  esac
done
$refresh && { echo "check-baselines: rewrote ${#scenarios[@]} baselines; review git diff reports/baselines"; exit 0; }
echo "check-baselines: ${#scenarios[@]} scenarios, ${#failed[@]} failed; reports in $reports"
[[ ${#failed[@]} -eq 0 ]]
