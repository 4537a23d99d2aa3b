//! The CI gate: a run's summary.json held against the scenario's objectives (`[slo]`) and,
//! optionally, against a baseline run, metric by metric, knowing which way is worse.
//!
//! A baseline comparison allows each metric to get worse by a [`Tolerance`] of its baseline
//! value (`--tolerance`, or `[slo.tolerance]` per metric), or by its kind's absolute slack
//! (a few ms of latency, none for a count: see [`slack`]), whichever is more. Improvements
//! always pass. Which metrics are compared is a [`Selection`]: by default every one with a
//! way that is worse but the maxima.

pub mod direction;
pub mod select;
pub mod slack;

use std::path::Path;

use serde_json::Value;
use thiserror::Error;

use crate::engine::summary::metrics;
use crate::engine::summary::slo::{self, Threshold, Tolerance};
use crate::engine::summary::Summary;
pub use direction::{direction, Direction};
pub use select::Selection;

/// What a check holds the run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of the scenario's `[slo]` objectives.
    Objective,
    /// The same metric in the baseline run.
    Baseline,
}

impl Kind {
    /// `objective` or `baseline`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Objective => "objective",
            Kind::Baseline => "baseline",
        }
    }
}

/// One check and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// What it is held against.
    pub kind: Kind,
    /// The summary.json metric, as a dotted path.
    pub metric: String,
    /// The run's value (`None`: absent or null).
    pub value: Option<f64>,
    /// What the value had to be, for people: `< 2000`, `<= 1,750 (baseline 1,667 +5 %)`.
    pub expected: String,
    /// Whether it held.
    pub pass: bool,
    /// The verdict, for people: `pass`, `12.3 % worse than the baseline`, `no value`.
    pub verdict: String,
}

/// Bad input to the gate: one line naming what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GateError {
    /// An objective or tolerance names a metric summary.json does not have.
    #[error("{at}: {metric:?} is not a summary.json metric (e.g. latency_ms.query.p95, throughput.queries_per_s, provider.rate_limited)")]
    UnknownMetric {
        /// Where it is named.
        at: String,
        /// The name.
        metric: String,
    },
    /// A list of metrics to compare names something summary.json does not have.
    #[error("{at}: {metric:?} is not a summary.json metric or a prefix of metrics (e.g. latency_ms.query, latency_ms.query.p95, provider.rate_limited)")]
    UnknownPath {
        /// Where it is named.
        at: String,
        /// The name.
        metric: String,
    },
    /// A list of metrics to compare names only metrics a baseline comparison does not gate.
    #[error("{at}: {metric:?} is not compared with a baseline (no way of it is worse: the seed, the workload's size, calls that rise with useful work and waste alike)")]
    NotCompared {
        /// Where it is named.
        at: String,
        /// The name.
        metric: String,
    },
    /// The baseline file cannot be used.
    #[error("baseline {path}: {reason}")]
    Baseline {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Checks that every metric the scenario's `[slo]` names (objectives and tolerances) exists in
/// summary.json, whose per-provider fields are those of `providers` (empty for a scenario of
/// one `[provider]`).
pub fn validate(
    thresholds: &[Threshold],
    tolerances: &[(String, Tolerance)],
    providers: &[String],
) -> Result<(), GateError> {
    let mut known = Summary::metric_paths();
    known.extend(Summary::provider_paths(providers));
    let named = thresholds
        .iter()
        .map(|t| ("slo", &t.metric))
        .chain(tolerances.iter().map(|(m, _)| ("slo.tolerance", m)));
    for (table, metric) in named {
        if !known.iter().any(|k| k == metric) {
            return Err(GateError::UnknownMetric {
                at: format!("[{table}]"),
                metric: metric.clone(),
            });
        }
    }
    Ok(())
}

/// Reads a baseline (a summary.json) for a run of `scenario` in `mode`.
pub fn read_baseline(path: &Path, scenario: &str, mode: &str) -> Result<Value, GateError> {
    let bad = |reason: String| GateError::Baseline {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("not JSON ({e}); write one with `capsize baseline`")))?;
    let field = |k: &str| json.get(k).cloned().unwrap_or(Value::Null);
    let version = field(metrics::SCHEMA_VERSION.path());
    if version.as_u64() != Some(1) {
        return Err(bad(format!(
            "not a summary.json of schema_version 1 (schema_version is {version}); write one with `capsize baseline`"
        )));
    }
    if field("scenario").as_str() != Some(scenario) {
        return Err(bad(format!(
            "is a run of scenario {}, not {scenario:?}",
            field("scenario")
        )));
    }
    if field("mode").as_str() != Some(mode) {
        return Err(bad(format!(
            "is a {} run, this is a {mode:?} run: compare runs of one mode",
            field("mode")
        )));
    }
    baseline_metrics(&json).map_err(bad)?;
    Ok(json)
}

