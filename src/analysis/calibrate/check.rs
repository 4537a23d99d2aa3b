//! Checking a fit: the calibrated scenario (which carries the observed conditions: the same
//! sessions or arrival rate, for as long, under the client settings given) is run in virtual
//! time, under as many seeds as it takes to pool [`POOLED_QUERIES`] queries, and what it
//! predicts is set beside what was observed, each with its ratio.

use crate::engine::scenario::Scenario;
use crate::engine::sim::{self, RunExtras, SimError};
use crate::engine::summary::{Percentiles, Summary};

use super::model::Calibration;

/// The target on query p50 and p95: predicted within 10 % of observed.
pub const TARGET: f64 = 0.10;

/// One figure observed and predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What it is.
    pub what: String,
    /// Its unit.
    pub unit: &'static str,
    /// Observed.
    pub observed: f64,
    /// Predicted by the calibrated scenario.
    pub predicted: f64,
    /// The largest relative error it is held to, where it has a target.
    pub target: Option<f64>,
}

impl Row {
    /// predicted / observed (`None` when nothing was observed).
    pub fn ratio(&self) -> Option<f64> {
        (self.observed != 0.0).then(|| self.predicted / self.observed)
    }

    /// Whether it meets its target (`None`: it has none, or no ratio).
    pub fn met(&self) -> Option<bool> {
        let t = self.target?;
        Some((self.ratio()? - 1.0).abs() <= t)
    }

    /// The verdict as both outputs word it, "within 10 %" or "NOT within 10 %" (`None`: no target).
    pub fn verdict(&self) -> Option<String> {
        let t = self.target?;
        let not = if self.met() == Some(true) { "" } else { "NOT " };
        Some(format!("{not}within {:.0} %", 100.0 * t))
    }
}

/// The check's result.
#[derive(Debug, Clone, PartialEq)]
pub struct FitCheck {
    /// The figures.
    pub rows: Vec<Row>,
    /// How many seeds were run and pooled.
    pub runs: u32,
}

/// How many query latencies the prediction pools, at least: runs of the same conditions under
/// further seeds are added until it has them (at most [`MAX_RUNS`]), so the predicted side's
/// quantiles carry little sampling error of their own.
pub const POOLED_QUERIES: u64 = 2_000;
/// The most runs pooled.
pub const MAX_RUNS: u32 = 20;

/// What the runs predict, pooled.
pub(super) struct Pooled {
    pub(super) query: hdrhistogram::Histogram<u64>,
    /// Model turns' times, µs.
    pub(super) turns: hdrhistogram::Histogram<u64>,
    /// Successful calls' times (tool calls, or a single-call query's model call), µs.
    pub(super) calls: hdrhistogram::Histogram<u64>,
    queries_started: u64,
    queries_per_s: f64,
    counters: capsize_mock::Counters,
    /// Runs pooled.
    pub(super) runs: u32,
}

/// Runs `scenario` (its seed, then the next ones, until [`POOLED_QUERIES`] queries or
/// [`MAX_RUNS`] runs) and pools what the runs predict; `provider` names the provider whose
/// counters are kept (`None`: the run's).
pub(super) fn pooled(scenario: &Scenario, provider: Option<&str>) -> Result<Pooled, SimError> {
    let mut pooled: Option<Pooled> = None;
    while pooled
        .as_ref()
        .is_none_or(|p| p.runs < MAX_RUNS && p.query.len() < POOLED_QUERIES)
    {
        let runs = pooled.as_ref().map_or(0, |p| p.runs);
        let mut s = scenario.clone();
        s.seed = scenario.seed.wrapping_add(u64::from(runs));
        let extras = RunExtras {
            model_turns: true,
            ..RunExtras::default()
        };
        let outcome = sim::run_with(&s, extras)?;
        let turns = outcome.recording.model_turns.clone().unwrap_or_else(|| {
            hdrhistogram::Histogram::new_with_bounds(1, 1u64 << 50, 3)
                .expect("static histogram bounds are valid")
        });
        let summary = Summary::new(&s, &outcome);
        let counters = provider
            .and_then(|name| summary.providers.get(name))
            .map_or(summary.provider.counters, |n| n.counts.counters);
        match &mut pooled {
            None => {
                pooled = Some(Pooled {
                    query: outcome.recording.query.clone(),
                    turns,
                    calls: outcome.recording.call.clone(),
                    queries_started: summary.queries_started,
                    queries_per_s: summary.throughput.queries_per_s,
                    counters,
                    runs: 1,
                })
            }
            Some(p) => {
                // Both histograms have the recorder's bounds: adding cannot fail.
                let _ = p.query.add(&outcome.recording.query);
                let _ = p.turns.add(&turns);
                let _ = p.calls.add(&outcome.recording.call);
                p.queries_started += summary.queries_started;
                p.queries_per_s += summary.throughput.queries_per_s;
                p.counters = p.counters.plus(counters);
                p.runs += 1;
            }
        }
    }
    Ok(pooled.expect("one run at least"))
}

/// Runs `scenario` as [`pooled`] does and sets what the runs predict beside `cal`'s
/// observations.
pub fn check(scenario: &Scenario, cal: &Calibration) -> Result<FitCheck, SimError> {
    let provider = cal.provider.as_ref().map(|p| p.name.as_str());
    let p = pooled(scenario, provider)?;
    let runs = p.runs;
    let q = Percentiles::of(&p.query);
    let mut rows = Vec::new();
    if let Some(o) = &cal.query_latency {
        for (name, o, v, target) in [
            ("query p50", o.p50, q.p50, Some(TARGET)),
            ("query p95", o.p95, q.p95, Some(TARGET)),
            ("query p99", o.p99, q.p99, None),
        ] {
            rows.push(Row {
                what: name.into(),
                unit: "ms",
                observed: o,
                predicted: v,
                target,
            });
        }
    }
    if let (Some(o), Some(prov)) = (&cal.model_calls, &cal.provider) {
        let t = Percentiles::of(&p.turns);
        if t.count > 0 {
            for (name, o, v) in [("p50", o.p50, t.p50), ("p95", o.p95, t.p95)] {
                rows.push(Row {
                    what: format!("{} call {name}", prov.name),
                    unit: "ms",
                    observed: o,
                    predicted: v,
                    target: None,
                });
            }
        }
    }
    if cal.window_s > 0.0 && cal.queries > 1 {
        rows.push(Row {
            what: "throughput".into(),
            unit: "queries/s",
            observed: (cal.queries - 1) as f64 / cal.window_s,
            predicted: p.queries_per_s / f64::from(runs),
            target: None,
        });
    }
    if let Some(prov) = &cal.provider {
        let per_query = |n: u64| n as f64 / cal.queries.max(1) as f64;
        let predicted = |n: u64| n as f64 / p.queries_started.max(1) as f64;
        let c = p.counters;
        for (what, observed, predicted) in [
            (
                "requests per query",
                per_query(prov.calls),
                predicted(c.received),
            ),
            (
                "429s per query",
                per_query(
                    prov.rate_limited
                        .max(if cal.http.0 > 0 { cal.http.1 } else { 0 }),
                ),
                predicted(c.rate_limited),
            ),
            (
                "failures per query",
                per_query(prov.errors + prov.timeouts),
                predicted(c.errored + c.timed_out),
            ),
        ] {
            rows.push(Row {
                what: format!("{} {what}", prov.name),
                unit: "",
                observed,
                predicted,
                target: None,
            });
        }
    }
    Ok(FitCheck { rows, runs })
}
