//! Calibration against real parts: `scripts/clients/otel_agent.py`, an agent built on the
//! official openai SDK and instrumented with the OpenTelemetry Python SDK and the official OpenAI
//! instrumentation (pinned in `scripts/clients/requirements.txt`), runs under `capsize exec` at
//! one setting (4 users, a provider that does not limit it); `capsize calibrate` fits it from
//! what exec recorded (the mock's `calls.jsonl` and the agent's own spans, `traces.otlp`); the
//! calibrated scenario then predicts the same agent at two other settings, and the real agent is
//! run there:
//!
//! - 8 users against a provider that serves 2 requests at once (`max_in_flight`): queries queue
//!   at the provider. Query p50 within 25 %, p95 within 20 % (the prediction has been 15 % to
//!   19 % above the observed p50 in every run seen: it over-states the queueing, not explained
//!   yet).
//! - 8 users against 300 requests a minute, under the SDK's own retry rules: 429s. Query p50
//!   within 15 %, and 429s per query (the prediction pooled over 8 seeds) within a factor of 3:
//!   the prediction has been below the observed in every run seen, 0.39 to 0.81 of it (not
//!   explained yet). How many land depends on where the window's edge falls, the tail on which
//!   queries wait out a long Retry-After: p95 sits on that cliff and is not held.
//!
//! The tolerances are for one minute of real time per setting (about 200 queries, 300 model
//! calls); the replay of the first setting is held to the 10 % on p50 and p95.
//!
//! Needs the SDK venv: run through `scripts/test.sh`, which provisions it and sets
//! `CAPSIZE_SDK_PYTHON`; ignored by a bare `cargo test`.

mod common;

use std::path::{Path, PathBuf};

use common::temp::Temp;
use common::{capsize, python, root, stderr};
use serde_json::Value;