/// Checks every metric a baseline holds: a known summary.json metric, a number (or null for a
/// metric that is not gated, such as the utilization of a limit that is not set), and at least
/// one that is compared. Nothing is dropped silently: a baseline that compares nothing would
/// pass every run.
fn baseline_metrics(json: &Value) -> Result<(), String> {
    groups(json, "")?;
    let leaves = slo::leaves(json);
    let labels = Summary::label_paths();
    let mut gated = 0;
    for (path, value) in leaves {
        // Words such as the scenario's name, not metrics.
        if labels.contains(&path) {
            continue;
        }
        let Some(dir) = direction(&path) else {
            return Err(format!(
                "{path}: not a metric of summary.json; write the baseline with `capsize baseline`"
            ));
        };
        match (value, dir) {
            (Value::Number(_), Direction::NotGated) => {}
            (Value::Number(_), _) => gated += 1,
            (Value::Null, Direction::NotGated) => {}
            (other, _) => {
                return Err(format!("{path}: must be a number, got {other}"));
            }
        }
    }
    if gated == 0 {
        return Err(
            "holds no metrics to compare (nothing to check); write one with `capsize baseline`"
                .into(),
        );
    }
    Ok(())
}

/// Checks a baseline's shape: every group (an object) holds something, and a list stands only
/// where summary.json writes one (a provider's `phases`). An empty group or a list in place of
/// a group would otherwise drop its metrics from the gate without a word.
fn groups(json: &Value, path: &str) -> Result<(), String> {
    match json {
        Value::Object(map) if map.is_empty() && !path.is_empty() => Err(format!(
            "{path}: an empty group, not the metrics summary.json has there; write the baseline with `capsize baseline`"
        )),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| groups(v, &slo::child_path(path, k))),
        Value::Array(_) if is_list(path) => Ok(()),
        Value::Array(_) => Err(format!(
            "{path}: a list, not a metric group of numbers; write the baseline with `capsize baseline`"
        )),
        _ => Ok(()),
    }
}

/// Whether summary.json writes a list at dotted `path`: a provider's phases
/// (`provider.phases`, `providers.NAME.phases`), the bill by provider (`cost.providers`).
fn is_list(path: &str) -> bool {
    if path == "cost.providers" {
        return true;
    }
    let Some(owner) = path.strip_suffix(".phases") else {
        return false;
    };
    owner == "provider"
        || owner
            .strip_prefix("providers.")
            .is_some_and(|name| !name.is_empty() && !name.contains('.'))
}

/// Where a baseline was written by another capsize than this one, which: `written by capsize
/// 0.1.0, this is 0.2.0` (or, for a baseline that names none, `written by a capsize before
/// 0.1.0`). A figure may move with what changed between them (CHANGELOG.md).
pub fn other_version(baseline: &Value) -> Option<String> {
    let this = crate::engine::VERSION;
    match baseline.get("capsize_version").and_then(Value::as_str) {
        Some(v) if v == this => None,
        Some(v) => Some(format!("written by capsize {v}, this is {this}")),
        None => Some("written by a capsize before 0.1.0, which named no version".into()),
    }
}

