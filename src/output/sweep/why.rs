//! Why no point of a sweep passes: which constraint binds, and by how much.
//!
//! Three readings, each a Markdown paragraph, in the order a person would fix them:
//!
//! 1. **Capacity.** The queries per minute the provider's limits allow at the sweep's highest
//!    headroom (the closed form of `capsize plan`) against what the workload asks for: an
//!    open workload's arrival rate, or a closed one's sessions each sending a query per think
//!    time plus the least time a query can take (its rounds at the mean latency). When the ask
//!    is larger, no concurrency fixes it: the report says by how much the limit, or the
//!    requests per query, would have to change.
//! 2. **Objectives.** Each `[slo]` objective no point meets, with the best value the sweep saw
//!    and where, and how far it is from the objective.
//! 3. **Headroom.** Points that meet every objective but whose busiest minute goes over the
//!    provider's RPM × headroom (the bucket's burst lets a minute exceed the refill rate).

use std::fmt::Write as _;

use crate::analysis::plan::{self, Key, PlanInput};
use crate::analysis::sweep::{failures, Failure, PointResult};
use crate::engine::scenario::{Arrivals, Scenario};
use crate::engine::summary::slo::{Op, Threshold};
use crate::fmt::fmt_num;

/// What a workload asks for, in queries per minute, and how that was worked out (Markdown).
fn demand(s: &Scenario) -> Option<(f64, String)> {
    let w = &s.workload;
    match w.arrivals {
        Arrivals::Open { rate, .. } => Some((
            rate * 60.0,
            format!("queries arrive at {} per second", fmt_num(rate)),
        )),
        Arrivals::Closed { sessions } => {
            let think_s = w.think_time.as_ref().map_or(0.0, |t| t.mean() / 1000.0);
            let floor_s = f64::from(w.rounds) * s.provider().latency.mean() / 1000.0;
            let cycle = think_s + floor_s;
            (cycle > 0.0).then(|| {
                (
                    sessions as f64 * 60.0 / cycle,
                    format!(
                        "{sessions} sessions, each a query per {} s of thinking plus at least {} s for its {} round{} of calls, ask for up to",
                        fmt_num(think_s),
                        fmt_num(floor_s),
                        w.rounds,
                        if w.rounds == 1 { "" } else { "s" }
                    ),
                )
            })
        }
    }
}

/// The queries per minute the limits allow at `s`'s headroom, the requests each query sends,
/// and the label of the plan's row (which says whether the TPM binds).
fn capacity(s: &Scenario) -> Option<(f64, f64, String)> {
    let input = PlanInput::from_scenario(s);
    let rows = plan::plan(&input);
    let find = |key: Key| rows.iter().find(|r| r.key == key);
    let requests = input
        .per_query
        .map_or(input.calls_per_query, |q| q.requests);
    match find(Key::QueriesPerMinAtHeadroom) {
        Some(r) => Some((r.value, requests, r.label.clone())),
        None => find(Key::QueriesPerMinCeiling)
            .map(|r| (r.value * s.scheduler.headroom, requests, r.label.clone())),
    }
}

/// The capacity paragraph, when the workload asks for more than the limits allow.
fn over_capacity(points: &[PointResult]) -> Option<String> {
    let best = points.iter().max_by(|a, b| {
        a.scenario
            .scheduler
            .headroom
            .total_cmp(&b.scenario.scheduler.headroom)
    })?;
    let s = &best.scenario;
    let (asked, how) = demand(s)?;
    let (allowed, requests, label) = capacity(s)?;
    if allowed <= 0.0 || asked <= allowed * 1.05 {
        return None;
    }
    let factor = asked / allowed;
    let tpm_binds = label.contains("TPM") || s.provider().rpm.is_none();
    let mut line = format!(
        "**The provider's limits bind.** At headroom {} its {} allows {} queries/min of {} requests each; {how} ~{} queries/min. No concurrency fixes this: ",
        s.scheduler.headroom,
        if tpm_binds { "TPM" } else { "RPM" },
        fmt_num(allowed),
        fmt_num(requests),
        fmt_num(asked),
    );
    let limit = match (s.provider().rpm, tpm_binds) {
        (_, true) => s
            .provider()
            .tpm
            .map(|t| format!("{} TPM", fmt_num((t * factor).ceil()))),
        (Some(r), false) => Some(format!("{} RPM", fmt_num((r * factor).ceil()))),
        (None, false) => None,
    };
    if let Some(limit) = limit {
        let _ = write!(line, "it needs {} the limit ({limit}), or ", times(factor));
    }
    let _ = write!(
        line,
        "at most {} requests per query instead of {}, or fewer queries.",
        fmt_num((requests / factor * 10.0).floor() / 10.0),
        fmt_num(requests)
    );
    Some(line)
}