/// Runs the agent with `users` for 60 s under exec, against the provider of
/// `scenarios/exec/otel-agent.toml` with `sets`; returns exec's output folder.
fn exec(t: &Temp, name: &str, users: u32, sets: &[&str]) -> PathBuf {
    let out = t.path(name);
    let scenario = root("scenarios/exec/otel-agent.toml");
    let agent = root("scripts/clients/otel_agent.py");
    let python = python();
    let users = users.to_string();
    let mut args = vec![
        "exec",
        &scenario,
        "--timeout",
        "5m",
        "--out",
        out.to_str().unwrap(),
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    args.extend(["--", &python, &agent, &users, "60"]);
    let o = capsize(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("trace exports"),
        "the agent's spans reached exec: {stdout}"
    );
    out
}

/// `capsize calibrate` on an exec folder; calibration.json.
fn calibrate(exec: &Path, out: &Path, extra: &[&str]) -> Value {
    let calls = exec.join("calls.jsonl");
    let traces = exec.join("traces.otlp");
    let mut args = vec![
        "calibrate",
        calls.to_str().unwrap(),
        traces.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = capsize(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap()
}

/// `capsize run` of the calibrated scenario with `sets`: summary.json.
fn predict(scenario: &Path, out: &Path, sets: &[&str]) -> Value {
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    let o = capsize(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn near(what: &str, predicted: f64, observed: f64, tolerance: f64) {
    let ratio = predicted / observed;
    println!("{what}: predicted {predicted:.1}, observed {observed:.1}, ratio {ratio:.3}");
    assert!(
        (ratio - 1.0).abs() <= tolerance,
        "{what}: ratio {ratio:.3} beyond {tolerance}"
    );
}

#[test]
#[ignore = "needs the SDK venv: scripts/test.sh"]
fn a_calibrated_agent_predicts_itself_at_other_settings() {
    let t = Temp::new("calibrate-exec", "predicts");
    // Setting A: 4 users, nothing binds. Calibrated, and replayed.
    let a = exec(&t, "a", 4, &[]);
    let fitted = calibrate(&a, &t.path("cal"), &[]);
    for row in fitted["check"].as_array().unwrap() {
        if let Some(target) = row["target"].as_f64() {
            let ratio = row["ratio"].as_f64().unwrap();
            println!("replay {}: ratio {ratio:.3}", row["figure"]);
            assert!((ratio - 1.0).abs() <= target, "replay {row}");
        }
    }
    assert_eq!(fitted["structure"]["shape"].as_str(), Some("around"));
    assert_eq!(
        fitted["structure"]["calls_per_round"]["max"].as_u64(),
        Some(3)
    );
    let scenario = t.path("cal").join("scenario.toml");
    let openai = "scheduler.retry={ preset = \"openai-python\" }";

    // The two other settings, run for real at once (each mostly waits), and predicted.
    let (c, b) = std::thread::scope(|s| {
        let c = s.spawn(|| exec(&t, "c", 8, &["provider.max_in_flight=2"]));
        let b = s.spawn(|| exec(&t, "b", 8, &["provider.rpm=300"]));
        (c.join().unwrap(), b.join().unwrap())
    });
    let observed_c = calibrate(&c, &t.path("cal-c"), &["--no-check"]);
    let predicted_c = predict(
        &scenario,
        &t.path("pred-c"),
        &[
            "workload.sessions=8",
            "providers.provider.max_in_flight=2",
            "workload.duration_s=60",
            openai,
        ],
    );
    let (o, p) = (
        &observed_c["query_latency_ms"],
        &predicted_c["latency_ms"]["query"],
    );
    near(
        "max_in_flight 2, query p50",
        p["p50"].as_f64().unwrap(),
        o["p50"].as_f64().unwrap(),
        0.25,
    );
    near(
        "max_in_flight 2, query p95",
        p["p95"].as_f64().unwrap(),
        o["p95"].as_f64().unwrap(),
        0.20,
    );

    let observed_b = calibrate(&b, &t.path("cal-b"), &["--no-check"]);
    let predicted_b = predict(
        &scenario,
        &t.path("pred-b"),
        &[
            "workload.sessions=8",
            "providers.provider.rpm=300",
            "workload.duration_s=60",
            openai,
        ],
    );
    let (o, p) = (
        &observed_b["query_latency_ms"],
        &predicted_b["latency_ms"]["query"],
    );
    near(
        "300 RPM, query p50",
        p["p50"].as_f64().unwrap(),
        o["p50"].as_f64().unwrap(),
        0.15,
    );
    let exec_b: Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("summary.json")).unwrap()).unwrap();
    let observed_429 = exec_b["provider"]["rate_limited"].as_f64().unwrap()
        / observed_b["queries"].as_f64().unwrap();
    // The prediction's 429s pooled over 8 seeds: one 60 s run sees a few dozen at most, and
    // where the window's edge falls moves them by half (single predictions in CI runs, each
    // of its own calibration: 0.052 to 0.108 per query).
    let (mut limited, mut started) = (0.0, 0.0);
    for seed in 1..=8 {
        let seed = format!("seed={seed}");
        let p = predict(
            &scenario,
            &t.path(&format!("pred-b-{seed}")),
            &[
                "workload.sessions=8",
                "providers.provider.rpm=300",
                "workload.duration_s=60",
                openai,
                &seed,
            ],
        );
        limited += p["providers"]["provider"]["rate_limited"]
            .as_f64()
            .unwrap_or_else(|| p["provider"]["rate_limited"].as_f64().unwrap());
        started += p["queries_started"].as_f64().unwrap();
    }
    let predicted_429 = limited / started;
    println!("300 RPM, 429s per query: predicted {predicted_429:.3}, observed {observed_429:.3}");
    assert!(observed_429 > 0.0, "the limit binds for real");
    let ratio = predicted_429 / observed_429;
    // Held to a factor of 3: the prediction has been below what was seen in every CI run, at
    // 0.39 to 0.81 of it (it under-states the 429s of the SDK's bursts; not explained yet).
    assert!(
        (1.0 / 3.0..=3.0).contains(&ratio),
        "429s per query: ratio {ratio:.3}"
    );
}
