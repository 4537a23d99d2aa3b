//! What a run costs, worked by hand: summary.json's `cost` for runs whose every billed answer
//! is known in advance, in virtual time exactly, and in real time (the same answers over HTTP,
//! each bill read from the mock's `x-capsize-bill` header) to the same picodollar.
//!
//! Prices: $3 a million prompt tokens (3e6 picodollars a token), $15 a million answer tokens
//! (15e6), $0.30 a million cached prompt tokens (3e5).

#![allow(clippy::disallowed_methods)] // real-time arm: real processes

mod common;

use common::temp::Temp;
use common::{capsize, stderr};
use serde_json::Value;

const PRICE: &str = "price = { input_per_mtok = 3.0, output_per_mtok = 15.0, cached_input_per_mtok = 0.3, cached_input_share = 0.5 }";

/// 4 queries of two rounds of 3 tool calls (100 tokens) with a model turn between them (a
/// 300-token prompt asking for at most 100 more; the provider generates 40). Every answer is
/// used.
fn all_good() -> String {
    format!(
        r#"
name = "cost-good"
seed = 1
[provider]
latency = {{ dist = "constant", ms = 100 }}
output_tokens = 40
ttft = {{ dist = "constant", ms = 100 }}
tpot = {{ dist = "constant", ms = 1 }}
{PRICE}
[workload]
queries = 4
calls_per_query = 3
tokens_per_call = 100
rounds = 2
model_turn = {{ tokens = 300, max_tokens = 100 }}
"#
    )
}

/// 3 queries of two rounds of 2 tool calls (100 tokens, 100 ms) with a model turn between
/// (a 200-token prompt asking for at most 50 more, 5 s) that the client gives up on after
/// 2 s, once.
fn turn_times_out() -> String {
    format!(
        r#"
name = "cost-timeouts"
seed = 1
[provider]
latency = {{ dist = "constant", ms = 100 }}
{PRICE}
[workload]
queries = 3
calls_per_query = 2
tokens_per_call = 100
rounds = 2
model_turn = {{ tokens = 200, max_tokens = 50, latency = {{ dist = "constant", ms = 5000 }} }}
[scheduler]
timeout_ms = 2000
retry = {{ max_retries = 0 }}
"#
    )
}

/// 2 queries of 1 tool call (100 tokens, 1 s) whose caller gives up after 0.5 s.
fn abandoned() -> String {
    format!(
        r#"
name = "cost-abandoned"
seed = 1
[provider]
latency = {{ dist = "constant", ms = 1000 }}
{PRICE}
[workload]
queries = 2
calls_per_query = 1
tokens_per_call = 100
parent_timeout_ms = 500
"#
    )
}

/// One tool call of 100 tokens that times out at the client (3 s against 1 s), tried 3 times.
fn retried() -> String {
    format!(
        r#"
name = "cost-retried"
seed = 1
[provider]
latency = {{ dist = "constant", ms = 3000 }}
{PRICE}
[workload]
queries = 1
calls_per_query = 1
tokens_per_call = 100
[scheduler]
timeout_ms = 1000
retry = {{ max_retries = 2, base_ms = 0, cap_ms = 0 }}
"#
    )
}

/// `capsize run` of `scenario` (with `extra` flags): its summary.json's `cost`.
fn cost(t: &Temp, name: &str, scenario: &str, extra: &[&str]) -> Value {
    let text = summary_text(t, name, scenario, extra);
    let summary: Value = serde_json::from_str(&text).expect("summary.json");
    summary["cost"].clone()
}

/// `capsize run` of `scenario` (with `extra` flags): its summary.json, as text.
fn summary_text(t: &Temp, name: &str, scenario: &str, extra: &[&str]) -> String {
    let file = t.write(&format!("{name}.toml"), scenario);
    let out = t.path(name);
    let mut args = vec![
        "run",
        file.to_str().expect("UTF-8"),
        "--out",
        out.to_str().expect("UTF-8"),
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = capsize(&args);
    assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

fn usd(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("cost.{key} is not a number: {v}"))
}

fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("cost.{key} is not a count: {v}"))
}

