//! Which points pass and which one a sweep recommends: the capacity answer. A point fails by
//! an `[slo]` objective its mean summary misses, or by a busiest minute over the provider's
//! RPM × its headroom ([`Failure`]).

use serde_json::Value;

use super::{mean_ci, PointResult};
use crate::engine::scenario::sweep_slo::Prefer;
use crate::engine::scenario::Scenario;
use crate::engine::summary::metrics;
use crate::engine::summary::slo::{number, Op, Threshold};
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
        /// The provider of several whose minute it is (`None`: the one provider).
        provider: Option<String>,
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
                provider,
                peak,
                allowed,
                rpm,
                headroom,
                burst,
            } => {
                if let Some(name) = provider {
                    write!(f, "{name}: ")?;
                }
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
    let sc = &scenario.scheduler;
    // Each provider's busiest minute against its own RPM × headroom (the one provider's
    // figures are the run's own).
    let each: Vec<(Option<String>, Option<f64>, Option<f64>)> = if scenario.named_providers {
        scenario
            .providers
            .iter()
            .map(|p| {
                let path = format!("providers.{}.peak_rpm_utilization", p.name);
                (Some(p.name.clone()), number(summary, &path), p.config.rpm)
            })
            .collect()
    } else {
        vec![(
            None,
            metrics::PEAK_RPM_UTILIZATION.read(summary),
            scenario.provider().rpm,
        )]
    };
    for (provider, util, rpm) in each {
        let over = util.filter(|v| *v > headroom + 1e-9);
        if let (Some(util), Some(rpm)) = (over, rpm) {
            out.push(Failure::OverHeadroom {
                provider,
                peak: util * rpm,
                allowed: rpm * headroom,
                rpm,
                headroom,
                burst: sc.rate_limit.then(|| sc.bucket_capacity(rpm)),
            });
        }
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

/// An objective a point meets on average but not across its runs' 95 % interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Marginal {
    /// The objective.
    pub threshold: Threshold,
    /// The metric's mean over the point's runs.
    pub mean: f64,
    /// Its 95 % confidence half-width.
    pub ci95: f64,
}

impl Marginal {
    /// The end of the interval on the failing side.
    pub fn worst(&self) -> f64 {
        match self.threshold.op {
            Op::Lt | Op::Le => self.mean + self.ci95,
            Op::Gt | Op::Ge => self.mean - self.ci95,
            Op::Eq => self.mean + self.ci95,
        }
    }
}

/// The objectives `p` meets on average whose 95 % interval over its runs reaches past the
/// limit: a coin flip, not an answer. Empty with one run (there is no interval).
pub fn marginal(p: &PointResult, slo: &[Threshold]) -> Vec<Marginal> {
    if p.runs.len() < 2 {
        return Vec::new();
    }
    slo.iter()
        .filter_map(|t| {
            let xs: Option<Vec<f64>> = p.runs.iter().map(|r| t.value(r)).collect();
            let m = mean_ci(&xs?);
            let ends = [m.mean - m.ci95, m.mean + m.ci95];
            let surely = ends.iter().all(|e| t.op.holds(*e, t.limit));
            (t.op.holds(m.mean, t.limit) && !surely).then(|| Marginal {
                threshold: t.clone(),
                mean: m.mean,
                ci95: m.ci95,
            })
        })
        .collect()
}

/// The point the report recommends and why.
#[derive(Debug, Clone)]
pub struct Recommendation {
    /// Index into the points.
    pub index: usize,
    /// The rule that chose it, in words.
    pub rule: String,
    /// The objectives it meets only on average (empty: it meets them across its interval, or
    /// it was run once).
    pub marginal: Vec<Marginal>,
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
    // A swept key's value, or a metric's mean over the point's runs (`[sweep] prefer = "min
    // cost.per_good_query_usd"`); a point without one comes last.
    let on_metric = first.point.get(&prefer.key).is_none();
    let key = |p: &PointResult| {
        let v = match p.point.get(&prefer.key) {
            Some(v) => Some(v.as_f64()),
            None => crate::engine::summary::slo::number(&p.mean, &prefer.key),
        };
        match v.filter(|v| !v.is_nan()) {
            Some(v) if prefer.max => -v,
            Some(v) => v,
            None => f64::INFINITY,
        }
    };
    let headroom = |p: &PointResult| p.scenario.scheduler.headroom;
    let qps = queries_per_s;
    // A point that meets the objectives across its interval beats one that meets them only on
    // average, whatever the other rules say: the tie rules never prefer a coin flip.
    let passing: Vec<(usize, &PointResult)> = points
        .iter()
        .enumerate()
        .filter(|(_, p)| passes(p, slo))
        .collect();
    let sure: Vec<(usize, &PointResult)> = passing
        .iter()
        .copied()
        .filter(|(_, p)| marginal(p, slo).is_empty())
        .collect();
    let pool = if sure.is_empty() { passing } else { sure };
    let (index, _) = pool.into_iter().min_by(|(_, a), (_, b)| {
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
    let which = match (prefer.max, on_metric) {
        (true, false) => "largest",
        (false, false) => "smallest",
        (true, true) => "largest mean",
        (false, true) => "smallest mean",
    };
    let from = if first.scenario.prefer.is_some() {
        " (`[sweep] prefer`)"
    } else {
        ""
    };
    let sure = if points.iter().any(|p| p.runs.len() > 1) {
        " (across its runs' 95 % interval where any point does)"
    } else {
        ""
    };
    Some(Recommendation {
        index,
        rule: format!(
            "the {which} `{}`{from} that meets the objectives ({objectives}){sure} and keeps its busiest minute under the provider's RPM × its headroom; among those, the lowest headroom (the most capacity left for retries and other traffic), then the higher throughput",
            prefer.key
        ),
        marginal: marginal(&points[index], slo),
    })
}
