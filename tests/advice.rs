//! Advice is tested by following it. For a workload bound by a model's TPM, a tool API's RPM,
//! a model's OTPM and the client's own concurrency (slow tools), the analysis names the limit
//! that binds and the change that lifts it; each test applies that change with `--set`, runs
//! the scenario again, and asserts the gain the advice promised.
//!
//! Noise: each run is long enough (hundreds of queries) that its throughput is within a few
//! per cent of the ceiling it runs against; the bounds below say how far.

use std::path::Path;

use capsize::api::plan::{Demand, LimitKind};
use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim;
use capsize::api::summary::Summary;

fn scenario(toml: &str, sets: &[String]) -> Scenario {
    parse(toml, Path::new("advice.toml"), sets).unwrap_or_else(|e| panic!("{e}"))
}

/// Queries per minute the run of `s` served in full (a query whose call failed for good ends
/// early, sends less, and is not served).
fn queries_per_min(s: &Scenario) -> f64 {
    let out = sim::run(s).unwrap_or_else(|e| panic!("{e}"));
    let sum = Summary::new(s, &out);
    (sum.queries - sum.queries_failed) as f64 / sum.virtual_seconds * 60.0
}

/// Within `lo`..`hi` times `want`.
fn within(got: f64, want: f64, lo: f64, hi: f64, what: &str) {
    assert!(
        got >= want * lo && got <= want * hi,
        "{what}: {got} queries/min is not within {lo}..{hi} × {want}"
    );
}

/// Checks that `kind` of `provider` binds `toml`, that the run sustains about what it allows,
/// and that following the advice sustains what it promised. Returns the advice's key and value.
/// `before`: the bounds of the first run's throughput over what the binding limit allows, or
/// `None` where no client bucket holds the client under it (then 429s decide).
fn follow(
    toml: &str,
    provider: &str,
    kind: LimitKind,
    before: Option<(f64, f64)>,
) -> (String, f64) {
    let s = scenario(toml, &[]);
    let d = Demand::of(&s);
    let b = d.binding().expect("a limit binds");
    assert_eq!((b.provider.as_str(), b.kind), (provider, kind), "{d:#?}");
    let asked = d.asked_per_min(&s).expect("an ask");
    let advice = d.advise(asked).expect("advice");
    if let Some((lo, hi)) = before {
        within(queries_per_min(&s), b.at_headroom, lo, hi, "before");
    }
    let set = format!("{}={}", advice.key, advice.value);
    let after = queries_per_min(&scenario(toml, &[set]));
    // The ceiling is a ceiling: a run reaches it from below, and waits cost a little.
    within(after, advice.promised, 0.93, 1.02, "after");
    assert!(
        after > queries_per_min(&s) * 1.25,
        "the advice changed little"
    );
    (advice.key, advice.value)
}

#[test]
fn a_models_tpm_binds_and_raising_it_serves_up_to_its_rpm() {
    // The reproducer of issue 29: the tools' 600 RPM was blamed; the model's 40k TPM binds
    // (2 turns of 2,000 tokens a query: 9 queries/min at 90 %), and at 100k its 50 RPM does
    // (2 requests a query: 22.5 queries/min at 90 %).
    let toml = r#"
        name = "tpm-bound"
        seed = 7
        [providers.llm]
        rpm = 50
        tpm = 40_000
        latency = { dist = "lognormal", mean_ms = 2500, p95_ms = 6000 }
        [providers.search]
        rpm = 600
        latency = { dist = "uniform", min_ms = 200, max_ms = 900 }
        [workload]
        sessions = 12
        queries = 300
        rounds = 3
        calls_per_query = 3
        tokens_per_call = 0
        provider = "search"
        model_turn = { tokens = 2000, provider = "llm" }
        think_time = { dist = "exponential", mean_ms = 10000 }
        tools = [
          { name = "web_search", weight = 3 },
          { name = "fetch_page", weight = 2, latency = { dist = "lognormal", mean_ms = 600, p95_ms = 1500 } },
          { name = "calculator", weight = 1, provider = "none", latency = { dist = "constant", ms = 5 } },
        ]
        [scheduler]
        max_concurrency = 8
        rate_limit = true
        headroom = 0.9
        "#;
    let (key, value) = follow(toml, "llm", LimitKind::Tpm, Some((0.97, 1.01)));
    assert_eq!((key.as_str(), value), ("providers.llm.tpm", 100_000.0));
}