/// The run against each objective.
pub fn objectives(thresholds: &[Threshold], run: &Value) -> Vec<Check> {
    thresholds
        .iter()
        .map(|t| {
            let value = t.value(run);
            let pass = t.met(run);
            let verdict = match (value, pass) {
                (None, _) => "no value".to_string(),
                (Some(_), true) => "pass".to_string(),
                (Some(_), false) => "FAIL".to_string(),
            };
            Check {
                kind: Kind::Objective,
                metric: t.metric.clone(),
                value,
                expected: t.condition(),
                pass,
                verdict,
            }
        })
        .collect()
}

/// How many metrics of `baseline` a comparison with `selection` gates (0: it compares nothing).
pub fn compared(baseline: &Value, selection: &Selection) -> usize {
    slo::metric_paths(baseline)
        .iter()
        .filter(|m| selection.gates(m) && slo::number(baseline, m).is_some())
        .count()
}

/// The tolerances a baseline comparison applies: `default` to every metric but those
/// `[slo.tolerance]` names.
#[derive(Debug, Clone, Copy)]
pub struct Tolerances<'a> {
    /// The flag's (`--tolerance`).
    pub default: Tolerance,
    /// Per metric.
    pub per_metric: &'a [(String, Tolerance)],
}

impl Tolerances<'_> {
    /// The tolerance of `metric`.
    pub fn of(&self, metric: &str) -> Tolerance {
        self.per_metric
            .iter()
            .find(|(m, _)| m == metric)
            .map_or(self.default, |(_, t)| *t)
    }
}

/// What ends the runs compared: how their counts are held against each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A number of queries: both runs do the same work, so counts compare as they are.
    Queries,
    /// A duration: a better client does more work in the same time, so a count that grows
    /// with work ([`direction::is_count`]) is compared per query started.
    Duration,
}