/// Dollars equal to the picodollar (what f64 division leaves of an exact integer).
fn dollars(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() < 1e-12,
        "{what}: {got}, worked by hand {want}"
    );
}

fn check_all_good(c: &Value) {
    // A query: 6 tool calls of 100 prompt tokens and a turn of 300, half of each prompt
    // cached (50 and 150), 40 answer tokens generated (not the 100 asked for):
    //   fresh 450 x 3e6 = 1.35e9; cached 450 x 3e5 = 1.35e8; answer 40 x 15e6 = 6e8;
    //   2.085e9 p$. Four queries: 8.34e9 p$ = $0.00834.
    dollars(usd(c, "total_usd"), 0.00834, "total");
    dollars(usd(c, "per_query_usd"), 0.002085, "per query");
    dollars(usd(c, "per_good_query_usd"), 0.002085, "per good query");
    assert_eq!(count(c, "good_queries"), 4);
    assert_eq!(
        [
            count(c, "input_tokens"),
            count(c, "cached_input_tokens"),
            count(c, "output_tokens")
        ],
        [1_800, 1_800, 160]
    );
    dollars(usd(c, "input_usd"), 0.0054, "input");
    dollars(usd(c, "cached_input_usd"), 0.00054, "cached input");
    dollars(usd(c, "output_usd"), 0.0024, "output");
    dollars(usd(c, "wasted_usd"), 0.0, "wasted");
    assert_eq!(usd(c, "wasted_share"), 0.0);
}

fn check_turn_times_out(c: &Value) {
    // A query: 4 tool calls used (400 prompt tokens, 200 cached: 200 x 3e6 + 200 x 3e5 =
    // 6.6e8 p$) and a turn billed and never used (200 prompt tokens, 100 cached; 50 answer
    // tokens, its max_tokens, as the provider does not generate: 100 x 3e6 + 100 x 3e5 +
    // 50 x 15e6 = 3e8 + 3e7 + 7.5e8 = 1.08e9 p$). The turn failed, so the query did, and
    // its tool calls were wasted too. Three queries: 5.22e9 p$.
    dollars(usd(c, "total_usd"), 0.00522, "total");
    dollars(usd(c, "unused_answers_usd"), 0.00324, "unused answers");
    assert_eq!(count(c, "unused_answers_tokens"), 3 * 250);
    dollars(usd(c, "failed_queries_usd"), 0.00198, "failed queries");
    assert_eq!(count(c, "failed_queries_tokens"), 3 * 400);
    dollars(usd(c, "wasted_usd"), 0.00522, "wasted");
    assert_eq!(usd(c, "wasted_share"), 1.0);
    assert_eq!(count(c, "good_queries"), 0);
    assert!(c["per_good_query_usd"].is_null(), "no good query: {c}");
}

#[test]
fn every_answer_used_costs_what_its_tokens_cost() {
    let t = Temp::new("cost", "good");
    check_all_good(&cost(&t, "good", &all_good(), &[]));
}

#[test]
fn a_turn_the_client_timed_out_and_its_failed_query_are_wasted() {
    let t = Temp::new("cost", "timeouts");
    check_turn_times_out(&cost(&t, "timeouts", &turn_times_out(), &[]));
}

#[test]
fn answers_after_the_caller_gave_up_are_orphans_and_wasted() {
    let t = Temp::new("cost", "abandoned");
    let c = cost(&t, "abandoned", &abandoned(), &[]);
    // Two calls of 100 prompt tokens, half cached: 50 x 3e6 + 50 x 3e5 = 1.65e8 p$ each,
    // answered after their queries were abandoned.
    dollars(usd(&c, "total_usd"), 3.3e-4, "total");
    dollars(usd(&c, "unused_answers_usd"), 3.3e-4, "unused");
    dollars(
        usd(&c, "failed_queries_usd"),
        0.0,
        "failed queries used nothing",
    );
    assert_eq!(count(&c, "good_queries"), 0);
    dollars(usd(&c, "per_query_usd"), 1.65e-4, "per query");
}

