//! A sweep's table: `sweep.csv`, a row per point: the swept values, seeds, each metric's mean
//! (and 95 % half-width), and whether it passes.

use serde_json::Value;

use crate::analysis::sweep::{mean_ci, passes, PointResult};
use crate::engine::summary::metrics;
use crate::engine::summary::slo::Threshold;

/// A column of a sweep row: its name and how to read it off one summary.json.
struct Column {
    name: &'static str,
    read: fn(&Value) -> Option<f64>,
}

/// The cost columns, in CSV order after the others, when the sweep's provider has a `price`:
/// dollars, written to six significant digits (a query may cost a fraction of a cent).
const COST_COLUMNS: &[Column] = &[
    Column {
        name: "cost_usd",
        read: |v| metrics::COST_TOTAL_USD.read(v),
    },
    Column {
        name: "cost_per_good_query_usd",
        read: |v| metrics::COST_PER_GOOD_QUERY_USD.read(v),
    },
    Column {
        name: "wasted_usd",
        read: |v| metrics::COST_WASTED_USD.read(v),
    },
    Column {
        name: "wasted_share",
        read: |v| metrics::COST_WASTED_SHARE.read(v),
    },
];

/// Whether the sweep of `points` is priced: its runs have a `cost`.
pub fn priced(points: &[PointResult]) -> bool {
    points
        .first()
        .and_then(|p| p.runs.first())
        .is_some_and(|r| r.get("cost").is_some())
}

/// The columns of a sweep of `points`: [`COLUMNS`], then the cost's when it is priced.
fn columns(points: &[PointResult]) -> impl Iterator<Item = &'static Column> {
    let cost: &'static [Column] = if priced(points) { COST_COLUMNS } else { &[] };
    COLUMNS.iter().chain(cost)
}

/// The per-point columns, in CSV order.
const COLUMNS: &[Column] = &[
    Column {
        name: "queries_per_s",
        read: |v| metrics::QUERIES_PER_S.read(v),
    },
    Column {
        name: "calls_per_s",
        read: |v| metrics::CALLS_PER_S.read(v),
    },
    Column {
        name: "query_p50_ms",
        read: |v| metrics::QUERY_P50.read(v),
    },
    Column {
        name: "query_p95_ms",
        read: |v| metrics::QUERY_P95.read(v),
    },
    Column {
        name: "query_p99_ms",
        read: |v| metrics::QUERY_P99.read(v),
    },
    Column {
        name: "call_p50_ms",
        read: |v| metrics::CALL_P50.read(v),
    },
    Column {
        name: "call_p95_ms",
        read: |v| metrics::CALL_P95.read(v),
    },
    Column {
        name: "call_p99_ms",
        read: |v| metrics::CALL_P99.read(v),
    },
    Column {
        name: "ratio_429",
        read: |v| {
            let received = metrics::PROVIDER_RECEIVED.read(v)?;
            Some(if received > 0.0 {
                metrics::PROVIDER_RATE_LIMITED.read(v)? / received
            } else {
                0.0
            })
        },
    },
    Column {
        name: "retries",
        read: |v| metrics::RETRIES.read(v),
    },
    Column {
        name: "rpm_utilization",
        read: |v| metrics::RPM_UTILIZATION.read(v),
    },
    Column {
        name: "tpm_utilization",
        read: |v| metrics::TPM_UTILIZATION.read(v),
    },
    Column {
        name: "peak_rpm_utilization",
        read: |v| metrics::PEAK_RPM_UTILIZATION.read(v),
    },
    Column {
        name: "orphaned_requests",
        read: |v| metrics::ORPHANED_REQUESTS.read(v),
    },
];

/// A column's mean (and 95 % half-width) over a point's runs; `None` if any run lacks it.
fn stat(p: &PointResult, column: &str) -> Option<(f64, f64)> {
    let c = COLUMNS
        .iter()
        .chain(COST_COLUMNS)
        .find(|c| c.name == column)?;
    let xs: Option<Vec<f64>> = p.runs.iter().map(|r| (c.read)(r)).collect();
    let s = mean_ci(&xs?);
    Some((s.mean, s.ci95))
}

fn number(v: f64) -> String {
    let r = (v * 1e4).round() / 1e4;
    if r == r.trunc() && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// `sweep.csv`: a row per point: the swept values, seed(s), each metric's mean (and its 95 %
/// half-width with repeats), and whether the point passes.
pub fn csv(points: &[PointResult], slo: &[Threshold]) -> Result<String, csv::Error> {
    let repeats = points.first().map_or(1, |p| p.runs.len());
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = points
        .first()
        .map(|p| p.point.values.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    header.push(if repeats > 1 { "seeds" } else { "seed" }.into());
    for c in columns(points) {
        header.push(c.name.into());
        if repeats > 1 {
            header.push(format!("{}_ci95", c.name));
        }
    }
    header.push("slo_pass".into());
    w.write_record(&header)?;
    for p in points {
        let mut row: Vec<String> = p.point.values.iter().map(|(_, v)| v.to_string()).collect();
        row.push(
            p.seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        );
        for c in columns(points) {
            let s = stat(p, c.name);
            let write = if c.name.ends_with("_usd") {
                crate::fmt::six_figures
            } else {
                number
            };
            row.push(s.map_or(String::new(), |(mean, _)| write(mean)));
            if repeats > 1 {
                row.push(s.map_or(String::new(), |(_, ci)| write(ci)));
            }
        }
        row.push(passes(p, slo).to_string());
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
