//! Every reproducer of the adversarial pass (tests/data/repro/, from shared/repro/reliability)
//! gives a clean result: a correct run, or one line on stderr and the documented exit code,
//! with nothing written. Output-file reproducers live in tests/outputs.rs, the mock's in
//! mock-server/tests.

use std::process::Output;

mod common;
use common::temp::Temp;
use common::{capsize, stderr};

const REPRO: &str = "tests/data/repro";
const RESEARCH: &str = "scenarios/research-agent.toml";

fn repro(name: &str) -> String {
    format!("{REPRO}/{name}")
}

/// A reproducer of the second robustness pass (tests/data/robustness/, from
/// shared/repro/robustness).
fn repro_robustness(name: &str) -> String {
    format!("tests/data/robustness/{name}")
}

/// Exit 2, one line naming `needle`, and nothing written into `out`.
fn refused(o: &Output, out: &Temp, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert!(
        std::fs::read_dir(out.dir()).unwrap().next().is_none(),
        "nothing written"
    );
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("summary.json on stdout")
}

#[test]
fn the_limiter_keeps_the_busiest_minute_under_headroom_with_both_limits() {
    // 50 RPM, 40k TPM, 3,000-token model turns among 300-token tool calls. Before the fix the
    // busiest minute held 43 requests at headroom 0.7 and 50 (with 69 429s) at 0.9.
    let t = Temp::new("reliability", "limiter");
    let out = t.path("o");
    for (headroom, peak) in [("0.7", 35), ("0.9", 45)] {
        let o = capsize(&[
            "run",
            &repro("limiter-over-rpm.toml"),
            "--set",
            "provider.window=sliding",
            "--set",
            &format!("scheduler.headroom={headroom}"),
            "--json",
            "--out",
            out.to_str().unwrap(),
        ]);
        let s = json(&o);
        assert_eq!(s["provider"]["peak_requests_per_60s"], peak, "{headroom}");
        assert_eq!(s["provider"]["rate_limited"], 0, "{headroom}");
    }
}

