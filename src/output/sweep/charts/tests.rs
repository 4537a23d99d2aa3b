//! The sweep's charts from points made up here: the objective on the latency chart, "no 429s",
//! small multiples for a third key, and the recommended point's phased RPM limit as steps.

use super::*;
use crate::analysis::sweep::Point;
use crate::engine::scenario::{self, AxisValue};
use crate::output::report::charts::{svg, texts as svg_texts};

/// A point of a research-agent sweep at `values`, with `p95` ms and `limited` 429s of 1000.
fn point(values: &[(&str, AxisValue)], p95: f64, limited: f64) -> PointResult {
    let sets: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let s = scenario::load(std::path::Path::new("scenarios/research-agent.toml"), &sets).unwrap();
    let mean = serde_json::json!({
        "latency_ms": { "query": { "p50": p95 / 2.0, "p95": p95, "p99": p95 * 1.5 } },
        "throughput": { "calls_per_s": 5.0, "queries_per_s": 0.6 },
        "provider": { "rate_limited": limited, "received": 1000.0 },
    });
    PointResult {
        point: Point {
            values: values
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        },
        scenario: s,
        seeds: vec![1],
        runs: vec![mean.clone()],
        mean,
    }
}

/// A two-key sweep (max_concurrency x headroom), 429s at one point if `limited`.
fn two_key_sweep(limited: bool) -> Vec<PointResult> {
    let mut points = Vec::new();
    for mc in [1, 2, 4] {
        for h in [0.5, 1.0] {
            let values = [
                ("scheduler.max_concurrency", AxisValue::Int(mc)),
                ("scheduler.headroom", AxisValue::Float(h)),
            ];
            let rl = if limited && mc == 4 && h == 1.0 {
                12.0
            } else {
                0.0
            };
            points.push(point(&values, 1000.0 * mc as f64, rl));
        }
    }
    points
}

