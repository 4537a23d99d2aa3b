//! Raw scenario → validated [`Scenario`]: defaults filled in, every number checked, errors as
//! `(dotted key, message)`.

use std::path::Path;

use capsize_mock::{Latency, RawLatency};

use super::raw::{
    RawArrival, RawCount, RawCountDist, RawMode, RawModelTurn, RawScenario, RawScheduler,
    RawSubagents, RawWorkload,
};
use super::retry::{preset, retry};
use super::sweep_slo;
use super::{
    Arrivals, Count, ModelTurn, NamedProvider, Scenario, SchedulerSettings, Stop, Subagents,
    Target, Workload,
};
use crate::scheduler::{CapPolicy, TurnPolicy};

use super::bounds::{
    self, bad, count as within, headroom, positive, positive_millis, seconds, Invalid,
};

/// A fixed or drawn integer whose values all lie from `min` to `max`.
pub(super) fn count(key: &str, raw: &RawCount, min: u64, max: u64) -> Result<Count, Invalid> {
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
    let (lowest, highest) = match c {
        Count::Fixed(n) => (n, n),
        Count::Uniform(lo, hi) => (lo, hi),
    };
    if lowest < min {
        return Err(bad(key, format!("must be at least {min}, got {lowest}")));
    }
    if highest > max {
        return Err(bad(key, format!("must be at most {max}, got {highest}")));
    }
    Ok(c)
}

/// `[workload]`, checked in the order its parts are read: the first error is the one reported.
fn workload(
    w: &RawWorkload,
    providers: &[NamedProvider],
    base: &Path,
) -> Result<Workload, Invalid> {
    let arrivals = arrivals(w)?;
    let (stop, per_session) = stop(w, arrivals)?;
    let rounds = within(
        "workload.rounds",
        u64::from(w.rounds),
        1,
        bounds::MAX_ROUNDS,
    )?;
    let write_fraction = write_fraction(w.write_fraction)?;
    let model_turn = w
        .model_turn
        .as_ref()
        .map(|t| model_turn(t, base))
        .transpose()?;
    let think_time = latency("workload.think_time", w.think_time.as_ref(), base)?;
    let parent_timeout = w
        .parent_timeout_ms
        .map(|ms| positive_millis("workload.parent_timeout_ms", ms))
        .transpose()?;
    let stop_at = w
        .stop_at_s
        .map(|s| seconds("workload.stop_at_s", s))
        .transpose()?;
    let subagents = w.subagents.as_ref().map(subagents).transpose()?;
    let calls_per_query = calls_per_query(&w.calls_per_query, rounds, subagents)?;
    makes_requests(calls_per_query, rounds, model_turn.as_ref(), subagents)?;
    open_loop_queries(stop, arrivals)?;
    let (tool_target, model_target, tools) = super::providers::targets(w, providers, base)?;
    if let (Some(turn), Target::Provider(i)) = (&model_turn, model_target) {
        within_output(turn, &providers[i])?;
    }
    Ok(Workload {
        subagents,
        arrivals,
        stop,
        calls_per_query,
        tokens_per_call: count(
            "workload.tokens_per_call",
            &w.tokens_per_call,
            0,
            bounds::MAX_TOKENS,
        )?,
        tool_target,
        tools,
        model_target,
        rounds: rounds as u32,
        model_turn,
        think_time,
        write_fraction,
        parent_timeout,
        stop_at,
        per_session,
    })
}

/// Who sends queries: closed-mode sessions, or an open-mode arrival rate (each mode refuses
/// the other's key).
fn arrivals(w: &RawWorkload) -> Result<Arrivals, Invalid> {
    match w.mode {
        RawMode::Closed => {
            if w.arrival_rate.is_some() {
                return Err(bad(
                    "workload.arrival_rate",
                    "is for mode = \"open\"; closed mode uses sessions",
                ));
            }
            let sessions = within(
                "workload.sessions",
                w.sessions.unwrap_or(1),
                1,
                bounds::MAX_SESSIONS,
            )?;
            Ok(Arrivals::Closed { sessions })
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
            Ok(Arrivals::Open {
                rate: positive("workload.arrival_rate", rate, bounds::MAX_ARRIVAL_RATE)?,
                poisson: w.arrival == RawArrival::Poisson,
            })
        }
    }
}

