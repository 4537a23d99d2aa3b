//! `capsize exec` gating a real agent: `scripts/clients/exec_agent.py`, which fans out tool
//! calls through the official openai SDK (pinned in `scripts/clients/requirements.txt`), run
//! against `scenarios/exec/sdk-agent.toml`. The provider's view is exact (the agent's docstring
//! says why): 19 requests, 10 served of which 3 orphans, 9 rate-limited, 2 retries each linked
//! to its first attempt by its Idempotency-Key and made after the 429's Retry-After of 1 s.
//! `--check` passes on the scenario's [slo] and fails when an objective does not hold.
//!
//! Needs the SDK venv: run through `scripts/test.sh`, which provisions it and sets
//! `CAPSIZE_SDK_PYTHON`; ignored by a bare `cargo test`.

mod common;

use std::path::Path;
use std::process::Output;

use common::temp::Temp;
use common::{capsize, python, root, stderr};

/// `capsize exec scenarios/exec/sdk-agent.toml --check --out OUT [extra] -- python exec_agent.py`.
fn exec_agent(out: &Path, extra: &[&str]) -> Output {
    let (scenario, agent, python) = (
        root("scenarios/exec/sdk-agent.toml"),
        root("scripts/clients/exec_agent.py"),
        python(),
    );
    let mut args = vec![
        "exec",
        &scenario,
        "--check",
        "--timeout",
        "5m",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend(["--", &python, &agent]);
    capsize(&args)
}

#[test]
#[ignore = "needs the SDK venv: scripts/test.sh"]
fn an_openai_sdk_agent_is_counted_exactly_and_gated() {
    let t = Temp::new("exec-sdk", "gated");
    let out = t.path("o");
    let o = exec_agent(&out, &[]);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", stderr(&o));
    // The agent's own view, on its stdout (passed through), then capsize's table.
    assert!(
        stdout.starts_with(r#"{"served": 7, "rate_limited": 7, "timed_out": 3, "other_error": 0}"#),
        "{stdout}"
    );
    assert!(stdout.contains("4 checks, all passed"), "{stdout}");
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let s: serde_json::Value = serde_json::from_str(&text).unwrap();
    let p = &s["provider"];
    let counts = [
        &p["received"],
        &p["served"],
        &p["rate_limited"],
        &p["errored"],
        &p["peak_requests_per_60s"],
        &s["orphaned_requests"],
        &s["retries"],
        &s["retry_wait_ms"]["count"],
        &s["agent"]["exit_code"],
    ];
    let counts: Vec<u64> = counts.iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(counts, [19, 10, 9, 0, 10, 3, 2, 2, 0], "{text}");
    // Each retry came after the Retry-After of 1 s: the SDK waits it, from the 429's answer.
    let wait = s["retry_wait_ms"]["p50"].as_f64().unwrap();
    assert!(wait >= 1000.0, "{text}");
    println!("{text}");

    // The same agent against an objective it does not meet: exit 1, the failure named.
    let o = exec_agent(&out, &["--set", "slo.orphaned_requests=\"== 0\""]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", stderr(&o));
    assert!(
        stdout.contains("4 checks, 1 failed: objective orphaned_requests"),
        "{stdout}"
    );
}