#[test]
fn a_stop_at_the_instant_of_an_arrival_is_decided_the_same_way_every_time() {
    // 200 queries/s for 5 s, stopped at 2 s: the arrival at exactly 2 s is not started (nothing
    // starts at a stop), so 400 start, every time, and the outputs are byte-identical.
    let t = Temp::new("reliability", "stop");
    let mut summaries = Vec::new();
    for i in 0..4 {
        let out = t.path(&format!("o{i}"));
        let o = capsize(&[
            "check",
            &repro("nondeterministic-stop.toml"),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        summaries.push(std::fs::read(out.join("summary.json")).unwrap());
    }
    let s: serde_json::Value = serde_json::from_slice(&summaries[0]).unwrap();
    assert_eq!(s["queries_started"], 400);
    assert!(summaries.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn values_that_would_overflow_are_refused_before_anything_runs() {
    let t = Temp::new("reliability", "overflow");
    let out = t.path("o");
    let out = out.to_str().unwrap();
    let q = "workload.queries=5";
    let cases: &[(&[&str], &str)] = &[
        (
            &["--set", q, "--set", "scheduler.timeout_ms=1e20"],
            "scheduler.timeout_ms",
        ),
        (
            &["--set", q, "--set", "scheduler.retry.base_ms=1e308"],
            "scheduler.retry.base_ms",
        ),
        (
            &["--set", q, "--set", "scheduler.retry.cap_ms=1e308"],
            "scheduler.retry.cap_ms",
        ),
        (
            &[
                "--set",
                q,
                "--set",
                "scheduler.retry.retry_after_cap_ms=1e308",
            ],
            "retry_after_cap_ms",
        ),
        (
            &["--set", q, "--set", "workload.parent_timeout_ms=1e308"],
            "parent_timeout_ms",
        ),
        (
            &["--set", q, "--set", "workload.stop_at_s=1e308"],
            "workload.stop_at_s",
        ),
        (
            &["--set", q, "--set", "workload.rounds=4294967295"],
            "workload.rounds",
        ),
        (
            &["--set", q, "--set", "workload.rounds=100000000"],
            "workload.rounds",
        ),
        (
            &["--set", q, "--set", "workload.calls_per_query=1000000000"],
            "calls_per_query",
        ),
        (
            &["--set", q, "--set", "workload.sessions=10000000"],
            "workload.sessions",
        ),
        (
            &["--set", q, "--set", "scheduler.burst_s=1e308"],
            "scheduler.burst_s",
        ),
        (
            &["--set", q, "--set", "scheduler.max_concurrency=-1"],
            "max_concurrency",
        ),
        (&["--set", q, "--set", "seed=-1"], "seed"),
    ];
    for (extra, key) in cases {
        let mut args = vec!["run", RESEARCH, "--out", out];
        args.extend_from_slice(extra);
        let o = capsize(&args);
        refused(&o, &t, key);
    }
    let o = capsize(&["run", &repro("capacity-overflow.toml"), "--out", out]);
    refused(&o, &t, "workload.calls_per_query: must be at most 10000");
}

#[test]
fn the_same_bounds_hold_for_every_point_of_a_sweep() {
    let t = Temp::new("reliability", "sweep");
    let out = t.path("o");
    let o = capsize(&[
        "sweep",
        RESEARCH,
        "--sweep",
        "scheduler.timeout_ms=1000,1e20",
        "--out",
        out.to_str().unwrap(),
    ]);
    refused(&o, &t, "scheduler.timeout_ms");
}

#[test]
fn a_call_that_can_never_fit_is_refused_naming_both_keys() {
    let t = Temp::new("reliability", "fit");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        RESEARCH,
        "--set",
        "provider.tpm=1",
        "--out",
        out.to_str().unwrap(),
    ]);
    refused(&o, &t, "workload.tokens_per_call: a request of 2000 tokens can never be served under provider.tpm = 1");
}

#[test]
fn files_that_never_end_are_not_read() {
    let t = Temp::new("reliability", "zero");
    let out = t.path("o");
    let o = capsize(&["run", "/dev/zero", "--out", out.to_str().unwrap()]);
    refused(&o, &t, "/dev/zero: cannot read: not a regular file");
}

#[test]
fn one_seed_range_everywhere_and_every_derived_seed_reusable() {
    let t = Temp::new("reliability", "seed");
    let out = t.path("o");
    let out = out.to_str().unwrap();
    for cmd in ["run", "sweep", "check"] {
        let o = capsize(&[
            cmd,
            RESEARCH,
            "--seed",
            "18446744073709551615",
            "--out",
            out,
        ]);
        refused(&o, &t, "must be from 0 to 9223372036854775807");
    }
    // The largest seed is accepted, and a sweep's derived seeds can be given back as --seed.
    let o = capsize(&[
        "sweep",
        RESEARCH,
        "--seed",
        "9223372036854775807",
        "--set",
        "workload.queries=3",
        "--sweep",
        "scheduler.max_concurrency=1,2,3,4",
        "--sweep",
        "scheduler.headroom=0.7",
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = std::fs::read_to_string(t.path("o/sweep.csv")).unwrap();
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "seed")
        .expect("a seed column");
    for row in rows {
        let seed: u64 = row.split(',').nth(col).unwrap().parse().unwrap();
        assert!(seed <= i64::MAX as u64, "{seed}");
    }
}

#[test]
fn flags_are_held_to_the_bounds_of_the_keys_they_stand_for() {
    let o = capsize(&["plan", "--rpm=1e-300"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "capsize: --rpm: must be a number in [1, 1e12] (per minute), got 1e-300\n"
    );
    let o = capsize(&["plan", "--rpm", "600", "--headroom", "1.5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--headroom: must be in (0, 1], got 1.5"));
    let o = capsize(&["check", RESEARCH, "--tolerance", "5%%"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("\"5%%\" is not a percentage"));
}

#[test]
fn a_baseline_that_compares_nothing_is_refused() {
    let t = Temp::new("reliability", "baseline");
    let out = t.path("o");
    let o = capsize(&[
        "check",
        &repro("research-agent-noslo.toml"),
        "--set",
        "workload.queries=5",
        "--baseline",
        &repro("empty-baseline.json"),
        "--out",
        out.to_str().unwrap(),
    ]);
    refused(&o, &t, "nothing to check");
    let bad = t.write(
        "bad.json",
        r#"{"schema_version": 1, "scenario": "research-agent", "mode": "virtual", "attempts": "40"}"#,
    );
    let o = capsize(&[
        "check",
        &repro("research-agent-noslo.toml"),
        "--baseline",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("attempts: must be a number, got \"40\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_closed_loop_of_queries_that_take_no_time_still_ends() {
    // One call answered in 0 ms, no think time, a duration stop: each query takes no time, so
    // without the one-microsecond spacing the session would start queries at t = 0 for ever.
    // With it, a session starts one query each microsecond: 2 sessions × 10 ms = 20,000.
    let t = Temp::new("reliability", "zero-time");
    let out = t.path("o");
    let s = t.write(
        "zero.toml",
        "name = \"zero\"\n[provider]\nlatency = { dist = \"constant\", ms = 0 }\n\
         [workload]\nsessions = 2\nduration_s = 0.01\ncalls_per_query = 1\ntokens_per_call = 1\n",
    );
    let o = capsize(&[
        "run",
        s.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = json(&o);
    assert_eq!(summary["queries_started"], 20_000);
    assert_eq!(summary["queries"], 20_000);
}

#[test]
fn queries_that_send_nothing_are_refused_before_the_run() {
    // No call and no model turn: such queries would take no time and measure nothing (a
    // duration of 600 s ran ~6e9 of them). Refused at once, naming the key and why.
    let t = Temp::new("reliability", "empty-queries");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        &repro_robustness("empty-queries-hang.toml"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("workload.calls_per_query: is 0 and a query sends no other request (no [workload.model_turn], no synthesis turn)"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(!out.exists(), "no partial output");
    // A model turn with rounds = 1 is never taken: still nothing sent, and said so.
    let s = t.write(
        "turn.toml",
        "name = \"turn\"\n[provider]\nlatency = { dist = \"constant\", ms = 10 }\n[workload]\nqueries = 3\ncalls_per_query = 0\n\
         tokens_per_call = 1\n[workload.model_turn]\ntokens = 10\n",
    );
    let o = capsize(&["run", s.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("(rounds = 1, so its model turn between rounds is never taken,"),
        "{}",
        stderr(&o)
    );
    // With rounds = 2 the model turn is a request: the run goes ahead (3 queries, 3 turns).
    let o = capsize(&[
        "run",
        s.to_str().unwrap(),
        "--set",
        "workload.rounds=2",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = json(&o);
    assert_eq!(summary["queries"], 3);
    assert_eq!(summary["calls"], 3);
    // Around one round: a turn before it and one to answer (3 queries, 6 turns).
    let o = capsize(&[
        "run",
        s.to_str().unwrap(),
        "--set",
        "workload.model_turn.at=around",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = json(&o);
    assert_eq!(summary["queries"], 3);
    assert_eq!(summary["calls"], 6);
}

#[test]
fn an_unknown_key_in_an_inline_phase_is_named_with_its_index() {
    // Phases written as an array of inline tables, one per line: the error names the element
    // (`phases[1]`), not an empty key (`providers."llm"..window`).
    let t = Temp::new("reliability", "phase-key");
    let out = t.path("o");
    let s = t.write(
        "phase.toml",
        "name = \"phase\"\n[providers.\"llm\"]\nrpm = 600\nphases = [\n  { at_s = 0, rpm = 300 },\n  \
         { at_s = 10, window = \"x\" },\n]\n[workload]\nqueries = 3\ncalls_per_query = 1\n\
         tokens_per_call = 1\nprovider = \"llm\"\n",
    );
    let o = capsize(&["run", s.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains(".phases[1].window"), "{e}");
    assert!(!e.contains(".."), "{e}");
    assert!(e.contains("phase.toml:6:"), "{e}");
}

#[test]
fn a_model_turn_over_its_providers_output_cap_is_refused() {
    // The APIs answer 400 to a max_tokens above the model's output cap, and so does the mock
    // (provider.max_output_tokens, default 32,768): refused before the run, not 400 per turn.
    let t = Temp::new("reliability", "max-output");
    let input = Temp::new("reliability", "max-output-in");
    let out = t.path("o");
    let s = input.write(
        "mt.toml",
        "name = \"mt\"\n[provider]\nlatency = { dist = \"constant\", ms = 10 }\n[workload]\n\
         queries = 3\nrounds = 2\ncalls_per_query = 1\ntokens_per_call = 1\n\
         [workload.model_turn]\ntokens = 10\nmax_tokens = 40000\n",
    );
    let o = capsize(&["run", s.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    refused(
        &o,
        &t,
        "workload.model_turn.max_tokens: 40000 is above provider's max_output_tokens (32768)",
    );
    let o = capsize(&[
        "run",
        s.to_str().unwrap(),
        "--set",
        "provider.max_output_tokens=40000",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(json(&o)["queries"], 3);
}

#[test]
fn a_run_of_the_longest_duration_allowed_finishes_its_last_queries() {
    // duration_s at its bound (a year, the watchdog's old horizon): the last queries start just
    // before the year ends and finish after it. The watchdog stops a run a year past its last
    // start, so this one ends (it was exit 4), and --timeseries keeps its 4,096 bins.
    let t = Temp::new("reliability", "year");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        &repro_robustness("timeseries-year.toml"),
        "--set",
        "workload.arrival_rate=0.0002",
        "--timeseries",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = json(&o);
    assert_eq!(summary["queries"], summary["queries_started"]);
    assert!(summary["virtual_seconds"].as_f64().unwrap() > 31_536_000.0 - 30_000.0);
    let csv = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 3851,
        "bins of 8,192 s up to the run's end"
    );
}

#[test]
fn a_latency_of_any_size_is_clamped_not_a_panic() {
    // A lognormal with sigma 100 draws values far beyond any Duration: each is clamped to a
    // year (the documented bound), and the run completes.
    let t = Temp::new("reliability", "lognormal");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        &repro("panic-lognormal.toml"),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let s = json(&o);
    assert_eq!(s["queries_started"], 5);
    let year_ms = 365.0 * 86_400_000.0;
    let max = s["latency_ms"]["call"]["max"].as_f64().unwrap();
    assert!(max > 0.0 && max <= year_ms * 1.001, "{max}");
}