/// `3.2×`: a factor for a sentence, one decimal under 10, whole (rounded up) above.
fn times(factor: f64) -> String {
    if factor < 10.0 {
        format!("{:.1}×", (factor * 10.0).ceil() / 10.0)
    } else {
        format!("{:.0}×", factor.ceil())
    }
}

/// The values of a point's swept keys: `max_concurrency = 8, headroom = 0.5`.
fn at(p: &PointResult) -> String {
    super::report::values(p).join(", ")
}

/// One paragraph per objective that no point meets: the best value and where, and the gap.
fn objectives(points: &[PointResult], slo: &[Threshold]) -> Vec<String> {
    let mut out = Vec::new();
    for t in slo {
        if points.iter().any(|p| t.met(&p.mean)) {
            continue;
        }
        let lower_is_better = matches!(t.op, Op::Lt | Op::Le);
        let best = points
            .iter()
            .filter_map(|p| t.value(&p.mean).map(|v| (p, v)))
            .min_by(|(_, a), (_, b)| {
                if lower_is_better {
                    a.total_cmp(b)
                } else {
                    b.total_cmp(a)
                }
            });
        let line = match best {
            Some((p, v)) => {
                let gap = if t.limit != 0.0 {
                    format!(
                        " ({} % off)",
                        fmt_num(((v - t.limit) / t.limit * 100.0).abs())
                    )
                } else {
                    String::new()
                };
                format!(
                    "**`{t}` is met nowhere.** The best point ({}) reaches {}{gap}.",
                    at(p),
                    fmt_num(v)
                )
            }
            None => format!("**`{t}` is met nowhere:** no point has a value for it."),
        };
        out.push(line);
    }
    out
}

/// The headroom paragraph: points whose only failure is a busiest minute over RPM × headroom.
fn headroom(points: &[PointResult], slo: &[Threshold]) -> Option<String> {
    let only: Vec<(&PointResult, Failure)> = points
        .iter()
        .filter_map(|p| match failures(p, slo).as_slice() {
            [f @ Failure::OverHeadroom { .. }] => Some((p, f.clone())),
            _ => None,
        })
        .collect();
    let (p, f) = only.first()?;
    let burst = p.scenario.scheduler.burst_s;
    Some(format!(
        "**{} point{} meet{} every objective but go{} over the provider's RPM × headroom** in the busiest minute, e.g. {}: {}. The client's bucket lets {} s of refill through at once (`scheduler.burst_s`); a smaller burst or a lower headroom keeps the minute under.",
        only.len(),
        if only.len() == 1 { "" } else { "s" },
        if only.len() == 1 { "s" } else { "" },
        if only.len() == 1 { "es" } else { "" },
        at(p),
        f,
        fmt_num(burst)
    ))
}

/// Why no point passes, as Markdown paragraphs: empty if some point does.
pub fn diagnose(points: &[PointResult], slo: &[Threshold]) -> Vec<String> {
    if points.is_empty() || points.iter().any(|p| failures(p, slo).is_empty()) {
        return Vec::new();
    }
    let mut out: Vec<String> = over_capacity(points).into_iter().collect();
    out.extend(objectives(points, slo));
    out.extend(headroom(points, slo));
    if out.is_empty() {
        out.push(
            "**Each objective is met somewhere, but no point meets them all under the provider's RPM × headroom.** The `passes` column of the points table gives each point's reasons."
                .to_string(),
        );
    }
    out
}