/// When no more queries start: after a number of queries, a duration, or (closed mode) a number
/// per session, exactly one of them; and the per-session count, if that is the one.
fn stop(w: &RawWorkload, arrivals: Arrivals) -> Result<(Stop, Option<u64>), Invalid> {
    const ONE_OF: &str = "set one of queries, duration_s and queries_per_session";
    match (w.queries, w.duration_s, w.queries_per_session) {
        (Some(n), None, None) => Ok((
            Stop::Queries(within("workload.queries", n, 1, bounds::MAX_QUERIES)?),
            None,
        )),
        (None, Some(s), None) => Ok((Stop::Duration(seconds("workload.duration_s", s)?), None)),
        (None, None, Some(m)) => {
            let key = "workload.queries_per_session";
            let Arrivals::Closed { sessions } = arrivals else {
                return Err(bad(key, "is for mode = \"closed\" (sessions)"));
            };
            let m = within(key, m, 1, bounds::MAX_QUERIES)?;
            let total = sessions.saturating_mul(m);
            if total > bounds::MAX_QUERIES {
                return Err(bad(
                    key,
                    format!(
                        "{sessions} sessions x {m} is {total} queries; at most {} are allowed",
                        bounds::MAX_QUERIES
                    ),
                ));
            }
            Ok((Stop::Queries(total), Some(m)))
        }
        (None, None, None) => Err(bad("workload.queries", ONE_OF)),
        _ => Err(bad(
            if w.queries_per_session.is_some() {
                "workload.queries_per_session"
            } else {
                "workload.duration_s"
            },
            format!("{ONE_OF}, not more"),
        )),
    }
}

/// The share of tool calls that write: from 0 to 1.
fn write_fraction(v: f64) -> Result<f64, Invalid> {
    if !(0.0..=1.0).contains(&v) {
        return Err(bad(
            "workload.write_fraction",
            format!("must be in [0, 1], got {v}"),
        ));
    }
    Ok(v)
}

/// The model turn between rounds: its tokens and its own latency, if it has one.
fn model_turn(t: &RawModelTurn, base: &Path) -> Result<ModelTurn, Invalid> {
    let prompt = within(
        "workload.model_turn.tokens",
        t.tokens,
        0,
        bounds::MAX_TOKENS,
    )?;
    let max_tokens = t
        .max_tokens
        .map(|m| within("workload.model_turn.max_tokens", m, 1, bounds::MAX_TOKENS))
        .transpose()?;
    Ok(ModelTurn {
        tokens: prompt.saturating_add(max_tokens.unwrap_or(0)),
        max_tokens,
        stream: t.stream,
        latency: latency("workload.model_turn.latency", t.latency.as_ref(), base)?,
        at: t.at,
    })
}

/// A latency distribution at `key`, if it is given (an empirical `file` is read from `base`).
fn latency(key: &str, raw: Option<&RawLatency>, base: &Path) -> Result<Option<Latency>, Invalid> {
    raw.map(|l| l.build(key, base).map_err(Invalid::from))
        .transpose()
}

/// `[workload.subagents]`: the count, each token budget, and the iteration cap.
fn subagents(a: &RawSubagents) -> Result<Subagents, Invalid> {
    let k = "workload.subagents";
    within(&format!("{k}.count"), a.count, 1, bounds::MAX_SUBAGENTS)?;
    let budgets = [
        ("budget_tokens", a.budget_tokens),
        ("orchestrator_budget", a.orchestrator_budget),
        ("synthesis_tokens", a.synthesis_tokens),
    ];
    for (key, tokens) in budgets {
        within(&format!("{k}.{key}"), tokens, 0, bounds::MAX_TOKENS)?;
    }
    if a.max_iterations == Some(0) {
        return Err(bad(
            &format!("{k}.max_iterations"),
            "must be at least 1 (omit it for no cap)",
        ));
    }
    Ok(Subagents {
        count: a.count,
        budget_tokens: a.budget_tokens,
        orchestrator_budget: a.orchestrator_budget,
        max_iterations: a.max_iterations,
        synthesis_tokens: a.synthesis_tokens,
    })
}

/// Refuses a model turn that asks for more output tokens than its provider gives one answer
/// (`max_output_tokens`): the provider would answer every turn 400, as the APIs do.
fn within_output(turn: &ModelTurn, to: &NamedProvider) -> Result<(), Invalid> {
    let most = to.config.max_output_tokens;
    match turn.max_tokens {
        Some(asked) if asked > most => Err(bad(
            "workload.model_turn.max_tokens",
            format!(
                "{asked} is above {}'s max_output_tokens ({most}): it would answer every model turn 400, as the APIs do; ask for at most {most}, or raise max_output_tokens",
                to.name
            ),
        )),
        _ => Ok(()),
    }
}

