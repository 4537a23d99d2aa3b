//! Checking a fit: the calibrated scenario (which carries the observed conditions: the same
//! sessions or arrival rate, for as long, under the client settings given) is run in virtual
//! time, and what it predicts is set beside what was observed, each with its ratio.

use crate::engine::scenario::Scenario;
use crate::engine::sim::{self, SimError};
use crate::engine::summary::Summary;

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
}

/// The check's result.
#[derive(Debug, Clone, PartialEq)]
pub struct FitCheck {
    /// The figures.
    pub rows: Vec<Row>,
    /// The predicting run's record.
    pub summary: Summary,
}

/// Runs `scenario` and sets its figures beside `cal`'s observations.
pub fn check(scenario: &Scenario, cal: &Calibration) -> Result<FitCheck, SimError> {
    let outcome = sim::run(scenario)?;
    let summary = Summary::new(scenario, &outcome);
    let mut rows = Vec::new();
    if let Some(q) = &cal.query_latency {
        let p = &summary.latency_ms.query;
        for (name, o, v, target) in [
            ("query p50", q.p50, p.p50, Some(TARGET)),
            ("query p95", q.p95, p.p95, Some(TARGET)),
            ("query p99", q.p99, p.p99, None),
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
    if cal.window_s > 0.0 && cal.queries > 1 {
        rows.push(Row {
            what: "throughput".into(),
            unit: "queries/s",
            observed: (cal.queries - 1) as f64 / cal.window_s,
            predicted: summary.throughput.queries_per_s,
            target: None,
        });
    }
    if let Some(p) = &cal.provider {
        let counts = summary
            .providers
            .get(&p.name)
            .map(|n| n.counts.counters)
            .unwrap_or(summary.provider.counters);
        let per_query = |n: u64| n as f64 / cal.queries.max(1) as f64;
        let predicted_per_query = |n: u64| n as f64 / summary.queries_started.max(1) as f64;
        rows.push(Row {
            what: format!("{} requests per query", p.name),
            unit: "",
            observed: per_query(p.calls),
            predicted: predicted_per_query(counts.received),
            target: None,
        });
        let http_429 = if cal.http.0 > 0 { cal.http.1 } else { 0 };
        rows.push(Row {
            what: format!("{} 429s per query", p.name),
            unit: "",
            observed: per_query(p.rate_limited.max(http_429)),
            predicted: predicted_per_query(counts.rate_limited),
            target: None,
        });
        rows.push(Row {
            what: format!("{} failures per query", p.name),
            unit: "",
            observed: per_query(p.errors + p.timeouts),
            predicted: predicted_per_query(counts.errored + counts.timed_out),
            target: None,
        });
    }
    Ok(FitCheck { rows, summary })
}
