#!/usr/bin/env bash
# capsize's whole test suite, provisioned: the README's test command, and what .ci/run runs.
#
# 1. The SDK venv: a Python virtual environment at target/sdk-venv with the official SDKs the
#    client behaviour models are validated against (scripts/clients/requirements.txt, every
#    version pinned), made once and remade when the requirements change. Needs python3 with
#    venv and pip, and PyPI.
# 2. redis-server, for the tests of the limiter a fleet shares on Redis (each starts its own
#    on a free port and stops it): installed with apt-get where it is missing.
# 3. cargo test --workspace, then the runnable examples of the scheduler and capsize-des (the
#    Redis fleet against a redis-server started for it on a free port, and stopped).
# 4. The tests that run real Python clients against the mock, ignored by a bare `cargo test`,
#    with CAPSIZE_SDK_PYTHON naming the venv's python: tests/sdk_clients.rs (the SDKs and our
#    own clients against their models), tests/sdk_streaming.rs (the SDKs' streaming helpers
#    against the mock's events), tests/exec_sdk.rs (an SDK agent under capsize exec),
#    tests/calibrate_exec.rs (an agent traced by OpenTelemetry, calibrated, predicting itself)
#    and tests/exec_traces.rs (the OpenTelemetry SDK's gzipped or redirected spans recorded).
# 5. The wheel (scripts/wheel.sh --check): built with maturin, installed into a fresh venv
#    from the file alone, and the quick start run from it (run, examples, exec of a tiny Python
#    agent, capsize-mock, uvx), so the wheel cannot ship broken.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/sdk-venv
req=scripts/clients/requirements.txt
if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  echo "scripts/test.sh: provisioning $venv from $req" >&2
  rm -rf "$venv"
  if ! python3 -m venv "$venv"; then
    echo "scripts/test.sh: python3 -m venv failed: install python3-venv (Debian: apt-get install python3-venv)" >&2
    exit 2
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi

if ! command -v redis-server >/dev/null; then
  echo "scripts/test.sh: installing redis-server (the shared limiter's tests start their own)" >&2
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    # Only the binary is wanted: the tests start their own servers on free ports.
    if command -v systemctl >/dev/null; then systemctl stop redis-server 2>/dev/null || true; fi
  else
    echo "scripts/test.sh: redis-server is missing: install it (Debian: apt-get install redis-server)" >&2
    exit 2
  fi
fi

cargo test --workspace
# The runnable examples (README, "Embed the scheduler"): cargo test builds them, this runs them,
# so they stay runnable. (http_agent runs in capsize-scheduler/tests/example.rs.) The Redis
# fleet gets a redis-server of its own on a free port, stopped when it is done.
for example in fanout budgets adaptive; do
  cargo run -q -p capsize-scheduler --features redis --example "$example"
done
cargo run -q -p capsize-des --example timers
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null || true' EXIT
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
CAPSIZE_REDIS_URL="redis://127.0.0.1:$port" \
  cargo run -q -p capsize-scheduler --features redis --example redis_fleet
kill "$redis_pid"
wait "$redis_pid" 2>/dev/null || true
trap - EXIT
# One at a time: each runs an SDK in real time against a mock at 3x, and five of them at once
# on two cores moved the anthropic SDK's answers across a minute boundary (seen once in CI).
CAPSIZE_SDK_PYTHON="$PWD/$venv/bin/python" cargo test --test sdk_clients -- --ignored --test-threads=1
CAPSIZE_SDK_PYTHON="$PWD/$venv/bin/python" cargo test --test sdk_streaming -- --ignored
CAPSIZE_SDK_PYTHON="$PWD/$venv/bin/python" cargo test --test exec_sdk -- --ignored
CAPSIZE_SDK_PYTHON="$PWD/$venv/bin/python" cargo test --test calibrate_exec -- --ignored --nocapture
CAPSIZE_SDK_PYTHON="$PWD/$venv/bin/python" cargo test --test exec_traces -- --ignored
# The wheel, as a user installs it.
scripts/wheel.sh --check
