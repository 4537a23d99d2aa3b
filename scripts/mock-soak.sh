#!/usr/bin/env bash
# Soak test of the mock provider's memory: drives N requests (default 1,000,000) at full speed
# through the release `capsize-mock` with an exact-count load generator (mock-server/examples/
# load.rs, 64 keep-alive connections), every BIG_EVERY-th of them (default 1,000th) with a
# 10 MB body, over the server's 1 MiB body limit; samples the server's RSS from /proc, and
# checks that
#   - every request was answered 200 or 429, or, for a 10 MB one, 413 or a closed connection
#     (no other status, no other connection error),
#   - /stats received == the requests of ordinary size (a refused body never reaches the model),
#   - peak RSS (VmHWM) stays under 64 MiB.
# The provider is a 600,000 RPM token bucket (a full minute's worth at the start, then 10,000
# requests/s), below what the load reaches (~40,000/s here), so a 1M run mixes 200s and 429s. Needs: cargo, python3 (standard library only).
#
# Usage: scripts/mock-soak.sh [N] [BIG_EVERY]   (BIG_EVERY 0: no large bodies; CARGO_TARGET_DIR
# is honoured)
set -euo pipefail

N=${1:-1000000}
BIG_EVERY=${2:-1000}
BIG_BYTES=10000000
CONNECTIONS=64
LIMIT_MIB=64
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}

cd "$root"
cargo build --release --quiet -p capsize-mock --bin capsize-mock --example load
bin=$target/release/capsize-mock
load=$target/release/examples/load

tmp=$(mktemp -d)
server_pid=
sampler_pid=
cleanup() {
    [[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null || true
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" --port 0 --rpm 600000 --window token-bucket >"$tmp/out" 2>"$tmp/err" &
server_pid=$!
for _ in $(seq 100); do [[ -s $tmp/out ]] && break; sleep 0.05; done
uri=$(head -n1 "$tmp/out")
[[ $uri == http://* ]] || { echo "mock-soak: the server printed no address: $(cat "$tmp/err")" >&2; exit 1; }

rss_kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$server_pid/status"; }
echo "mock-soak: $uri, $N requests over $CONNECTIONS connections, every ${BIG_EVERY}th with a $BIG_BYTES-byte body; RSS at start $(( $(rss_kib VmRSS) / 1024 )) MiB"
(
    while kill -0 "$server_pid" 2>/dev/null; do
        echo "$(date +%s.%N) $(rss_kib VmRSS)"
        sleep 1
    done
) >"$tmp/rss" 2>/dev/null &
sampler_pid=$!

chat='{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'
result=$("$load" "$uri" "$N" "$CONNECTIONS" /v1/chat/completions "$chat" "$BIG_EVERY" "$BIG_BYTES")
echo "mock-soak: load: $result"
stats=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$uri/stats")
echo "mock-soak: /stats: $stats"

peak_kib=$(rss_kib VmHWM)
end_kib=$(rss_kib VmRSS)
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=
# RSS every ~10 % of the run, to show it flat.
awk '{ t[NR] = $1; r[NR] = $2 } END {
    step = (NR > 10) ? int(NR / 10) : 1; line = "mock-soak: RSS MiB over time:";
    for (i = 1; i <= NR; i += step) line = line sprintf(" %.0fs=%.1f", t[i] - t[1], r[i] / 1024);
    print line }' "$tmp/rss"

field() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$2"; }
sent=$(field sent "$result")
errors=$(field errors "$result")
ok=$(( $(field status_200 "$result" || true) + 0 ))
limited=$(( $(field status_429 "$result" || true) + 0 ))
refused=$(( $(field status_413 "$result" || true) + 0 ))
big=$(field big "$result")
big_cut=$(field big_cut "$result")
received=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["received"])' "$stats")

echo "mock-soak: peak RSS $(( peak_kib / 1024 )) MiB (VmHWM), at end $(( end_kib / 1024 )) MiB, limit $LIMIT_MIB MiB"
fail=0
[[ $sent == "$N" ]] || { echo "mock-soak: FAIL: $sent answered of $N sent"; fail=1; }
[[ $errors == 0 ]] || { echo "mock-soak: FAIL: $errors connection errors"; fail=1; }
[[ $(( ok + limited + refused + big_cut )) == "$sent" ]] || { echo "mock-soak: FAIL: statuses other than 200/429/413: $result"; fail=1; }
[[ $(( refused + big_cut )) == "$big" ]] || { echo "mock-soak: FAIL: $big large bodies, but $refused answered 413 and $big_cut cut: $result"; fail=1; }
[[ $received == $(( N - big )) ]] || { echo "mock-soak: FAIL: /stats received $received != $(( N - big )) of ordinary size"; fail=1; }
(( peak_kib < LIMIT_MIB * 1024 )) || { echo "mock-soak: FAIL: peak RSS over $LIMIT_MIB MiB"; fail=1; }
if (( fail )); then exit 1; fi
echo "mock-soak: OK: $N requests, $ok x 200 + $limited x 429 + $big of $BIG_BYTES bytes ($refused x 413, $big_cut cut while sending), no other status, received == ordinary requests sent, peak RSS $(( peak_kib / 1024 )) MiB"