#[test]
fn every_retry_of_a_timed_out_call_is_billed_and_wasted() {
    let t = Temp::new("cost", "retried");
    let c = cost(&t, "retried", &retried(), &[]);
    // Three attempts, each served after the client gave up: 3 x 1.65e8 p$.
    dollars(usd(&c, "total_usd"), 4.95e-4, "total");
    dollars(usd(&c, "wasted_usd"), 4.95e-4, "wasted");
    assert_eq!(count(&c, "unused_answers_tokens"), 300);
}

#[test]
fn an_unpriced_run_has_no_cost() {
    let t = Temp::new("cost", "unpriced");
    let plain = all_good().replace(PRICE, "");
    assert!(cost(&t, "plain", &plain, &[]).is_null());
}

#[test]
fn real_time_bills_the_same_answers_to_the_picodollar() {
    let t = Temp::new("cost", "realtime");
    let realtime = ["--mode", "realtime", "--time-scale", "10"];
    check_all_good(&cost(&t, "good", &all_good(), &realtime));
    check_turn_times_out(&cost(&t, "timeouts", &turn_times_out(), &realtime));
}

#[test]
fn ci_gates_on_the_cost_of_a_good_query() {
    let t = Temp::new("cost", "gate");
    for (bound, code) in [("< 0.003", 0), ("< 0.002", 1)] {
        let scenario = format!(
            "{}[slo]\n\"cost.per_good_query_usd\" = \"{bound}\"\n",
            all_good()
        );
        let file = t.write("gate.toml", &scenario);
        let out = t.path("gate");
        let o = capsize(&[
            "check",
            file.to_str().expect("UTF-8"),
            "--out",
            out.to_str().expect("UTF-8"),
        ]);
        let said = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{bound}: {said}{}", stderr(&o));
        assert!(said.contains("cost.per_good_query_usd"), "{said}");
    }
}

