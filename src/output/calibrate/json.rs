//! `calibration.json`: the fit table, the structure found and the check as data, for scripts
//! and CI (the same figures calibration.md shows).

use serde_json::{json, Value};

use crate::analysis::calibrate::{Arrival, Calibration, FitCheck};

use super::report::fitted;

/// The schema's version: a field may be added, none renamed.
pub const SCHEMA_VERSION: u32 = 1;

/// The document.
pub fn json(cal: &Calibration, check: Option<&FitCheck>, assumed: &[String]) -> String {
    let quantiles = |p50: f64, p90: f64, p99: f64| json!({ "p50": p50, "p90": p90, "p99": p99 });
    let fits: Vec<Value> = fitted(cal)
        .into_iter()
        .map(|q| {
            let (o, fam) = (&q.fit.observed, &q.fit.fit.family);
            let f = q.fit;
            json!({
                "quantity": q.what,
                "n": o.n,
                "observed": quantiles(o.p50, o.p90, o.p99),
                "family": fam.name(),
                "fitted": quantiles(fam.quantile(0.5), fam.quantile(0.9), fam.quantile(0.99)),
                "ks": f.fit.distance,
                "accept": f.fit.accept,
            })
        })
        .collect();
    let s = &cal.structure;
    let arrival = match &cal.arrival {
        Some(Arrival::Open {
            rate_per_s,
            cv,
            poisson_distance,
            accept,
        }) => json!({
            "mode": "open", "rate_per_s": rate_per_s, "cv": cv,
            "poisson_ks": poisson_distance, "accept": accept,
        }),
        Some(Arrival::Closed {
            seen,
            active,
            per_session,
            ..
        }) => json!({
            "mode": "closed", "sessions_seen": seen, "active": active, "per_session": per_session,
        }),
        None => Value::Null,
    };
    let rows: Vec<Value> = check
        .map(|c| {
            c.rows
                .iter()
                .map(|r| {
                    json!({
                        "figure": r.what, "unit": r.unit, "observed": r.observed,
                        "predicted": r.predicted, "ratio": r.ratio(), "target": r.target,
                        "met": r.met(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let skipped: Vec<Value> = cal
        .skipped
        .iter()
        .map(|(reason, n, at)| json!({ "what": reason, "count": n, "first_at": at }))
        .collect();
    let doc = json!({
        "schema_version": SCHEMA_VERSION,
        "capsize_version": crate::engine::VERSION,
        "inputs": cal.reads.iter().map(|r| json!({
            "path": r.path.display().to_string(), "format": r.format.to_string(),
            "spans": r.spans, "skipped": r.skipped.total(),
        })).collect::<Vec<_>>(),
        "queries": cal.queries,
        "query_latency_ms": cal.query_latency.map(|q| json!({
            "n": q.n, "mean": q.mean, "p50": q.p50, "p90": q.p90, "p95": q.p95, "p99": q.p99,
            "max": q.max,
        })),
        "window_s": cal.window_s,
        "provider": cal.provider.as_ref().map(|p| json!({
            "name": p.name, "as_input": p.said, "model": p.model,
        })),
        "tools": cal.tools.iter().zip(super::names::tools(cal)).map(|(t, name)| json!({
            "name": name, "as_input": t.name, "calls": t.calls, "errors": t.errors,
        })).collect::<Vec<_>>(),
        "fits": fits,
        "structure": {
            "shape": format!("{:?}", s.shape).to_lowercase(),
            "rounds": s.rounds,
            "calls_per_round": s.per_round.as_ref().map(|c| json!({ "min": c.min, "max": c.max, "mean": c.mean, "ks": c.distance })),
            "sequential_share": s.sequential.map(|(_, x)| x),
            "own_time_ms": s.own.map(|o| json!({ "p50": o.p50, "p95": o.p95 })),
        },
        "arrival": arrival,
        "client": super::client::json(cal.client.as_ref()),
        "check": rows,
        "check_runs": check.map(|c| c.runs),
        "assumed": assumed,
        "skipped": skipped,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value serializes");
    text.push('\n');
    text
}
