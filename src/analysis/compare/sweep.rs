//! Two sweeps compared point by point: points matched by their swept values, each metric's
//! mean against the other's, moved when the change exceeds their 95 % half-widths combined
//! (√(a² + b²), from each point's repeats). With one run per point there is no interval: the
//! changes are given without a verdict.

use serde::Serialize;

use super::noise::{self, Method};
use super::read::{same_value, Sweep};
use super::{CompareError, Row};
use crate::analysis::check::direction::{self, Direction};

/// One sweep, as the comparison names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepSide {
    /// Its sweep.csv.
    pub path: String,
    /// The scenario's name, from report.md's title (if report.md is beside it).
    pub scenario: Option<String>,
    /// Its points.
    pub points: usize,
    /// Runs per point.
    pub repeats: usize,
    /// The recommended point as report.md words it, or `none` (if report.md is beside it).
    pub recommended: Option<String>,
}

/// A swept key's value at a point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The key (`scheduler.max_concurrency`).
    pub key: String,
    /// Its value, as A writes it.
    pub value: String,
}

/// One metric at one point of both sweeps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointRow {
    /// The point.
    pub point: Vec<Setting>,
    /// A's 95 % half-width (`None`: one run per point).
    pub a_ci95: Option<f64>,
    /// B's.
    pub b_ci95: Option<f64>,
    /// The metric, its change and the verdict.
    #[serde(flatten)]
    pub row: Row,
}

/// Two sweeps compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweeps {
    /// A.
    pub a: SweepSide,
    /// B.
    pub b: SweepSide,
    /// The swept keys, in A's order.
    pub keys: Vec<String>,
    /// Every metric of every point in both, in A's order of points and columns.
    pub rows: Vec<PointRow>,
    /// The points only A has.
    pub only_a: Vec<Vec<Setting>>,
    /// The points only B has.
    pub only_b: Vec<Vec<Setting>>,
    /// What differs in their load (empty: nothing the sweeps record).
    pub load: Vec<String>,
}

/// The summary.json metric a sweep.csv column is (for which way is worse); unknown columns
/// are shown, not judged.
fn column(name: &str) -> Option<&'static str> {
    Some(match name {
        "queries_per_s" => "throughput.queries_per_s",
        "calls_per_s" => "throughput.calls_per_s",
        "query_p50_ms" => "latency_ms.query.p50",
        "query_p95_ms" => "latency_ms.query.p95",
        "query_p99_ms" => "latency_ms.query.p99",
        "call_p50_ms" => "latency_ms.call.p50",
        "call_p95_ms" => "latency_ms.call.p95",
        "call_p99_ms" => "latency_ms.call.p99",
        // A share of requests: more is worse, as the 429s are.
        "ratio_429" => "provider.rate_limited",
        "retries" => "retries",
        "rpm_utilization" => "rpm_utilization",
        "tpm_utilization" => "tpm_utilization",
        "peak_rpm_utilization" => "peak_rpm_utilization",
        "orphaned_requests" => "orphaned_requests",
        // The bill grows with the work done, as the other counts; per good query and the
        // share wasted are judged.
        "cost_usd" => "cost.total_usd",
        "cost_per_good_query_usd" => "cost.per_good_query_usd",
        "wasted_usd" => "cost.wasted_usd",
        "wasted_share" => "cost.wasted_share",
        _ => return None,
    })
}

/// Which way a sweep.csv column is worse. A count that grows with the work done (retries,
/// orphaned requests) is not judged: sweep.csv has no queries started to take it per query.
fn way(name: &str) -> Option<Direction> {
    let metric = column(name)?;
    if name != "ratio_429" && direction::is_count(metric) {
        return None;
    }
    direction::direction(metric)
}

/// Two sweeps compared point by point.
pub fn sweeps(a: &Sweep, b: &Sweep) -> Result<Sweeps, CompareError> {
    let mut ka = a.keys.clone();
    let mut kb = b.keys.clone();
    ka.sort();
    kb.sort();
    if ka != kb {
        return Err(CompareError::Keys {
            a: a.keys.join(", "),
            b: b.keys.join(", "),
        });
    }
    // B's value of each of A's keys, by position.
    let order: Vec<usize> = a
        .keys
        .iter()
        .map(|k| b.keys.iter().position(|x| x == k).unwrap_or(0))
        .collect();
    let settings = |values: &[String]| -> Vec<Setting> {
        a.keys
            .iter()
            .zip(values)
            .map(|(k, v)| Setting {
                key: k.clone(),
                value: v.clone(),
            })
            .collect()
    };
    let in_a_order =
        |values: &[String]| -> Vec<String> { order.iter().map(|&i| values[i].clone()).collect() };
    let matches = |x: &[String], y: &[String]| x.iter().zip(y).all(|(p, q)| same_value(p, q));
    let interval = a.repeats > 1 && b.repeats > 1;
    let mut rows = Vec::new();
    let mut only_a = Vec::new();
    let mut matched = vec![false; b.points.len()];
    for pa in &a.points {
        let found = b
            .points
            .iter()
            .position(|pb| matches(&pa.values, &in_a_order(&pb.values)));
        let Some(j) = found else {
            only_a.push(settings(&pa.values));
            continue;
        };
        matched[j] = true;
        let pb = &b.points[j];
        for (c, name) in a.columns.iter().enumerate() {
            let (ma, ca) = pa.stats[c];
            let (mb, cb) = match b.columns.iter().position(|x| x == name) {
                Some(i) => pb.stats[i],
                None => (None, None),
            };
            let (ca, cb) = if interval { (ca, cb) } else { (None, None) };
            let t = ca.zip(cb).map(|(x, y)| noise::combined(x, y));
            let row = Row::new(
                name.clone(),
                name.clone(),
                (ma, mb),
                way(name),
                t,
                Method::Repeats,
            );
            rows.push(PointRow {
                point: settings(&pa.values),
                a_ci95: ca,
                b_ci95: cb,
                row,
            });
        }
    }
    let only_b = b
        .points
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(p, _)| settings(&in_a_order(&p.values)))
        .collect();
    let mut load = Vec::new();
    if let (Some(x), Some(y)) = (&a.scenario, &b.scenario) {
        if x != y {
            load.push(format!("scenario: A {x:?}, B {y:?}"));
        }
    }
    let side = |s: &Sweep| SweepSide {
        path: s.path.display().to_string(),
        scenario: s.scenario.clone(),
        points: s.points.len(),
        repeats: s.repeats,
        recommended: s.recommended.clone(),
    };
    Ok(Sweeps {
        a: side(a),
        b: side(b),
        keys: a.keys.clone(),
        rows,
        only_a,
        only_b,
        load,
    })
}
