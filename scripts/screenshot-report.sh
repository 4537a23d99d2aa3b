#!/usr/bin/env bash
# Screenshots of a report.html in headless Chromium (Debian package `chromium`), at a desktop
# width and a phone width, to look at what a person sees:
#
#   scripts/screenshot-report.sh reports/research-agent/report.html [OUT_DIR]
#
# writes OUT_DIR/report-desktop.png (1280 px wide) and OUT_DIR/report-phone.png (390 px),
# each a full page tall (default OUT_DIR: the report's folder's `screenshots/`, which is not
# committed). Exit 2: no report given or found, or no chromium.
set -euo pipefail
report=${1:-}
if [[ -z $report || ! -f $report ]]; then
  echo "usage: scripts/screenshot-report.sh REPORT.html [OUT_DIR] (no file ${report:+$report})" >&2
  exit 2
fi
out=${2:-$(dirname "$report")/screenshots}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $browser ]]; then
  echo "scripts/screenshot-report.sh: no chromium: install it (Debian: apt-get install chromium)" >&2
  exit 2
fi
mkdir -p "$out"
url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
# The page's height: long reports are cut at 12,000 px, enough for every shipped report.
for shot in desktop:1280:9000 phone:390:12000; do
  IFS=: read -r name width height <<<"$shot"
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --window-size="$width,$height" --screenshot="$out/report-$name.png" "$url" >/dev/null 2>&1
  echo "wrote $out/report-$name.png (${width} px wide)"
done