/// Refuses a workload whose queries never send a request: no tool call, no model turn, no
/// synthesis turn. Such a query takes no time, so a run of them measures
/// nothing and, with a duration, starts queries without end.
fn makes_requests(
    calls: Count,
    rounds: u64,
    model_turn: Option<&ModelTurn>,
    subagents: Option<Subagents>,
) -> Result<(), Invalid> {
    let most_calls = match calls {
        Count::Fixed(n) => n,
        Count::Uniform(_, hi) => hi,
    };
    let turns = model_turn.is_some_and(|t| t.turns(rounds as u32) > 0);
    let synthesis = subagents.is_some_and(|s| s.synthesis_tokens > 0);
    if most_calls == 0 && !turns && !synthesis {
        let why = if model_turn.is_some() {
            "rounds = 1, so its model turn between rounds is never taken"
        } else {
            "no [workload.model_turn]"
        };
        return Err(bad(
            "workload.calls_per_query",
            format!(
                "is 0 and a query sends no other request ({why}, no synthesis turn): its queries would measure nothing and never take time; give a query a call, or a model turn (model_turn.at = \"around\" takes rounds + 1)"
            ),
        ));
    }
    Ok(())
}

/// Tool calls per round, and the bound on a whole query's plan: calls × rounds × agents.
fn calls_per_query(
    raw: &RawCount,
    rounds: u64,
    subagents: Option<Subagents>,
) -> Result<Count, Invalid> {
    let calls_key = "workload.calls_per_query";
    let calls_per_query = count(calls_key, raw, 0, bounds::MAX_CALLS_PER_ROUND)?;
    // A query's plan is held while it runs: bound the whole of it, not only its parts.
    let largest = match calls_per_query {
        Count::Fixed(n) | Count::Uniform(_, n) => n,
    };
    let agents = subagents.map_or(1, |a| a.count);
    let planned = largest * rounds * agents;
    if planned > bounds::MAX_CALLS_PER_QUERY {
        return Err(bad(
            calls_key,
            format!(
                "a query could plan {largest} calls × {rounds} rounds × {agents} agents = {planned} calls; at most {} are allowed",
                bounds::MAX_CALLS_PER_QUERY
            ),
        ));
    }
    Ok(calls_per_query)
}

