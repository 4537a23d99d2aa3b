//! `capsize plan`: the closed-form rate-limit arithmetic, from a scenario, flags, or both.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{out, Failure};
use crate::analysis::plan::{self, PlanInput};
use crate::engine::scenario::bounds;

/// Flags of `capsize plan`.
#[derive(Debug, ClapArgs)]
pub struct PlanArgs {
    /// A scenario file to take the numbers from (flags override them).
    scenario: Option<PathBuf>,
    /// Provider requests per minute.
    #[arg(long)]
    rpm: Option<f64>,
    /// Provider tokens per minute.
    #[arg(long)]
    tpm: Option<f64>,
    /// Tool calls per query (in parallel).
    #[arg(long)]
    calls_per_query: Option<f64>,
    /// Mean latency of a call, ms.
    #[arg(long)]
    latency_ms: Option<f64>,
    /// Tokens per call.
    #[arg(long)]
    tokens_per_call: Option<f64>,
    /// Share of the limits the client allows itself, in (0, 1].
    #[arg(long)]
    headroom: Option<f64>,
    /// Calls in flight at once (0: unbounded).
    #[arg(long)]
    max_concurrency: Option<u32>,
    /// A burst arrival rate, calls/s (for the TPM-exhaustion rows).
    #[arg(long)]
    burst_calls_per_s: Option<f64>,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

/// A plan flag, checked by the bound the scenario key it stands for has.
fn flag<T>(
    name: &str,
    v: Option<T>,
    check: impl Fn(&str, T) -> Result<f64, bounds::Invalid>,
) -> Result<Option<f64>, String> {
    v.map(|x| check(&format!("--{name}"), x))
        .transpose()
        .map_err(|e| format!("{}: {}", e.key, e.message))
}

/// `capsize plan`.
pub fn plan(args: PlanArgs) -> ExitCode {
    let scenario = match &args.scenario {
        Some(path) => match crate::engine::scenario::load(path, &[]) {
            Ok(s) => Some(s),
            Err(e) => return Failure::bad_input(e).exit(),
        },
        None => None,
    };
    if let Some(s) = &scenario {
        super::warn(s);
    }
    let mut input = scenario
        .as_ref()
        .map_or_else(PlanInput::default, PlanInput::from_scenario);
    let checked = (|| -> Result<(), String> {
        let count = |max: u64| move |k: &str, v: f64| bounds::positive(k, v, max as f64);
        if let Some(v) = flag("rpm", args.rpm, bounds::per_minute)? {
            input.rpm = Some(v);
        }
        if let Some(v) = flag("tpm", args.tpm, bounds::per_minute)? {
            input.tpm = Some(v);
        }
        let calls = count(bounds::MAX_CALLS_PER_ROUND);
        if let Some(v) = flag("calls-per-query", args.calls_per_query, calls)? {
            input.calls_per_query = v;
        }
        let tokens = count(bounds::MAX_TOKENS);
        if let Some(v) = flag("tokens-per-call", args.tokens_per_call, tokens)? {
            input.tokens_per_call = v;
        }
        let latency = |k: &str, v: f64| bounds::positive_millis(k, v).map(|_| v);
        if let Some(v) = flag("latency-ms", args.latency_ms, latency)? {
            // A flag gives a mean only: the distribution's shape is no longer known.
            input.latency_mean_ms = v;
            input.latency_uniform_ms = None;
            input.latency = None;
        }
        if let Some(h) = flag("headroom", args.headroom, bounds::headroom)? {
            input.headroom = h;
        }
        let concurrency = |k: &str, v: u32| {
            bounds::count(k, u64::from(v), 0, bounds::MAX_CONCURRENCY).map(|c| c as f64)
        };
        if let Some(c) = flag("max-concurrency", args.max_concurrency, concurrency)? {
            input.max_concurrency = (c > 0.0).then_some(c as u32);
        }
        let rate = |k: &str, v: f64| bounds::positive(k, v, bounds::MAX_CALL_RATE);
        if let Some(v) = flag("burst-calls-per-s", args.burst_calls_per_s, rate)? {
            input.burst_calls_per_s = Some(v);
        }
        Ok(())
    })();
    if let Err(e) = checked {
        return Failure::bad_input(e).exit();
    }
    let rows = match &scenario {
        Some(s) if input == PlanInput::from_scenario(s) => plan::plan_scenario(s),
        _ => plan::plan(&input),
    };
    if args.json {
        match serde_json::to_string_pretty(&rows) {
            Ok(j) => out(&format!("{j}\n")),
            Err(e) => Failure::write_failed(e).exit(),
        }
    } else if rows.is_empty() {
        Failure::bad_input("nothing to compute: give a scenario or numbers (--rpm, --tpm, --calls-per-query, --latency-ms, ...)").exit()
    } else {
        out(&plan::render(&rows))
    }
}
