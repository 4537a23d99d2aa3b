//! Which points pass and which one a sweep recommends: the capacity answer. A point fails by
//! an `[slo]` objective its mean summary misses, or by a busiest minute over the provider's
//! RPM × its headroom ([`Failure`]).

use serde_json::Value;

use super::{mean_ci, PointResult};
use crate::engine::scenario::sweep_slo::Prefer;
use crate::engine::scenario::Scenario;
use crate::engine::summary::metrics;
use crate::engine::summary::slo::Threshold;
use crate::fmt::fmt_num;

/// Why a point does not pass: an objective it misses, or a busiest minute over the provider's
/// RPM × its headroom.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// An `[slo]` objective the point's mean summary misses (`value`: `None` if it has none).
    Objective {
        /// The objective.
        threshold: Threshold,
        /// The point's value.
        value: Option<f64>,
    },
    /// The busiest 60 s sent more requests than RPM × headroom.
    OverHeadroom {
        /// Requests in the busiest 60 s.
        peak: f64,
        /// RPM × headroom.
        allowed: f64,
        /// The provider's RPM.
        rpm: f64,
        /// The point's headroom.
        headroom: f64,
        /// The client's RPM bucket capacity, when the client limits itself: the most its
        /// limiter lets a minute exceed RPM × headroom by.
        burst: Option<f64>,
    },
}

impl std::fmt::Display for Failure {
    /// One phrase: `latency_ms.query.p95 1,983.5, needs < 2000`, `busiest minute 452
    /// requests, over 420 (600 RPM × 0.7)`, or, when the client's own bucket let it through,
    /// `busiest minute 424 requests, over 420 (600 RPM × 0.7) by the bucket's burst (7:
    /// scheduler.burst_s)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Objective { threshold, value } => write!(
                f,
                "{} {}, needs {}",
                threshold.metric,
                value.map_or("none".into(), fmt_num),
                threshold.condition()
            ),
            Failure::OverHeadroom {
                peak,
                allowed,
                rpm,
                headroom,
                burst,
            } => {
                write!(
                    f,
                    "busiest minute {} requests, over {} ({} RPM × {headroom})",
                    fmt_num(*peak),
                    fmt_num(*allowed),
                    fmt_num(*rpm)
                )?;
                match burst.filter(|b| *peak <= allowed + b + 1e-9) {
                    Some(b) => write!(
                        f,
                        " by the bucket's burst ({}: scheduler.burst_s)",
                        fmt_num(b)
                    ),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Every reason a point does not pass (none: it passes): each objective its mean summary
/// misses, then a busiest minute over the provider's RPM × its headroom.
pub fn failures(p: &PointResult, slo: &[Threshold]) -> Vec<Failure> {
    failures_in(&p.scenario, &p.mean, slo)
}

/// Every reason a run of `scenario` whose summary.json is `summary` (or a mean of several)
/// does not pass.
pub fn failures_in(scenario: &Scenario, summary: &Value, slo: &[Threshold]) -> Vec<Failure> {
    let mut out: Vec<Failure> = slo
        .iter()
        .filter(|t| !t.met(summary))
        .map(|t| Failure::Objective {
            threshold: t.clone(),
            value: t.value(summary),
        })
        .collect();
    let headroom = scenario.scheduler.headroom;
    let over = metrics::PEAK_RPM_UTILIZATION
        .read(summary)
        .filter(|v| *v > headroom + 1e-9);
    if let (Some(util), Some(rpm)) = (over, scenario.provider().rpm) {
        let sc = &scenario.scheduler;
        out.push(Failure::OverHeadroom {
            peak: util * rpm,
            allowed: rpm * headroom,
            rpm,
            headroom,
            burst: sc.rate_limit.then(|| sc.bucket_capacity(rpm)),
        });
    }
    out
}

/// Whether a point meets every threshold (on its mean summary), and stays under the
/// provider's limits × its headroom in its busiest minute: it has no [`failures`].
pub fn passes(p: &PointResult, slo: &[Threshold]) -> bool {
    failures(p, slo).is_empty()
}

/// A point's mean queries per second over its runs (0 if a run lacks it): the last
/// tie-break of [`recommend`].
fn queries_per_s(p: &PointResult) -> f64 {
    let xs: Option<Vec<f64>> = p
        .runs
        .iter()
        .map(|r| metrics::QUERIES_PER_S.read(r))
        .collect();
    xs.map_or(0.0, |xs| mean_ci(&xs).mean)
}

/// The point the report recommends and why.
#[derive(Debug, Clone)]
pub struct Recommendation {
    /// Index into the points.
    pub index: usize,
    /// The rule that chose it, in words.
    pub rule: String,
}

/// The recommended point: among the points that pass ([`passes`]), the smallest value of the
/// first swept key, or the value `[sweep] prefer` asks for (`min KEY` or `max KEY`), then the
/// lowest headroom, then the higher throughput. `None` if none passes.
pub fn recommend(points: &[PointResult], slo: &[Threshold]) -> Option<Recommendation> {
    let first = points.first()?;
    let prefer = first.scenario.prefer.clone().unwrap_or_else(|| Prefer {
        key: first
            .point
            .values
            .first()
            .map(|(k, _)| k.clone())
            .unwrap_or_default(),
        max: false,
    });
    let key = |p: &PointResult| {
        let v = p.point.get(&prefer.key).map_or(f64::NAN, |v| v.as_f64());
        if prefer.max {
            -v
        } else {
            v
        }
    };
    let headroom = |p: &PointResult| p.scenario.scheduler.headroom;
    let qps = queries_per_s;
    let (index, _) = points
        .iter()
        .enumerate()
        .filter(|(_, p)| passes(p, slo))
        .min_by(|(_, a), (_, b)| {
            key(a)
                .total_cmp(&key(b))
                .then(headroom(a).total_cmp(&headroom(b)))
                .then(qps(b).total_cmp(&qps(a)))
        })?;
    let objectives = if slo.is_empty() {
        "no [slo] objectives given".to_string()
    } else {
        slo.iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let which = if prefer.max { "largest" } else { "smallest" };
    let from = if first.scenario.prefer.is_some() {
        " (`[sweep] prefer`)"
    } else {
        ""
    };
    Some(Recommendation {
        index,
        rule: format!(
            "the {which} `{}`{from} that meets the objectives ({objectives}) and keeps its busiest minute under the provider's RPM × its headroom; among those, the lowest headroom (the most capacity left for retries and other traffic), then the higher throughput",
            prefer.key
        ),
    })
}
