//! Why no point of a sweep passes: which constraint binds, and by how much.
//!
//! Three readings, each a Markdown paragraph, in the order a person would fix them:
//!
//! 1. **Capacity.** The limit that binds at the sweep's highest headroom (each provider's RPM,
//!    TPM, ITPM and OTPM against what a query asks of that provider, and the concurrency: the
//!    closed forms of `capsize plan`) against what the workload asks for: an open workload's
//!    arrival rate, or a closed one's sessions each sending a query per think time plus the
//!    least time a query can take. When the ask is larger, the report names the limit and its
//!    provider, the value that lifts it (as a `--set` flag) and the limit that binds next, or
//!    what a query would have to ask instead.
//! 2. **Objectives.** Each `[slo]` objective no point meets, with the best value the sweep saw
//!    and where, and how far it is from the objective.
//! 3. **Headroom.** Points that meet every objective but whose busiest minute goes over the
//!    provider's RPM × headroom (the bucket's burst lets a minute exceed the refill rate).

use std::fmt::Write as _;

use crate::analysis::plan::{Advice, Demand, LimitKind, UNGATED_SPARE};
use crate::analysis::sweep::{failures, Failure, PointResult};
use crate::engine::scenario::{Arrivals, Scenario};
use crate::engine::summary::slo::{Op, Threshold};
use crate::fmt::{fmt_num, times};

/// How a workload's ask was worked out, for a sentence ending "~N queries/min".
fn how(s: &Scenario, d: &Demand) -> String {
    let w = &s.workload;
    match w.arrivals {
        Arrivals::Open { rate, .. } => {
            format!("queries arrive at {} per second", fmt_num(rate))
        }
        Arrivals::Closed { sessions } => format!(
            "{sessions} sessions, each a query per {} s of thinking plus at least {} s for the query itself, ask for up to",
            fmt_num(w.think_time.as_ref().map_or(0.0, |t| t.mean() / 1000.0)),
            fmt_num(d.floor_ms / 1000.0),
        ),
    }
}

/// The capacity paragraph, when the workload asks for more than the binding limit allows: the
/// limit and its provider, what it allows, and the change that lifts it (with the next limit
/// that would bind, when it binds before the workload is served).
fn over_capacity(points: &[PointResult]) -> Option<String> {
    let best = points.iter().max_by(|a, b| {
        a.scenario
            .scheduler
            .headroom
            .total_cmp(&b.scenario.scheduler.headroom)
    })?;
    let s = &best.scenario;
    let d = Demand::of(s);
    let asked = d.asked_per_min(s)?;
    let advice = d.advise(asked)?;
    // Within 5 %: the limit is met, not missed.
    (asked > advice.binding.at_headroom * 1.05).then(|| advise(s, &advice, asked, &how(s, &d)))
}

/// The paragraph for `advice`, whose limit allows less than the `asked` queries/min.
fn advise(s: &Scenario, advice: &Advice, asked: f64, how: &str) -> String {
    let f = fmt_num;
    let b = &advice.binding;
    let allowed = b.at_headroom;
    let at = if b.gated {
        format!("At headroom {}, ", s.scheduler.headroom)
    } else {
        String::new()
    };
    let mut line = match b.kind {
        LimitKind::Concurrency => format!(
            "**`scheduler.max_concurrency` binds.** {at}{} slots, each held {} s per query (the service time of its requests), serve {} queries/min; {how} ~{} queries/min. ",
            f(b.limit),
            f(b.per_query),
            f(allowed),
            f(asked),
        ),
        kind => format!(
            "**{} binds.** {at}{} allows {} queries/min of {} {} each; {how} ~{} queries/min. No concurrency fixes this: ",
            capitalized(&b.name()),
            if b.provider.is_empty() {
                format!("the provider's {}", kind.name())
            } else {
                format!("{}'s {}", b.provider, kind.name())
            },
            f(allowed),
            f(b.per_query),
            kind.unit(),
            f(asked),
        ),
    };
    let _ = write!(
        line,
        "{} {} to {} (`--set {}={}`, {})",
        // The concurrency's sentence starts here; a limit's follows "No concurrency fixes
        // this:".
        if b.kind == LimitKind::Concurrency {
            "Raising"
        } else {
            "raising"
        },
        b.name(),
        f(advice.value),
        advice.key,
        advice.value,
        times(advice.factor)
    );
    match &advice.next {
        Some(n) => {
            let _ = write!(
                line,
                " lifts the ceiling to {} queries/min, where {} binds",
                f(n.at_headroom),
                n.name()
            );
        }
        None => line.push_str(" serves it"),
    }
    if matches!(b.kind, LimitKind::Itpm | LimitKind::Otpm) {
        let _ = write!(
            line,
            " (no client bucket holds the client under the {}: past it the provider's 429s decide, so this leaves {} % spare)",
            b.kind.name(),
            fmt_num((1.0 - UNGATED_SPARE) * 100.0)
        );
    }
    if b.kind == LimitKind::Concurrency {
        line.push('.');
    } else {
        let factor = asked / allowed;
        let _ = write!(
            line,
            "; or at most {} {} per query instead of {}, or fewer queries.",
            f((b.per_query / factor * 10.0).floor() / 10.0),
            b.kind.unit(),
            f(b.per_query)
        );
    }
    line
}

/// `s` with its first letter in capitals.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
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
