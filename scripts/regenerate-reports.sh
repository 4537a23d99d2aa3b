#!/usr/bin/env bash
# Regenerates the committed example reports in reports/ (capsize writes to capsize-out/ by
# default): the research agent's run, the sweeps of the shipped scenarios and the article's
# table. Run it when a change
# moves what a report says; tests/sweep_cli.rs, tests/report_html.rs and tests/article.rs
# fail until the committed copies match. CAPSIZE names the binary (default: cargo run -q --).
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a capsize <<<"${CAPSIZE:-cargo run -q --}"
"${capsize[@]}" run scenarios/research-agent.toml --out reports/research-agent >/dev/null
for name in research-agent agent incident fleet adaptive adaptive-steady; do
  "${capsize[@]}" sweep "scenarios/$name.toml" --out "reports/$name"
done
"${capsize[@]}" article --out reports/article