fn chart_of<'a>(charts: &'a [(&'static str, Chart)], stem: &str) -> &'a Chart {
    &charts.iter().find(|(s, _)| *s == stem).unwrap().1
}

#[test]
fn the_latency_chart_draws_the_objective_on_its_line() {
    let points = two_key_sweep(false);
    let slo = [Threshold::parse("latency_ms.query.p95", "< 2000").unwrap()];
    let charts = sweep_charts(&points, Some(600.0), &slo);
    let drawn = svg(chart_of(&charts, "latency")).unwrap();
    let texts = svg_texts(&drawn);
    // 4000 ms at most: still ms (under 10 s).
    assert!(texts.iter().any(|t| t == "query latency (ms)"), "{texts:?}");
    // In the legend and on the line.
    let labelled = texts.iter().filter(|t| *t == "objective p95 < 2 s").count();
    assert_eq!(labelled, 2, "{texts:?}");
    // No objective on a metric the chart does not draw, none without an [slo].
    let other = [Threshold::parse("latency_ms.call.p95", "< 900").unwrap()];
    for slo in [&other[..], &[]] {
        let charts = sweep_charts(&points, Some(600.0), slo);
        let texts = svg_texts(&svg(chart_of(&charts, "latency")).unwrap());
        assert!(
            !texts.iter().any(|t| t.starts_with("objective")),
            "{texts:?}"
        );
    }
}

#[test]
fn a_429_chart_with_none_says_so() {
    let charts = sweep_charts(&two_key_sweep(false), Some(600.0), &[]);
    let chart = chart_of(&charts, "rate_limited");
    let texts = svg_texts(&svg(chart).unwrap());
    assert!(texts.iter().any(|t| t == "no 429s"), "{texts:?}");
    // The axes are kept.
    assert!(
        texts.iter().any(|t| t == "429s / requests received"),
        "{texts:?}"
    );
    assert!(chart.series.is_empty());

    let charts = sweep_charts(&two_key_sweep(true), Some(600.0), &[]);
    let chart = chart_of(&charts, "rate_limited");
    let texts = svg_texts(&svg(chart).unwrap());
    assert!(!texts.iter().any(|t| t == "no 429s"), "{texts:?}");
    assert_eq!(chart.series.len(), 3, "one line per max_concurrency");
}

#[test]
fn a_third_swept_key_makes_one_panel_per_value() {
    let mut points = Vec::new();
    for burst in [1, 2, 4] {
        for mc in [1, 2, 4, 8] {
            for h in [0.5, 1.0] {
                let values = [
                    ("scheduler.max_concurrency", AxisValue::Int(mc)),
                    ("scheduler.headroom", AxisValue::Float(h)),
                    ("scheduler.burst_s", AxisValue::Int(burst)),
                ];
                points.push(point(&values, 100.0 * (mc * burst) as f64, 0.0));
            }
        }
    }
    let charts = sweep_charts(&points, Some(600.0), &[]);
    for stem in ["latency", "throughput"] {
        let chart = chart_of(&charts, stem);
        assert_eq!(chart.panels.len(), 3, "{stem}");
        for panel in &chart.panels {
            // One line per headroom, each through the four concurrencies once: no sawtooth.
            assert_eq!(panel.series.len(), 2, "{stem} {}", panel.title);
            for s in &panel.series {
                let xs: Vec<f64> = s.points.iter().map(|p| p.0).collect();
                assert_eq!(
                    xs,
                    [1.0, 2.0, 4.0, 8.0],
                    "{stem} {} {}",
                    panel.title,
                    s.label
                );
            }
        }
        let texts = svg_texts(&svg(chart).unwrap());
        for title in ["burst_s=1", "burst_s=2", "burst_s=4"] {
            let n = texts.iter().filter(|t| *t == title).count();
            assert_eq!(n, 1, "{stem}: panel {title} in {texts:?}");
        }
        // One legend for all panels: each line's label once.
        let n = texts.iter().filter(|t| t.ends_with("headroom=0.5")).count();
        assert_eq!(n, 1, "{texts:?}");
    }
    // Deterministic.
    let again = sweep_charts(&points, Some(600.0), &[]);
    assert_eq!(charts, again);
}

#[test]
fn a_limit_cut_by_a_phase_is_drawn_as_a_step_line() {
    let toml = r#"
name = "phased"
seed = 3

[provider]
rpm = 600
latency = { dist = "uniform", min_ms = 100, max_ms = 200 }

[[provider.phases]]
from_s = 20
to_s = 40
rpm = 300

[workload]
mode = "open"
arrival = "poisson"
arrival_rate = 2.0
duration_s = 60
calls_per_query = 2
tokens_per_call = 0

[scheduler]
max_concurrency = 8
headroom = 0.9
rate_limit = true
"#;
    let s = scenario::parse(toml, std::path::Path::new("phased.toml"), &[]).unwrap();
    let outcome = crate::engine::sim::run(&s).unwrap();
    let slo = [Threshold::parse("latency_ms.query.p95", "< 500").unwrap()];
    let charts = point_charts(&outcome.recording, &s, &slo);
    let rpm = chart_of(&charts, "rpm_over_time");
    let limit = &rpm.references[0];
    assert_eq!(limit.label, "RPM limit in force");
    assert_eq!(limit.steps, [(0.0, 600.0), (20.0, 300.0), (40.0, 600.0)]);
    let scaled = &rpm.references[1];
    assert_eq!(scaled.steps, [(0.0, 540.0), (20.0, 270.0), (40.0, 540.0)]);
    let drawn = svg(rpm).unwrap();
    let texts = svg_texts(&drawn);
    assert!(texts.iter().any(|t| t == "RPM limit in force"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "time (s)"), "{texts:?}");
    // The distribution carries the objective.
    let dist = chart_of(&charts, "latency_distribution");
    let texts = svg_texts(&svg(dist).unwrap());
    assert!(
        texts.iter().any(|t| t == "objective p95 < 500 ms"),
        "{texts:?}"
    );

    // Without phases changing the rpm: the constant ceiling.
    let flat = toml.replace(
        "rpm = 300",
        "latency = { dist = \"uniform\", min_ms = 300, max_ms = 400 }",
    );
    let s = scenario::parse(&flat, std::path::Path::new("flat.toml"), &[]).unwrap();
    let outcome = crate::engine::sim::run(&s).unwrap();
    let charts = point_charts(&outcome.recording, &s, &[]);
    let rpm = chart_of(&charts, "rpm_over_time");
    assert!(rpm.references.iter().all(|r| r.steps.is_empty()));
    assert_eq!(rpm.references[0].label, "ceiling 600 RPM");
}

/// Two providers, one with split token limits: each is charted apart, against its own limits.
const TWO_PROVIDERS: &str = r#"
name = "two"
seed = 5

[providers.llm]
rpm = 60
itpm = 30_000
otpm = 8_000
latency = { dist = "constant", ms = 1000 }

[providers.search]
rpm = 600
latency = { dist = "constant", ms = 200 }

[workload]
mode = "closed"
sessions = 2
queries = 20
rounds = 2
calls_per_query = 3
tokens_per_call = 0
provider = "search"
model_turn = { tokens = 1500, max_tokens = 500, provider = "llm", at = "around" }

[scheduler]
max_concurrency = 4
rate_limit = true
headroom = 0.8
"#;

#[test]
fn each_provider_is_charted_against_its_own_limits() {
    let s = scenario::parse(TWO_PROVIDERS, std::path::Path::new("two.toml"), &[]).unwrap();
    let outcome = crate::engine::sim::run(&s).unwrap();
    let rec = &outcome.recording;
    // 20 queries: 2 rounds x 3 tool calls to search, 3 model turns to llm.
    let charged = |i: usize| -> u64 { rec.endpoint_series[i].bins.iter().map(|b| b.charged).sum() };
    assert_eq!((charged(0), charged(1)), (60, 120));
    let output: u64 = rec.endpoint_series[0].bins.iter().map(|b| b.output).sum();
    let tokens: u64 = rec.endpoint_series[0].bins.iter().map(|b| b.tokens).sum();
    // A turn charges its prompt and its max_tokens: 1,500 + 500.
    assert_eq!((tokens, output), (60 * 2000, 60 * 500));
    assert_eq!(
        rec.endpoint_series[1]
            .bins
            .iter()
            .map(|b| b.tokens)
            .sum::<u64>(),
        0
    );

    let charts = point_charts(rec, &s, &[]);
    let rpm = chart_of(&charts, "rpm_over_time");
    let labels: Vec<&str> = rpm.series.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "llm: requests (60 s window)",
            "search: requests (60 s window)"
        ]
    );
    let refs: Vec<(&str, f64)> = rpm
        .references
        .iter()
        .map(|r| (r.label.as_str(), r.y))
        .collect();
    assert_eq!(
        refs,
        [
            ("llm RPM 60", 60.0),
            ("llm RPM x headroom 0.8", 48.0),
            ("search RPM 600", 600.0),
            ("search RPM x headroom 0.8", 480.0)
        ]
    );
    // The llm's input and output apart, against ITPM and OTPM (no headroom: the client's
    // buckets do not hold them); search charges no tokens and has no token limit.
    let tokens = chart_of(&charts, "tokens_over_time");
    let labels: Vec<&str> = tokens.series.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "llm: input tokens (60 s window)",
            "llm: output charged at admission, max_tokens (60 s window)"
        ]
    );
    let refs: Vec<&str> = tokens.references.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(refs, ["llm ITPM 30,000", "llm OTPM 8,000"]);
    // Input is 1,500 tokens a turn, output 500: at every instant input is three times output.
    let (input, out) = (&tokens.series[0].points, &tokens.series[1].points);
    assert!(input.iter().zip(out).all(|(i, o)| i.1 == 3.0 * o.1));
    // Where a call's time went: the constant latencies are the time at the provider (to the
    // histogram's 3 significant digits).
    let time = chart_of(&charts, "call_time");
    assert_eq!(time.series[1].label, "at the provider (sent, answering)");
    let at_provider = &time.series[1].points;
    let near = |ms: f64, want: f64| (ms - want).abs() <= want * 1e-3;
    assert!(!at_provider.is_empty());
    assert!(at_provider
        .iter()
        .all(|&(_, ms)| near(ms, 200.0) || near(ms, 1000.0)));
}