#[test]
fn a_tool_apis_rpm_binds_and_raising_it_serves_the_arrivals() {
    // 4 search calls a query at 0.5 queries/s ask 120 RPM of a 60 RPM API: 13.5 queries/min at
    // 90 %; the model's 1M TPM is far off.
    let toml = r#"
        name = "rpm-bound"
        seed = 3
        [providers.llm]
        tpm = 1_000_000
        latency = { dist = "constant", ms = 800 }
        [providers.search]
        rpm = 60
        latency = { dist = "uniform", min_ms = 200, max_ms = 600 }
        [workload]
        mode = "open"
        arrival_rate = 0.5
        queries = 600
        calls_per_query = 4
        tokens_per_call = 0
        provider = "search"
        model_turn = { tokens = 1000, provider = "llm", at = "around" }
        [scheduler]
        max_concurrency = 64
        rate_limit = true
        headroom = 0.9
        "#;
    let (key, value) = follow(toml, "search", LimitKind::Rpm, Some((0.97, 1.01)));
    // 30 queries/min × 4 requests / 0.9.
    assert_eq!((key.as_str(), value), ("providers.search.rpm", 134.0));
}

#[test]
fn a_models_otpm_binds_and_raising_it_serves_the_arrivals() {
    // Two model turns a query (around one round), each generating 500 tokens: 1,000 output
    // tokens a query against 12k OTPM is 12 queries/min of the 30 that arrive. No client
    // bucket holds it (there is no OTPM bucket): the provider's 429s do, and most queries fail
    // once their retries give up, so the first run is not held to the ceiling.
    let toml = r#"
        name = "otpm-bound"
        seed = 11
        [providers.llm]
        otpm = 12_000
        latency = { dist = "constant", ms = 1 }
        output_tokens = 500
        ttft = { dist = "constant", ms = 400 }
        tpot = { dist = "constant", ms = 4 }
        [workload]
        mode = "open"
        arrival_rate = 0.5
        queries = 600
        calls_per_query = 2
        tokens_per_call = 0
        provider = "none"
        tools = [{ name = "lookup", latency = { dist = "constant", ms = 300 } }]
        model_turn = { tokens = 1000, max_tokens = 800, provider = "llm", at = "around" }
        [scheduler]
        max_concurrency = 64
        "#;
    let (key, value) = follow(toml, "llm", LimitKind::Otpm, None);
    // 30 queries/min × 1,000 output tokens, with 20 % spare: 30,000 / 0.8.
    assert_eq!((key.as_str(), value), ("providers.llm.otpm", 37_500.0));
}

#[test]
fn slow_tools_make_the_concurrency_bind_and_more_slots_serve_the_arrivals() {
    // No provider limit: 4 tool calls of 2 s a query hold 8 slot-seconds; 4 slots serve 30
    // queries/min of the 45 that arrive; 6 slots serve them all.
    let toml = r#"
        name = "tools-bound"
        seed = 5
        [provider]
        latency = { dist = "constant", ms = 2000 }
        [workload]
        mode = "open"
        arrival_rate = 0.75
        queries = 600
        calls_per_query = 4
        tokens_per_call = 0
        [scheduler]
        max_concurrency = 4
        "#;
    let (key, value) = follow(toml, "", LimitKind::Concurrency, Some((0.97, 1.01)));
    assert_eq!((key.as_str(), value), ("scheduler.max_concurrency", 6.0));
}