/// The run against the baseline, for every metric `selection` gates that the baseline holds a
/// number for (in the baseline's order), each allowed to get worse by its tolerance of its
/// baseline value or by its absolute slack ([`slack`]), whichever is more. A metric the
/// baseline has and the run lacks fails. With [`Bound::Duration`], counts are compared per
/// query started.
pub fn against_baseline(
    baseline: &Value,
    run: &Value,
    tolerances: Tolerances<'_>,
    selection: &Selection,
    bound: Bound,
) -> Vec<Check> {
    let f = crate::fmt::fmt_num;
    let started = |v: &Value| metrics::QUERIES_STARTED.read(v).filter(|q| *q > 0.0);
    let per_query = match (bound, started(baseline), started(run)) {
        (Bound::Duration, Some(b), Some(r)) => Some((b, r)),
        _ => None,
    };
    let mut checks = Vec::new();
    for metric in slo::metric_paths(baseline) {
        if !selection.gates(&metric) {
            continue;
        }
        let (Some(dir), Some(mut base)) = (direction(&metric), slo::number(baseline, &metric))
        else {
            continue;
        };
        let mut value = slo::number(run, &metric);
        let unit = slack::unit(&metric);
        let mut unit_slack = unit.slack();
        let mut each = "";
        if let (Some((b, r)), true) = (per_query, direction::is_count(&metric)) {
            base /= b;
            value = value.map(|v| v / r);
            unit_slack /= b;
            each = " per query";
        }
        let tolerance = tolerances.of(&metric);
        let relative = base.abs() * tolerance.fraction();
        let slack = relative.max(unit_slack);
        let (limit, op) = match dir {
            Direction::HigherIsWorse => (base + slack, "<="),
            _ => (base - slack, ">="),
        };
        let pass = value.is_some_and(|v| match dir {
            Direction::HigherIsWorse => v <= limit,
            _ => v >= limit,
        });
        let verdict = match value {
            None => "no value in this run".to_string(),
            Some(_) if pass => "pass".to_string(),
            Some(v) if base == 0.0 => format!("FAIL: {} where the baseline had 0", f(v)),
            Some(v) => format!("FAIL: {:.1} % worse", ((v - base) / base).abs() * 100.0),
        };
        let allowance = if unit_slack > relative {
            format!("{}{} slack", f(unit_slack), unit.suffix())
        } else {
            tolerance.to_string()
        };
        checks.push(Check {
            kind: Kind::Baseline,
            expected: format!(
                "{op} {}{each} (baseline {}{each}, {allowance})",
                f(limit),
                f(base)
            ),
            metric,
            value,
            pass,
            verdict,
        });
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pct(p: f64) -> Tolerance {
        Tolerance::from_fraction(p / 100.0).unwrap()
    }

    fn flat(p: f64) -> Tolerances<'static> {
        Tolerances {
            default: pct(p),
            per_metric: &[],
        }
    }

    fn by<'a>(checks: &'a [Check], m: &str) -> &'a Check {
        checks.iter().find(|c| c.metric == m).expect(m)
    }

    #[test]
    fn a_baseline_comparison_knows_which_way_is_worse() {
        let base = json!({"latency_ms": {"query": {"p95": 1000.0, "count": 100}},
                          "throughput": {"queries_per_s": 2.0}, "provider": {"rate_limited": 0},
                          "seed": 1, "rpm_utilization": null});
        let run = json!({"latency_ms": {"query": {"p95": 1060.0, "count": 100}},
                         "throughput": {"queries_per_s": 1.8}, "provider": {"rate_limited": 1},
                         "seed": 2, "rpm_utilization": 0.5});
        let all = Selection::Default;
        let checks = against_baseline(&base, &run, flat(5.0), &all, Bound::Queries);
        // 6 % slower than 1000 at 5 %: fails; 10 % less throughput: fails; 0 → 1: fails.
        assert!(!by(&checks, "latency_ms.query.p95").pass);
        assert_eq!(
            by(&checks, "latency_ms.query.p95").verdict,
            "FAIL: 6.0 % worse"
        );
        assert_eq!(
            by(&checks, "latency_ms.query.p95").expected,
            "<= 1,050 (baseline 1,000, 5 %)"
        );
        assert!(!by(&checks, "throughput.queries_per_s").pass);
        assert!(!by(&checks, "provider.rate_limited").pass);
        assert!(by(&checks, "latency_ms.query.count").pass);
        // Not gated, or null in the baseline: not compared.
        assert!(checks
            .iter()
            .all(|c| c.metric != "seed" && c.metric != "rpm_utilization"));
        // A per-metric tolerance of 10 % lets the 6 % pass; improvements always pass.
        let tol = [("latency_ms.query.p95".to_string(), pct(10.0))];
        let per_metric = Tolerances {
            default: pct(5.0),
            per_metric: &tol,
        };
        let checks = against_baseline(&base, &run, per_metric, &all, Bound::Queries);
        assert!(by(&checks, "latency_ms.query.p95").pass);
        let better = json!({"latency_ms": {"query": {"p95": 500.0, "count": 200}},
                            "throughput": {"queries_per_s": 4.0}, "provider": {"rate_limited": 0}});
        assert!(
            against_baseline(&base, &better, flat(0.0), &all, Bound::Queries)
                .iter()
                .all(|c| c.pass)
        );
        // A metric the run lacks fails.
        let missing = json!({"throughput": {"queries_per_s": 2.0}});
        assert!(
            against_baseline(&base, &missing, flat(5.0), &all, Bound::Queries)
                .iter()
                .any(|c| !c.pass && c.verdict == "no value in this run")
        );
    }

    #[test]
    fn a_zero_baseline_gets_its_kinds_absolute_slack() {
        let base = json!({"latency_ms": {"call_queue": {"p95": 0.0}},
                          "provider": {"rate_limited": 0}, "virtual_seconds": 0.0});
        let run = |ms: f64, n: u64| {
            json!({"latency_ms": {"call_queue": {"p95": ms}},
                   "provider": {"rate_limited": n}, "virtual_seconds": 0.004})
        };
        let all = Selection::Default;
        // 3 ms of queue where there was none: within 5 ms; 0.004 s within 0.005 s.
        let checks = against_baseline(&base, &run(3.0, 0), flat(5.0), &all, Bound::Queries);
        assert!(checks.iter().all(|c| c.pass), "{checks:?}");
        let q = by(&checks, "latency_ms.call_queue.p95");
        assert_eq!(q.expected, "<= 5 (baseline 0, 5 ms slack)");
        // 6 ms is beyond the slack; a count has none: one 429 fails.
        let checks = against_baseline(&base, &run(6.0, 1), flat(5.0), &all, Bound::Queries);
        let q = by(&checks, "latency_ms.call_queue.p95");
        assert!(!q.pass);
        assert_eq!(q.verdict, "FAIL: 6 where the baseline had 0");
        assert!(!by(&checks, "provider.rate_limited").pass);
        // The slack is a floor: 5 % of 40 ms is 2 ms, but 44 ms is within 5 ms of 40.
        let base = json!({"latency_ms": {"call_queue": {"p95": 40.0}}});
        let run = json!({"latency_ms": {"call_queue": {"p95": 44.0}}});
        assert!(against_baseline(&base, &run, flat(5.0), &all, Bound::Queries)[0].pass);
    }

    #[test]
    fn a_duration_bound_run_holds_counts_per_query() {
        // Faster tools in the same 600 s: 20 % more queries, 15 % more requests and tokens,
        // fewer retries per query. As counts the requests "got worse"; per query they did not.
        let base = json!({"queries_started": 100, "provider": {"received": 1000, "retries": 10},
                          "throughput": {"queries_per_s": 0.166}});
        let faster = json!({"queries_started": 120, "provider": {"received": 1150, "retries": 11},
                            "throughput": {"queries_per_s": 0.2}});
        let all = Selection::Default;
        let counts = against_baseline(&base, &faster, flat(5.0), &all, Bound::Queries);
        assert!(!by(&counts, "provider.received").pass);
        let per_query = against_baseline(&base, &faster, flat(5.0), &all, Bound::Duration);
        assert!(per_query.iter().all(|c| c.pass), "{per_query:?}");
        let received = by(&per_query, "provider.received");
        assert_eq!(
            received.expected,
            "<= 10.5 per query (baseline 10 per query, 5 %)"
        );
        assert_eq!(received.value, Some(1150.0 / 120.0));
        // Slower tools: fewer queries and more requests each fail per query too.
        let slower = json!({"queries_started": 80, "provider": {"received": 900, "retries": 10},
                            "throughput": {"queries_per_s": 0.133}});
        let checks = against_baseline(&base, &slower, flat(5.0), &all, Bound::Duration);
        assert!(!by(&checks, "provider.received").pass);
        assert!(!by(&checks, "throughput.queries_per_s").pass);
        assert!(!by(&checks, "queries_started").pass);
    }

    #[test]
    fn maxima_are_compared_only_when_asked() {
        let base = json!({"latency_ms": {"query": {"p95": 1000.0, "max": 1000.0}},
                          "provider": {"rate_limited": 0}});
        let run = json!({"latency_ms": {"query": {"p95": 1000.0, "max": 3000.0}},
                         "provider": {"rate_limited": 5}});
        let checks = against_baseline(&base, &run, flat(5.0), &Selection::Default, Bound::Queries);
        assert!(checks.iter().all(|c| c.metric != "latency_ms.query.max"));
        assert_eq!(compared(&base, &Selection::Default), 2);
        let max = Selection::Only(vec!["latency_ms.query.max".into()]);
        let checks = against_baseline(&base, &run, flat(5.0), &max, Bound::Queries);
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].pass, "{checks:?}");
        // A list compares only what it names: the 429s are not looked at.
        let query = Selection::Only(vec!["latency_ms.query".into()]);
        let checks = against_baseline(&base, &run, flat(5.0), &query, Bound::Queries);
        let names: Vec<&str> = checks.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(names, ["latency_ms.query.p95"]);
        assert_eq!(compared(&base, &Selection::Only(vec!["errors".into()])), 0);
    }

    #[test]
    fn a_baseline_must_hold_metrics_and_every_one_a_number() {
        let empty = json!({"schema_version": 1, "scenario": "s", "mode": "virtual"});
        let e = baseline_metrics(&empty).unwrap_err();
        assert!(e.contains("nothing to check"), "{e}");
        let text = json!({"schema_version": 1, "scenario": "s", "mode": "virtual",
                          "attempts": "40"});
        assert_eq!(
            baseline_metrics(&text).unwrap_err(),
            "attempts: must be a number, got \"40\""
        );
        let null = json!({"schema_version": 1, "attempts": null});
        assert_eq!(
            baseline_metrics(&null).unwrap_err(),
            "attempts: must be a number, got null"
        );
        let unknown = json!({"schema_version": 1, "attempts": 3, "throughput": {"qps": 1}});
        assert!(baseline_metrics(&unknown)
            .unwrap_err()
            .starts_with("throughput.qps: not a metric"));
        let ok = json!({"schema_version": 1, "attempts": 3, "rpm_utilization": null});
        assert_eq!(baseline_metrics(&ok), Ok(()));
    }

    #[test]
    fn a_baseline_group_empty_or_a_list_is_refused_by_its_path() {
        let with = |group: Value| json!({"schema_version": 1, "attempts": 3, "latency_ms": {"query": group}});
        assert_eq!(
            baseline_metrics(&with(json!({}))).unwrap_err(),
            "latency_ms.query: an empty group, not the metrics summary.json has there; write the baseline with `capsize baseline`"
        );
        assert_eq!(
            baseline_metrics(&with(json!([1, 2]))).unwrap_err(),
            "latency_ms.query: a list, not a metric group of numbers; write the baseline with `capsize baseline`"
        );
        let top = json!({"schema_version": 1, "attempts": 3, "latency_ms": {}});
        assert!(baseline_metrics(&top)
            .unwrap_err()
            .starts_with("latency_ms: an empty group"));
        let generation = json!({"schema_version": 1, "attempts": 3, "generation": []});
        assert!(baseline_metrics(&generation)
            .unwrap_err()
            .starts_with("generation: a list"));
        // Where summary.json writes lists, a baseline may hold them.
        let phases = json!({"schema_version": 1, "attempts": 3,
                            "provider": {"received": 1, "phases": [{"received": 1}]},
                            "providers": {"llm": {"received": 1, "phases": []}}});
        assert_eq!(baseline_metrics(&phases), Ok(()));
    }

    #[test]
    fn objectives_name_only_metrics_summary_json_has() {
        let ok = Threshold::parse("latency_ms.query.p95", "< 2000").unwrap();
        assert_eq!(validate(std::slice::from_ref(&ok), &[], &[]), Ok(()));
        let typo = Threshold::parse("latency_ms.querry.p95", "< 2000").unwrap();
        assert!(matches!(
            validate(&[typo], &[], &[]),
            Err(GateError::UnknownMetric { .. })
        ));
        let tol = [(
            "throughput.qps".to_string(),
            Tolerance::from_fraction(0.05).unwrap(),
        )];
        assert!(matches!(
            validate(&[ok], &tol, &[]),
            Err(GateError::UnknownMetric { .. })
        ));
    }
}
