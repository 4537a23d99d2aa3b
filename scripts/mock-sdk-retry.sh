#!/usr/bin/env bash
# The official OpenAI and Anthropic Python SDKs, unmodified, against capsize-mock: each SDK, with
# its default retry policy, must get a 429, wait what its Retry-After says, retry and succeed,
# as against the real provider; with max_retries=0 it must raise its own RateLimitError built from
# the mock's error body.
#
# Each SDK gets its own mock: 1 request per minute, Retry-After "auto" (until the request fits),
# model time 30x real time, so the minute is 2 s of real time. Per SDK: call 1 is served; call 2
# gets a 429 and is retried by the SDK after its Retry-After (`retry-after-ms` from the OpenAI
# endpoint, whole-second `retry-after` from the Anthropic one); call 3 with max_retries=0 raises.
# Checked through httpx event hooks (statuses, the gap between the 429 and the retry) and /stats.
#
# Needs: cargo, python3 with venv and pip (Debian: python3-venv), PyPI access for
# `pip install openai anthropic` (into a temporary venv, removed afterwards).
# Usage: scripts/mock-sdk-retry.sh        (CARGO_TARGET_DIR is honoured)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cd "$root"
cargo build --quiet -p capsize-mock --bin capsize-mock
bin=$target/debug/capsize-mock

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check openai anthropic

start_mock() {
    "$bin" --port 0 --rpm 1 --retry-after auto --latency-ms 50 --time-scale 30 >"$tmp/$1.out" 2>"$tmp/$1.err" &
    pids+=($!)
    for _ in $(seq 100); do [[ -s $tmp/$1.out ]] && break; sleep 0.05; done
    head -n1 "$tmp/$1.out"
}
openai_uri=$(start_mock openai)
anthropic_uri=$(start_mock anthropic)

cat >"$tmp/check.py" <<'PY'
import json
import sys
import time
import urllib.request

import anthropic
import openai

try:  # the SDKs' HTTP client: httpx2 in current releases, httpx before
    import httpx2 as httpx
except ImportError:
    import httpx


def stats(uri):
    return json.loads(urllib.request.urlopen(uri + "/stats").read())


class Log:
    """What the SDK's HTTP client saw: requests and responses, with times."""

    def __init__(self):
        self.events = []

    def request(self, request):
        self.events.append(("request", time.monotonic(), None))

    def response(self, response):
        self.events.append(("response", time.monotonic(), response))


def check(name, version, uri, make, call, rate_limit_error, error_type):
    log = Log()
    http = httpx.Client(event_hooks={"request": [log.request], "response": [log.response]})
    client = make(uri, http)
    call(client)  # served: it uses the minute's one request
    log.events.clear()
    t0 = time.monotonic()
    call(client)  # 429, then the SDK's own retry after Retry-After
    took = time.monotonic() - t0
    responses = [(t, r) for kind, t, r in log.events if kind == "response"]
    requests = [t for kind, t, _ in log.events if kind == "request"]
    statuses = [r.status_code for _, r in responses]
    assert statuses == [429, 200], f"{name}: statuses {statuses}"
    t429, r429 = responses[0]
    if name == "openai":
        # OpenAI's endpoint: retry-after-ms (what the SDK reads first) and x-ratelimit-*.
        wait = float(r429.headers["retry-after-ms"]) / 1000
        assert r429.headers["retry-after"] == str(int(-(-wait // 1))), r429.headers
        assert "x-ratelimit-remaining-requests" in r429.headers, r429.headers
        assert "anthropic-ratelimit-requests-reset" not in r429.headers, r429.headers
    else:
        # Anthropic's: whole seconds only (rounded up) and anthropic-ratelimit-*.
        assert "retry-after-ms" not in r429.headers, r429.headers
        wait = float(r429.headers["retry-after"])
        assert "anthropic-ratelimit-requests-reset" in r429.headers, r429.headers
        assert "x-ratelimit-remaining-requests" not in r429.headers, r429.headers
    gap = requests[1] - t429
    assert wait - 0.005 <= gap <= wait + 0.3, f"{name}: retried {gap:.3f} s after a {wait:.3f} s Retry-After"
    # Without retries, the SDK raises its own RateLimitError from the mock's error body.
    try:
        call(client.with_options(max_retries=0))
        raise AssertionError(f"{name}: no RateLimitError with max_retries=0")
    except rate_limit_error as e:
        assert e.status_code == 429, e
        body = e.body if isinstance(e.body, dict) else {}
        got = body.get("error", body).get("type") if isinstance(body.get("error", body), dict) else None
        assert got == error_type, f"{name}: error body {e.body!r}"
    s = stats(uri)
    want = {"received": 4, "served": 2, "rate_limited": 2}
    assert {k: s[k] for k in want} == want, f"{name}: /stats {s}"
    print(
        f"mock-sdk-retry: {name} {version}: 429 asking {wait * 1000:.0f} ms "
        f"(retry-after {r429.headers['retry-after']}) -> SDK retried after {gap:.3f} s -> 200 "
        f"(call took {took:.3f} s); max_retries=0 raised {rate_limit_error.__name__}; "
        f"/stats {json.dumps(s)}"
    )


openai_uri, anthropic_uri = sys.argv[1], sys.argv[2]
check(
    "openai",
    openai.__version__,
    openai_uri,
    lambda uri, http: openai.OpenAI(base_url=uri + "/v1", api_key="test", max_retries=2, http_client=http),
    lambda c: c.chat.completions.create(model="gpt-mock", messages=[{"role": "user", "content": "hello"}], max_tokens=16),
    openai.RateLimitError,
    "requests",
)
check(
    "anthropic",
    anthropic.__version__,
    anthropic_uri,
    lambda uri, http: anthropic.Anthropic(base_url=uri, api_key="test", max_retries=2, http_client=http),
    lambda c: c.messages.create(model="claude-mock", max_tokens=16, messages=[{"role": "user", "content": "hello"}]),
    anthropic.RateLimitError,
    "rate_limit_error",
)
print("mock-sdk-retry: OK")
PY

"$tmp/venv/bin/python" "$tmp/check.py" "$openai_uri" "$anthropic_uri"
