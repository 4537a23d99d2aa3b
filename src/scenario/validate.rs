//! Raw scenario → validated [`Scenario`]: defaults filled in, every number checked, errors as
//! `(dotted key, message)`.

use std::path::Path;
use std::time::Duration;

use super::grid;
use super::raw::{
    RawArrival, RawCount, RawCountDist, RawMode, RawRetry, RawScenario, RawScheduler, RawWorkload,
};
use super::{Arrivals, Count, ModelTurn, Scenario, SchedulerSettings, Stop, Subagents, Workload};
use crate::scheduler::{CapPolicy, Jitter, RetryPolicy, TurnPolicy};

type Invalid = (String, String);

fn bad(key: &str, message: impl Into<String>) -> Invalid {
    (key.to_string(), message.into())
}

fn positive(key: &str, v: f64) -> Result<f64, Invalid> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(bad(key, format!("must be a positive number, got {v}")))
    }
}

fn millis(key: &str, v: f64) -> Result<Duration, Invalid> {
    if v.is_finite() && v >= 0.0 {
        Ok(Duration::from_secs_f64(v / 1000.0))
    } else {
        Err(bad(
            key,
            format!("must be a number of milliseconds >= 0, got {v}"),
        ))
    }
}

fn count(key: &str, raw: &RawCount, min: u64) -> Result<Count, Invalid> {
    let c = match raw {
        RawCount::Fixed(n) => Count::Fixed(*n),
        RawCount::Dist(RawCountDist::UniformInt { min, max }) => {
            if max < min {
                return Err(bad(
                    &format!("{key}.max"),
                    format!("must be at least min ({min}), got {max}"),
                ));
            }
            Count::Uniform(*min, *max)
        }
    };
    let lowest = match c {
        Count::Fixed(n) | Count::Uniform(n, _) => n,
    };
    if lowest < min {
        return Err(bad(key, format!("must be at least {min}, got {lowest}")));
    }
    Ok(c)
}

fn workload(w: &RawWorkload, base: &Path) -> Result<Workload, Invalid> {
    let arrivals = match w.mode {
        RawMode::Closed => {
            if w.arrival_rate.is_some() {
                return Err(bad(
                    "workload.arrival_rate",
                    "is for mode = \"open\"; closed mode uses sessions",
                ));
            }
            let sessions = w.sessions.unwrap_or(1);
            if sessions == 0 {
                return Err(bad("workload.sessions", "must be at least 1"));
            }
            Arrivals::Closed { sessions }
        }
        RawMode::Open => {
            if w.sessions.is_some() {
                return Err(bad(
                    "workload.sessions",
                    "is for mode = \"closed\"; open mode uses arrival_rate",
                ));
            }
            let rate = w.arrival_rate.ok_or_else(|| {
                bad(
                    "workload.arrival_rate",
                    "is required in open mode (queries per second)",
                )
            })?;
            Arrivals::Open {
                rate: positive("workload.arrival_rate", rate)?,
                poisson: w.arrival == RawArrival::Poisson,
            }
        }
    };
    let stop = match (w.queries, w.duration_s) {
        (Some(0), None) => return Err(bad("workload.queries", "must be at least 1")),
        (Some(n), None) => Stop::Queries(n),
        (None, Some(s)) => {
            Stop::Duration(Duration::from_secs_f64(positive("workload.duration_s", s)?))
        }
        (None, None) => return Err(bad("workload.queries", "set either queries or duration_s")),
        (Some(_), Some(_)) => {
            return Err(bad(
                "workload.duration_s",
                "set either queries or duration_s, not both",
            ))
        }
    };
    if w.rounds == 0 {
        return Err(bad("workload.rounds", "must be at least 1"));
    }
    if !(0.0..=1.0).contains(&w.write_fraction) {
        return Err(bad(
            "workload.write_fraction",
            format!("must be in [0, 1], got {}", w.write_fraction),
        ));
    }
    let model_turn = match &w.model_turn {
        None => None,
        Some(t) => Some(ModelTurn {
            tokens: t.tokens,
            latency: match &t.latency {
                Some(l) => Some(
                    l.build("workload.model_turn.latency", base)
                        .map_err(|e| (e.key, e.message))?,
                ),
                None => None,
            },
        }),
    };
    let think_time = match &w.think_time {
        Some(l) => Some(
            l.build("workload.think_time", base)
                .map_err(|e| (e.key, e.message))?,
        ),
        None => None,
    };
    let parent_timeout = match w.parent_timeout_ms {
        Some(ms) => Some(Duration::from_secs_f64(
            positive("workload.parent_timeout_ms", ms)? / 1000.0,
        )),
        None => None,
    };
    let stop_at = match w.stop_at_s {
        Some(s) => Some(Duration::from_secs_f64(positive("workload.stop_at_s", s)?)),
        None => None,
    };
    let subagents = match &w.subagents {
        None => None,
        Some(a) => {
            if a.count == 0 {
                return Err(bad("workload.subagents.count", "must be at least 1"));
            }
            if a.max_iterations == Some(0) {
                return Err(bad(
                    "workload.subagents.max_iterations",
                    "must be at least 1 (omit it for no cap)",
                ));
            }
            Some(Subagents {
                count: a.count,
                budget_tokens: a.budget_tokens,
                orchestrator_budget: a.orchestrator_budget,
                max_iterations: a.max_iterations,
                synthesis_tokens: a.synthesis_tokens,
            })
        }
    };
    Ok(Workload {
        subagents,
        arrivals,
        stop,
        calls_per_query: count("workload.calls_per_query", &w.calls_per_query, 0)?,
        tokens_per_call: count("workload.tokens_per_call", &w.tokens_per_call, 0)?,
        rounds: w.rounds,
        model_turn,
        think_time,
        write_fraction: w.write_fraction,
        parent_timeout,
        stop_at,
    })
}

