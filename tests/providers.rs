//! Several providers in one scenario (`[providers.NAME]`): each kind of call goes where the
//! workload says, waits only in its own provider's limiter, and is counted per provider in
//! summary.json; bad input is one line and exit 2; the real-time arm serves each provider from
//! a mock of its own and agrees with the virtual one.

use std::path::Path;

use capsize::api::scenario::{load, parse, Scenario};
use capsize::api::sim::{self, RealtimeOptions};
use capsize::api::summary::Summary;
use serde_json::Value;

mod common;
use common::{capsize, stderr};

const PACED: &str = "tests/data/providers/paced.toml";

fn summary(s: &Scenario, out: &sim::SimOutcome) -> Value {
    serde_json::from_str(&Summary::new(s, out).to_json()).expect("summary.json is JSON")
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

#[test]
fn each_call_waits_only_in_its_own_providers_limiter() {
    // The model at 6 RPM spaces the model turns 10 s apart; the local tools wait for nothing:
    // query k ends at 0.1 + 10 (k - 1) + 1 + 0.1 s, so the fifth at 41.2 s.
    let s = load(Path::new(PACED), &[]).expect("the scenario loads");
    let out = sim::run(&s).expect("the run finishes");
    let j = summary(&s, &out);
    assert_eq!(j["virtual_seconds"], 41.2);
    // Histograms keep 3 significant digits: within 0.1 %.
    let near = |path: &str, ms: f64| {
        let v = at(&j, path).as_f64().expect("a number");
        assert!((v / ms - 1.0).abs() < 1e-3, "{path}: {v} ms, not {ms}");
    };
    near("latency_ms.query.max", 10_000.0);
    assert_eq!(at(&j, "latency_ms.query.count"), 5);
    // The one model turn that found the bucket full waited 0; the others 8.8 s each.
    near("latency_ms.call_limiter.max", 8_800.0);
    assert_eq!(at(&j, "providers.llm.received"), 5);
    assert_eq!(at(&j, "providers.llm.rate_limited"), 0);
    assert_eq!(at(&j, "providers.none.received"), 20);
    assert_eq!(
        at(&j, "provider.received"),
        25,
        "every provider's, added up"
    );
    assert_eq!(at(&j, "providers.llm.peak_requests_per_60s"), 5);
    assert_eq!(at(&j, "providers.none.rpm_utilization"), &Value::Null);
    // 5 requests over 41.2 s against 6 RPM.
    let llm = at(&j, "providers.llm.rpm_utilization")
        .as_f64()
        .expect("a number");
    assert!((llm - 5.0 / (41.2 / 60.0) / 6.0).abs() < 1e-4, "{llm}");
    assert_eq!(
        j["rpm_utilization"].as_f64(),
        Some(llm),
        "the highest of them"
    );
}

#[test]
fn one_shared_limit_would_pace_the_tools_too() {
    // The same traffic through one provider at 6 RPM: every call waits in the one limiter,
    // 25 calls 10 s apart, so the run takes four minutes, not 41 s.
    let one = std::fs::read_to_string(PACED)
        .expect("readable")
        .replace("[providers.llm]", "[provider]")
        .replace("provider = \"none\"\n", "")
        .replace(", provider = \"llm\"", "")
        .replace(
            "tools = [{ name = \"local\", latency = { dist = \"constant\", ms = 100 } }]",
            "",
        );
    let s = parse(&one, Path::new("one.toml"), &[]).expect("the one-provider form parses");
    assert!(!s.named_providers);
    let out = sim::run(&s).expect("the run finishes");
    let j = summary(&s, &out);
    assert!(j.get("providers").is_none(), "no per-provider section");
    assert_eq!(at(&j, "provider.received"), 25);
    assert!(
        j["virtual_seconds"].as_f64().expect("a number") > 240.0,
        "{j}"
    );
}

#[test]
fn tool_classes_are_drawn_by_weight_and_served_as_they_say() {
    // 3,000 tool calls over two classes weighted 3:1 on one provider, the second failing at
    // a rate of its own (every call): a quarter of the calls, within Monte-Carlo error
    // (sd of the count: sqrt(3000 × 0.25 × 0.75) = 24), fail for good after their retries.
    let toml = r#"
        name = "classes"
        seed = 11
        [providers.api]
        latency = { dist = "constant", ms = 10 }
        [workload]
        queries = 3000
        calls_per_query = 1
        tokens_per_call = 1
        tools = [
          { name = "good", weight = 3 },
          { name = "bad", weight = 1, error_rate = 1.0, tokens = 7 },
        ]
        [scheduler]
        retry = { max_retries = 0 }
    "#;
    let s = parse(toml, Path::new("classes.toml"), &[]).expect("parses");
    let out = sim::run(&s).expect("the run finishes");
    let j = summary(&s, &out);
    let failed = j["errors"].as_u64().expect("a count");
    assert!((750 - 4 * 24..=750 + 4 * 24).contains(&failed), "{failed}");
    assert_eq!(at(&j, "providers.api.errored").as_u64(), Some(failed));
    // The bad class costs 7 tokens a call, the good one 1.
    let tokens = at(&j, "providers.api.tokens_charged")
        .as_u64()
        .expect("a count");
    assert_eq!(tokens, (3000 - failed) + 7 * failed);
}

#[test]
fn bad_provider_names_are_one_line_and_exit_2() {
    let dir = common::temp::Temp::new("providers", "bad");
    let base = std::fs::read_to_string(PACED).expect("readable");
    let cases = [
        (
            base.replace("provider = \"llm\"", "provider = \"lmm\""),
            "workload.model_turn.provider: no provider is named \"lmm\": the scenario has llm, or \"none\" for none",
        ),
        (
            base.replace("[providers.llm]", "[providers]"),
            "providers.rpm",
        ),
        (
            format!("{base}\n[provider]\nlatency = {{ dist = \"constant\", ms = 1 }}\n"),
            "providers: give one [provider] table or [providers.NAME] tables, not both",
        ),
        (
            base.replace("[providers.llm]", "[providers.none]"),
            "providers.none: \"none\" is taken",
        ),
        (
            base.replace("latency = { dist = \"constant\", ms = 100 } ", ""),
            "workload.tools[0].latency: is required for a tool with provider = \"none\"",
        ),
        (
            base.replace("rpm = 6", "rpm = 0"),
            "providers.llm.rpm: must be a number in [1",
        ),
        (
            base.replace("rpm = 6", "rpm = 6\ntpm = 50"),
            "workload.model_turn.tokens: a request of 100 tokens",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = dir.write(&format!("case{i}.toml"), text);
        let out = dir.path("out");
        let o = capsize(&[
            "run",
            file.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "case {i}: {err}");
        assert_eq!(err.lines().count(), 1, "case {i}: one line: {err}");
        assert!(err.contains(want), "case {i}: {err}");
    }
    assert!(!dir.path("out").exists(), "nothing written");
}

#[test]
fn an_objective_may_name_a_provider_and_a_typo_is_refused() {
    let dir = common::temp::Temp::new("providers", "slo");
    let base = std::fs::read_to_string(PACED).expect("readable");
    let file = dir.path("slo.toml");
    let out = dir.path("out");
    let check = |slo: &str| {
        std::fs::write(&file, format!("{base}\n[slo]\n{slo}\n")).expect("written");
        capsize(&[
            "check",
            file.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ])
    };
    let ok = check("\"providers.llm.received\" = \"== 5\"");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let fails = check("\"providers.none.received\" = \"< 20\"");
    assert_eq!(fails.status.code(), Some(1), "{}", stderr(&fails));
    let typo = check("\"providers.lmm.received\" = \"== 5\"");
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        stderr(&typo).contains("providers.lmm.received"),
        "{}",
        stderr(&typo)
    );
}

#[test]
fn the_real_time_arm_serves_each_provider_from_a_mock_of_its_own() {
    // The same run over HTTP at 20x (about 2 s): one mock for the model, one for the local
    // tools. The counts are exact; the time within 5 % (each exchange costs real time).
    let s = load(Path::new(PACED), &[]).expect("the scenario loads");
    let opts = RealtimeOptions {
        time_scale: 20.0,
        target: None,
        fleet_redis: None,
        single_run: true,
        replica: None,
        announce: None,
    };
    let out = sim::run_realtime(&s, &opts).expect("the run finishes");
    let j = summary(&s, &out);
    assert_eq!(at(&j, "providers.llm.received"), 5);
    assert_eq!(at(&j, "providers.none.received"), 20);
    let secs = j["virtual_seconds"].as_f64().expect("a number");
    assert!((secs / 41.2 - 1.0).abs() < 0.05, "{secs}");
    // One mock cannot stand for two.
    let opts = RealtimeOptions {
        time_scale: 20.0,
        target: Some("http://127.0.0.1:9".into()),
        fleet_redis: None,
        single_run: true,
        replica: None,
        announce: None,
    };
    let err = sim::run_realtime(&s, &opts)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("--target names one mock"), "{err}");
}
