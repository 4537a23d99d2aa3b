#!/usr/bin/env bash
# The wheel, built and proved: what `pip install capsize` or `uvx capsize` gives a user.
#
# 1. maturin, zig and uv (scripts/wheel/requirements.txt, every version pinned) in a venv of
#    their own, target/wheel-venv, made once and remade when the requirements change.
# 2. `maturin build --release --locked --zig --compatibility manylinux2014`:
#    target/wheels/capsize-VERSION-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl,
#    the `capsize` binary and the `capsize-mock` shim. zig links against glibc 2.17's symbols,
#    so the wheel runs on any Linux of the last decade (a plain build would ask for this
#    machine's glibc); the build goes to target/x86_64-unknown-linux-gnu/, beside the others.
# 3. With --check (what scripts/test.sh runs): a fresh venv (target/wheel-try) installs the
#    wheel with `pip install --no-index`, and from an empty folder outside the repository the
#    quick start runs from it: `capsize --version`, `capsize examples`, `capsize run` on the
#    example it wrote, `capsize-mock --help`, `capsize exec` of a tiny Python agent (8
#    requests with urllib, no SDK) whose requests the mock counts exactly, and `uvx` running
#    the same wheel offline.
#
# Usage: scripts/wheel.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
fail() { echo "scripts/wheel.sh: $*" >&2; exit 1; }

venv=target/wheel-venv
req=scripts/wheel/requirements.txt
if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  echo "scripts/wheel.sh: provisioning $venv from $req" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv failed: install python3-venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[[ -n "$version" ]] || fail "no version in Cargo.toml's [workspace.package]"
rm -f target/wheels/capsize-"$version"-*.whl
start=$SECONDS
# maturin finds zig as `python -m ziglang` through the venv's python.
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/maturin" build --release --locked \
  --zig --compatibility manylinux2014 --out target/wheels >&2
wheels=(target/wheels/capsize-"$version"-*.whl)
[[ ${#wheels[@]} -eq 1 && -f "${wheels[0]}" ]] || fail "expected one wheel, found: ${wheels[*]}"
wheel=$PWD/${wheels[0]}
echo "scripts/wheel.sh: built $wheel ($(du -k "$wheel" | cut -f1) KiB) in $((SECONDS - start)) s"
$check || exit 0

# A new user's machine: a fresh venv, the wheel alone (no index), an empty folder.
try=$PWD/target/wheel-try
rm -rf "$try"
python3 -m venv "$try"
start=$SECONDS
"$try/bin/pip" install --quiet --no-index --disable-pip-version-check "$wheel"
echo "scripts/wheel.sh: pip install took $((SECONDS - start)) s"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export PATH="$try/bin:$PATH"
[[ "$(command -v capsize)" == "$try/bin/capsize" ]] || fail "capsize is not the wheel's: $(command -v capsize)"

said=$(capsize --version)
[[ "$said" == "capsize $version (commit "*")" ]] || fail "capsize --version said: $said"
capsize examples | grep -q '^  research-agent ' || fail "capsize examples lists no research-agent"
capsize examples research-agent >/dev/null
capsize run research-agent.toml --set workload.queries=50 --out out/run >/dev/null
python3 - "$version" <<'PY' || fail "capsize run from the wheel wrote an unexpected summary.json"
import json, sys
s = json.load(open("out/run/summary.json"))
assert s["queries"] == 50, s["queries"]
assert s["capsize_version"] == sys.argv[1], s["capsize_version"]
PY
capsize-mock --help | grep -q -- '--port' || fail "capsize-mock --help does not describe the mock"

# `capsize exec` of a tiny agent: 8 chat completions with urllib, to the mock it is given.
cat > agent.py <<'PY'
import json, os, urllib.request

base = os.environ["OPENAI_BASE_URL"]
key = os.environ["OPENAI_API_KEY"]
for i in range(8):
    body = json.dumps({
        "model": "any",
        "messages": [{"role": "user", "content": f"question {i}"}],
        "max_tokens": 16,
    }).encode()
    request = urllib.request.Request(
        base + "/chat/completions",
        data=body,
        headers={"content-type": "application/json", "authorization": "Bearer " + key},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        json.load(response)
PY
capsize exec research-agent.toml --out out/exec -- "$try/bin/python" agent.py >/dev/null
python3 - <<'PY' || fail "capsize exec from the wheel counted the agent's requests wrong"
import json
s = json.load(open("out/exec/summary.json"))
p = s["provider"]
assert (p["received"], p["served"], p["rate_limited"]) == (8, 8, 0), p
PY

# uvx: the same wheel, run by uv in an environment of its own, offline.
said=$(UV_CACHE_DIR="$work/uv-cache" "$repo/$venv/bin/uvx" --offline --from "$wheel" capsize --version)
[[ "$said" == "capsize $version (commit "*")" ]] || fail "uvx capsize --version said: $said"
echo "scripts/wheel.sh: the wheel installs and runs: capsize $version, examples, run, exec, capsize-mock, uvx"