fn retry(r: Option<&RawRetry>) -> Result<RetryPolicy, Invalid> {
    let mut p = RetryPolicy::default();
    let Some(r) = r else { return Ok(p) };
    if let Some(n) = r.max_retries {
        p.max_retries = n;
    }
    if let Some(ms) = r.base_ms {
        p.base = millis("scheduler.retry.base_ms", ms)?;
    }
    if let Some(ms) = r.cap_ms {
        p.cap = millis("scheduler.retry.cap_ms", ms)?;
    }
    if p.cap < p.base {
        return Err(bad("scheduler.retry.cap_ms", "must be at least base_ms"));
    }
    if let Some(j) = &r.jitter {
        p.jitter = match j.as_str() {
            "full" => Jitter::Full,
            "equal" => Jitter::Equal,
            "none" => Jitter::None,
            other => {
                return Err(bad(
                    "scheduler.retry.jitter",
                    format!("must be \"full\", \"equal\" or \"none\", got {other:?}"),
                ))
            }
        };
    }
    if let Some(h) = r.honor_retry_after {
        p.honor_retry_after = h;
    }
    if let Some(ms) = r.retry_after_cap_ms {
        p.retry_after_cap = millis("scheduler.retry.retry_after_cap_ms", ms)?;
    }
    if let Some(on) = &r.retry_on {
        p.retry_on = on.clone();
    }
    if let Some(t) = r.retry_timeouts {
        p.retry_timeouts = t;
    }
    Ok(p)
}

fn scheduler(s: &RawScheduler) -> Result<SchedulerSettings, Invalid> {
    let headroom = s.headroom.unwrap_or(1.0);
    if !(headroom > 0.0 && headroom <= 1.0) {
        return Err(bad(
            "scheduler.headroom",
            format!("must be in (0, 1], got {headroom}"),
        ));
    }
    let over_cap = match s.over_cap.as_deref() {
        None | Some("truncate") => CapPolicy::Truncate,
        Some("batch") => CapPolicy::Batch,
        Some(other) => {
            return Err(bad(
                "scheduler.over_cap",
                format!("must be \"truncate\" or \"batch\", got {other:?}"),
            ))
        }
    };
    let timeout = millis("scheduler.timeout_ms", s.timeout_ms.unwrap_or(60_000.0))?;
    if timeout.is_zero() {
        return Err(bad("scheduler.timeout_ms", "must be positive"));
    }
    Ok(SchedulerSettings {
        max_concurrency: s.max_concurrency.unwrap_or(0) as usize,
        headroom,
        rate_limit: s.rate_limit.unwrap_or(false),
        burst_s: positive("scheduler.burst_s", s.burst_s.unwrap_or(1.0))?,
        retry: retry(s.retry.as_ref())?,
        timeout,
        turn: TurnPolicy {
            max_parallel: s.max_parallel_tools.unwrap_or(0) as usize,
            over_cap,
        },
        transport_cancel: s.transport_cancel.unwrap_or(true),
    })
}

/// Validates a raw scenario; `base` is the folder relative files are read from.
pub(super) fn validate(raw: RawScenario, base: &Path) -> Result<Scenario, Invalid> {
    if raw.name.trim().is_empty() {
        return Err(bad("name", "must not be empty"));
    }
    if raw.name.contains(['/', '\\']) || raw.name.starts_with('.') {
        return Err(bad(
            "name",
            format!(
                "names the output folder: no slashes or leading dot, got {:?}",
                raw.name
            ),
        ));
    }
    let provider = raw.provider.build(base).map_err(|e| (e.key, e.message))?;
    let (slo, slo_tolerance) = raw
        .slo
        .as_ref()
        .map(grid::slo)
        .transpose()?
        .unwrap_or_default();
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        seed: raw.seed,
        provider,
        workload: workload(&raw.workload, base)?,
        scheduler: scheduler(&raw.scheduler)?,
        sweep: raw
            .sweep
            .as_ref()
            .map(grid::axes)
            .transpose()?
            .unwrap_or_default(),
        slo,
        slo_tolerance,
    })
}