/// The bound on an open-loop run of a duration: its arrival rate × duration queries.
fn open_loop_queries(stop: Stop, arrivals: Arrivals) -> Result<(), Invalid> {
    if let (Stop::Duration(d), Arrivals::Open { rate, .. }) = (stop, arrivals) {
        let expected = rate * d.as_secs_f64();
        if expected > bounds::MAX_QUERIES as f64 {
            return Err(bad(
                "workload.duration_s",
                format!(
                    "{rate} queries/s for {} s is {expected:.0} queries; at most {} are allowed",
                    d.as_secs_f64(),
                    bounds::MAX_QUERIES
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a request that can never be served: more tokens than the provider's whole
/// per-minute limit (it would be refused or retried until the watchdog stops the run).
/// Every kind of request can be served by the provider it goes to: no more tokens than its
/// whole per-minute limit.
fn fits(w: &Workload, providers: &[NamedProvider]) -> Result<(), Invalid> {
    let most = |c: Count| match c {
        Count::Fixed(n) | Count::Uniform(_, n) => n,
    };
    let mut requests = vec![
        (
            "workload.tokens_per_call".to_string(),
            w.tools.is_empty().then(|| most(w.tokens_per_call)),
            w.tool_target,
        ),
        (
            "workload.model_turn.tokens".to_string(),
            w.model_turn.as_ref().map(|t| t.tokens),
            w.model_target,
        ),
        (
            "workload.subagents.synthesis_tokens".to_string(),
            w.subagents.map(|s| s.synthesis_tokens),
            w.model_target,
        ),
    ];
    for (i, t) in w.tools.iter().enumerate() {
        let (key, tokens) = match t.tokens {
            Some(c) => (format!("workload.tools[{i}].tokens"), most(c)),
            None => (
                "workload.tokens_per_call".to_string(),
                most(w.tokens_per_call),
            ),
        };
        requests.push((key, Some(tokens), t.target));
    }
    let max_tokens = w.model_turn.as_ref().and_then(|t| t.max_tokens);
    for (key, tokens, target) in requests {
        let Target::Provider(p) = target else {
            continue;
        };
        let Some(n) = tokens else {
            continue;
        };
        let config = &providers[p].config;
        let limit = |name: &str| match providers.len() {
            1 => format!("provider.{name}"),
            _ => format!("providers.{}.{name}", providers[p].name),
        };
        // A model turn's prompt goes to itpm, its max_tokens to otpm; a tool's tokens are input.
        let output = match key.as_str() {
            "workload.model_turn.tokens" => max_tokens.unwrap_or(0),
            _ => 0,
        };
        let checks = [
            (key.clone(), "tpm", config.tpm, n, "tokens"),
            (key.clone(), "itpm", config.itpm, n - output, "input tokens"),
            (
                "workload.model_turn.max_tokens".to_string(),
                "otpm",
                config.otpm,
                output,
                "output tokens",
            ),
        ];
        for (key, name, per_minute, cost, what) in checks {
            if let Some(pm) = per_minute.filter(|&pm| cost as f64 > pm) {
                return Err(bad(
                    &key,
                    format!(
                        "a request of {cost} {what} can never be served under {} = {pm}: it is more than the whole per-minute limit",
                        limit(name)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn scheduler(s: &RawScheduler, base: &Path) -> Result<SchedulerSettings, Invalid> {
    let headroom = headroom("scheduler.headroom", s.headroom.unwrap_or(1.0))?;
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
    let timeout = positive_millis("scheduler.timeout_ms", s.timeout_ms.unwrap_or(60_000.0))?;
    let concurrency = super::concurrency::concurrency(s.max_concurrency.as_ref())?;
    let tools = s.max_parallel_tools.unwrap_or(0);
    let tools = within(
        "scheduler.max_parallel_tools",
        tools,
        0,
        bounds::MAX_CALLS_PER_ROUND,
    )?;
    Ok(SchedulerSettings {
        max_concurrency: concurrency.max,
        adaptive: concurrency.adaptive,
        headroom,
        rate_limit: s.rate_limit.unwrap_or(false),
        burst_s: positive(
            "scheduler.burst_s",
            s.burst_s.unwrap_or(1.0),
            bounds::MAX_BURST_S,
        )?,
        retry: retry(s.retry.as_ref())?,
        retry_preset: preset(s.retry.as_ref())?.name(),
        timeout,
        turn: TurnPolicy {
            max_parallel: tools as usize,
            over_cap,
        },
        transport_cancel: s.transport_cancel.unwrap_or(true),
        client: super::client::client(s.client.as_ref(), base)?,
    })
}

/// A scenario's `name`, which names its output folder: not empty, at most
/// [`bounds::MAX_NAME_CHARS`] characters, no control characters, slashes or leading dot. The
/// error's key is `name`; a flag that gives one (`calibrate --name`) names itself instead.
pub fn name(name: &str) -> Result<(), Invalid> {
    if name.trim().is_empty() {
        return Err(bad("name", "must not be empty"));
    }
    if name.chars().count() > bounds::MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(bad(
            "name",
            format!(
                "names the output folder: at most {} characters and no control characters",
                bounds::MAX_NAME_CHARS
            ),
        ));
    }
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(bad(
            "name",
            format!("names the output folder: no slashes or leading dot, got {name:?}"),
        ));
    }
    Ok(())
}

/// Validates a raw scenario; `base` is the folder relative files are read from.
pub(super) fn validate(raw: RawScenario, base: &Path) -> Result<Scenario, Invalid> {
    name(&raw.name)?;
    let (providers, named_providers) = super::providers::providers(&raw, base)?;
    let workload = workload(&raw.workload, &providers, base)?;
    fits(&workload, &providers)?;
    super::providers::phases_in_run(&workload, &providers, named_providers)?;
    let (slo, slo_tolerance) = raw
        .slo
        .as_ref()
        .map(sweep_slo::slo)
        .transpose()?
        .unwrap_or_default();
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        seed: bounds::seed("seed", raw.seed)?,
        providers,
        named_providers,
        workload,
        scheduler: scheduler(&raw.scheduler, base)?,
        fleet: super::fleet::fleet(raw.fleet.as_ref())?,
        sweep: raw
            .sweep
            .as_ref()
            .map(sweep_slo::axes)
            .transpose()?
            .unwrap_or_default(),
        prefer: raw
            .sweep
            .as_ref()
            .map(sweep_slo::prefer)
            .transpose()?
            .flatten(),
        slo,
        slo_tolerance,
        check: super::check::check(raw.check.as_ref())?,
    })
}