#[test]
fn throughput_of_several_providers_is_drawn_in_queries_against_the_binding_limit() {
    let mut points = Vec::new();
    for sessions in [1, 2] {
        let sets = [format!("workload.sessions={sessions}")];
        let s = scenario::parse(TWO_PROVIDERS, std::path::Path::new("two.toml"), &sets).unwrap();
        let mean =
            serde_json::json!({ "throughput": { "calls_per_s": 5.0, "queries_per_s": 0.1 } });
        points.push(PointResult {
            point: Point {
                values: vec![("workload.sessions".into(), AxisValue::Int(sessions))],
            },
            scenario: s,
            seeds: vec![1],
            runs: vec![mean.clone()],
            mean,
        });
    }
    let charts = sweep_charts(&points, Some(60.0), &[]);
    let t = chart_of(&charts, "throughput");
    assert_eq!(t.y_label, "queries per second");
    assert_eq!(t.series[0].label, "queries/s");
    // The llm's OTPM binds: 8,000 / (3 turns x 500 max_tokens) = 5.33 queries/min, before its
    // ITPM (30,000 / 4,500 = 6.67) and its RPM (60 / 3 = 20, 16 at headroom 0.8); a split
    // limit is not held at headroom, so no second line.
    let refs: Vec<(&str, f64)> = t
        .references
        .iter()
        .map(|r| (r.label.as_str(), r.y))
        .collect();
    assert_eq!(
        refs,
        [(
            "ceiling: llm OTPM 8,000, 0.0889 queries/s",
            8_000.0 / 1_500.0 / 60.0
        )]
    );
}