#[test]
fn a_baseline_of_a_priced_run_gates_its_cost() {
    let t = Temp::new("cost", "baseline");
    let file = t.write("good.toml", &all_good());
    let baseline = t.path("baseline.json");
    let (f, b) = (file.to_str().unwrap(), baseline.to_str().unwrap());
    let o = capsize(&["baseline", f, "--out", b]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let check = |extra: &[&str]| {
        let out = t.path("check");
        let mut args = vec!["check", f, "--baseline", b, "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        capsize(&args)
    };
    // The same run: every figure, the bill by provider beside them, as the baseline's.
    let o = check(&[]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{said}{}", stderr(&o));
    assert!(
        said.lines()
            .any(|l| l.starts_with("baseline") && l.contains("cost.per_good_query_usd")),
        "{said}"
    );
    // A dearer model (prompts at $4 a million, not $3) costs more per query: worse beyond 5 %.
    let o = check(&[
        "--set",
        "provider.price={ input_per_mtok = 4.0, output_per_mtok = 15.0, cached_input_per_mtok = 0.3, cached_input_share = 0.5 }",
    ]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{said}{}", stderr(&o));
    assert!(
        said.lines()
            .any(|l| l.contains("cost.per_good_query_usd") && l.contains("FAIL")),
        "{said}"
    );
}

#[test]
fn a_sweep_recommends_the_cheapest_passing_point_and_shows_what_each_costs() {
    let t = Temp::new("cost", "sweep");
    // Tool calls of 200 ms to 3 s: a short client timeout pays for every slow answer it gives
    // up on, and again for each retry.
    let scenario = format!(
        r#"
name = "cost-sweep"
seed = 3
[provider]
latency = {{ dist = "uniform", min_ms = 200, max_ms = 3000 }}
{PRICE}
[workload]
queries = 40
calls_per_query = 4
tokens_per_call = 1000
[scheduler]
max_concurrency = 8
retry = {{ max_retries = 3, base_ms = 0, cap_ms = 0 }}
[sweep]
"scheduler.timeout_ms" = [1200, 2000, 3500]
prefer = "min cost.per_good_query_usd"
"#
    );
    let file = t.write("sweep.toml", &scenario);
    let out = t.path("out");
    let o = capsize(&[
        "sweep",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"))
    };
    let (timeout, per_good, wasted) = (
        col("scheduler.timeout_ms"),
        col("cost_per_good_query_usd"),
        col("wasted_share"),
    );
    let points: Vec<(String, f64, f64)> = rows
        .map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            (
                f[timeout].to_string(),
                f[per_good].parse().unwrap(),
                f[wasted].parse().unwrap(),
            )
        })
        .collect();
    // The shortest timeout wastes the most and costs the most per good query.
    assert!(points[0].2 > points[2].2, "{points:?}");
    assert!(points[0].1 > points[2].1, "{points:?}");
    let cheapest = points.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("**timeout_ms = {}", cheapest.0)),
        "the cheapest point, {cheapest:?}, is recommended: {md}"
    );
    assert!(
        md.contains("the smallest mean `cost.per_good_query_usd` (`[sweep] prefer`)"),
        "{md}"
    );
    assert!(md.contains("a good query ($"), "the headline says it: {md}");
    assert!(md.contains("| $ / good query | wasted |"), "{md}");
    assert!(out.join("cost.svg").is_file() && out.join("cost.png").is_file());
}

#[test]
fn compare_puts_the_cost_of_a_setting_beside_its_alternative() {
    let t = Temp::new("cost", "compare");
    // The same tool calls with a client timeout under (A) and over (B) their slowest answer.
    let base = |timeout: u32| {
        format!(
            r#"
name = "cost-compare"
seed = 3
[provider]
latency = {{ dist = "uniform", min_ms = 200, max_ms = 3000 }}
{PRICE}
[workload]
queries = 200
calls_per_query = 4
tokens_per_call = 1000
[scheduler]
max_concurrency = 8
timeout_ms = {timeout}
retry = {{ max_retries = 3, base_ms = 0, cap_ms = 0 }}
"#
        )
    };
    let run = |name: &str, timeout: u32| {
        let file = t.write(&format!("{name}.toml"), &base(timeout));
        let out = t.path(name);
        let o = capsize(&[
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        out
    };
    let (a, b) = (run("short", 1200), run("long", 3500));
    let o = capsize(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{said}{}", stderr(&o));
    for row in [
        "$ per query",
        "$ per good query",
        "share of the bill wasted",
    ] {
        let line = said
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row: {said}"));
        // The longer timeout wastes nothing and costs less: better, beyond the noise.
        assert!(line.contains("better"), "{line}");
    }
}

/// 20 queries of one tool call at the bounds a scenario allows: 10¹² prompt tokens at $10⁶ a
/// million, $10¹² (10²⁴ picodollars) an answer, each one past a u64 of picodollars alone.
fn at_the_bounds(extra: &str) -> String {
    format!(
        r#"
name = "cost-bounds"
seed = 1
[provider]
latency = {{ dist = "constant", ms = 100 }}
price = {{ input_per_mtok = 1_000_000, output_per_mtok = 1_000_000 }}
[workload]
queries = 20
calls_per_query = 1
tokens_per_call = 1_000_000_000_000
{extra}"#
    )
}

/// The provider's bill in summary.json's text: `"KEY": N`, an exact integer however wide.
fn billed(text: &str, key: &str) -> String {
    let at = text
        .find("\"billed\": {")
        .unwrap_or_else(|| panic!("no provider.billed: {text}"));
    let from = text[at..]
        .find(&format!("\"{key}\": "))
        .unwrap_or_else(|| panic!("no billed.{key}"))
        + at
        + key.len()
        + 4;
    let to = text[from..].find([',', '\n']).expect("the number ends") + from;
    text[from..to].to_string()
}

#[test]
fn a_bill_past_a_u64_of_picodollars_is_exact() {
    // W1: 1.6 M calls x 200,000 prompt tokens at $75 a million is $24,000,000, 2.4e19
    // picodollars; a u64 saturated at $18,446,744.07 ($46.12 a query).
    let t = Temp::new("cost", "month");
    let scenario =
        std::fs::read_to_string(common::root("tests/data/repro/round3/cost-saturation.toml"))
            .expect("the reproducer");
    let text = summary_text(&t, "month", &scenario, &[]);
    let c = &serde_json::from_str::<Value>(&text).expect("summary.json")["cost"];
    assert_eq!(usd(c, "total_usd"), 24_000_000.0);
    assert_eq!(usd(c, "input_usd"), 24_000_000.0);
    assert_eq!(usd(c, "per_query_usd"), 60.0);
    assert_eq!(usd(c, "per_good_query_usd"), 60.0);
    assert_eq!(count(c, "input_tokens"), 320_000_000_000);
    assert_eq!(billed(&text, "input_picodollars"), "24000000000000000000");
    assert_eq!(billed(&text, "requests"), "1600000");
}

#[test]
fn one_answer_at_the_bounds_is_billed_exactly_in_both_clocks() {
    // 20 answers of 10²⁴ picodollars: 2e25 in all, $2e13, $1e12 a query; in real time each
    // bill comes over the x-capsize-bill header and the total from the mock's /stats.
    let t = Temp::new("cost", "bounds");
    for (name, extra) in [
        ("virtual", &[][..]),
        (
            "realtime",
            &["--mode", "realtime", "--time-scale", "10"][..],
        ),
    ] {
        let text = summary_text(&t, name, &at_the_bounds(""), extra);
        let c = &serde_json::from_str::<Value>(&text).expect("summary.json")["cost"];
        assert_eq!(usd(c, "total_usd"), 2e13, "{name}");
        assert_eq!(usd(c, "per_query_usd"), 1e12, "{name}");
        assert_eq!(usd(c, "per_good_query_usd"), 1e12, "{name}");
        assert_eq!(usd(c, "wasted_usd"), 0.0, "{name}: every answer was used");
        assert_eq!(count(c, "input_tokens"), 20_000_000_000_000, "{name}");
        assert_eq!(
            billed(&text, "input_picodollars"),
            "20000000000000000000000000",
            "{name}"
        );
    }
}

#[test]
fn shards_of_a_sweep_past_a_u64_of_picodollars_merge_into_its_exact_bill() {
    // Each run of the sweep bills 2e25 picodollars; sharded and merged, the sweep is the
    // unsharded one byte for byte, and its cost columns are the exact dollars.
    let t = Temp::new("cost", "shards");
    let file = t.write(
        "bounds.toml",
        &at_the_bounds("[sweep]\n\"scheduler.max_concurrency\" = [1, 4]\n"),
    );
    let sweep = |out: &str, extra: &[&str]| {
        let out = t.path(out);
        let mut args = vec![
            "sweep",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = capsize(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        out
    };
    let whole = sweep("whole", &[]);
    let shards = sweep("shards", &["--shard", "1/2"]);
    sweep("shards", &["--shard", "2/2"]);
    let merged = t.path("merged");
    let o = capsize(&[
        "merge",
        "--out",
        merged.to_str().unwrap(),
        shards.join("shard-1-of-2").to_str().unwrap(),
        shards.join("shard-2-of-2").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = std::fs::read_to_string(whole.join("sweep.csv")).unwrap();
    assert_eq!(
        std::fs::read_to_string(merged.join("sweep.csv")).unwrap(),
        csv
    );
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (total, per_good) = (col("cost_usd"), col("cost_per_good_query_usd"));
    for row in rows {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[total].parse::<f64>().unwrap(), 2e13, "{row}");
        assert_eq!(f[per_good].parse::<f64>().unwrap(), 1e12, "{row}");
    }
}
