//! `capsize sweep` and `capsize plan`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{default_out, out, realtime_options, ClockArgs, Failure};
use crate::analysis::plan::{self, PlanInput};
use crate::engine::scenario::bounds;
use crate::engine::sim;
use crate::output::files::OutputSet;
use crate::output::report::escape;
use crate::output::sweep::{self, report as capacity, table, Grid, GridError, SweepOptions};

/// Flags of `capsize sweep`.
#[derive(Debug, ClapArgs)]
pub struct SweepArgs {
    /// The scenario file (TOML) with a [sweep] table (or give --sweep).
    scenario: PathBuf,
    /// Sweep a key over values (repeatable; replaces the [sweep] entry of the same key):
    /// --sweep scheduler.max_concurrency=1,2,4,8 or =1..=64 or ='{ from = 0.5, to = 1, step = 0.1 }'.
    #[arg(long = "sweep", value_name = "KEY.PATH=VALUES")]
    sweeps: Vec<String>,
    /// Override any scalar key at every point (repeatable).
    #[arg(long = "set", value_name = "KEY.PATH=VALUE")]
    sets: Vec<String>,
    /// Override the scenario's seed (each point's seeds derive from it; 0 to
    /// 9223372036854775807).
    #[arg(long, value_parser = super::seed_flag)]
    seed: Option<u64>,
    /// Runs per point, each with its own seed: means with 95 % confidence intervals.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeats: u32,
    /// Points run at once (default: the number of cores). Real time runs one at a time.
    #[arg(long)]
    jobs: Option<usize>,
    /// Run a grid of more than 10,000 points.
    #[arg(long)]
    force: bool,
    /// Output folder (default: reports/<scenario name>/).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    clock: ClockArgs,
}

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
    let mut input = match &args.scenario {
        Some(path) => match crate::engine::scenario::load(path, &[]) {
            Ok(s) => PlanInput::from_scenario(&s),
            Err(e) => return Failure::bad_input(e).exit(),
        },
        None => PlanInput::default(),
    };
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
    let rows = plan::plan(&input);
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

/// `capsize sweep`.
pub fn sweep(args: SweepArgs) -> ExitCode {
    let realtime = match realtime_options(&args.clock) {
        Ok(r) => r,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let mut sets = args.sets.clone();
    if let Some(seed) = args.seed {
        sets.push(format!("seed={seed}"));
    }
    let grid = match Grid::build(&args.scenario, &sets, &args.sweeps, args.force) {
        Ok(g) => g,
        Err(GridError::Scenario(e)) => return Failure::bad_input(e).exit(),
        Err(GridError::Flag(e)) => return Failure::bad_input(e).exit(),
    };
    let first = &grid.points[0].1;
    if let Err(e) = crate::analysis::check::validate(&first.slo, &first.slo_tolerance) {
        return Failure::bad_input(format!("{}: {e}", args.scenario.display())).exit();
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Failure::bad_input("--jobs 0: at least one").exit();
    }
    let dir = default_out(&args.out, &first.name);
    let mut outputs = OutputSet::new();
    outputs.scenario(&args.scenario, &sets);
    capacity::declare(&mut outputs, &dir);
    if let Err(e) = outputs.check() {
        return Failure::output(&e).exit();
    }
    let opts = SweepOptions {
        repeats: args.repeats,
        jobs,
        realtime: realtime.clone(),
    };
    let points = match sweep::run(&grid, &opts) {
        Ok(p) => p,
        Err(e) => return Failure::run_failed(e).exit(),
    };
    let base = &grid.points[0].1;
    let slo = &base.slo;
    let csv = match table::csv(&points, slo) {
        Ok(c) => c,
        Err(e) => return Failure::write_failed(e).exit(),
    };
    let rec = table::recommend(&points, slo);
    let rpm = base.provider.rpm;
    let mut charts = capacity::sweep_charts(&points, rpm);
    if let Some(r) = &rec {
        // The recommended point again, for its histograms and time series (same seed: same run).
        let s = &points[r.index].scenario;
        let outcome = match &realtime {
            None => sim::run(s),
            Some(o) => sim::run_realtime(s, o),
        };
        match outcome {
            Ok(o) => charts.extend(capacity::point_charts(
                &o.recording,
                rpm,
                s.scheduler.headroom,
            )),
            Err(e) => return Failure::run_failed(e).exit(),
        }
    }
    let mut svgs = Vec::new();
    for (stem, chart) in &charts {
        match crate::output::report::charts::svg(chart) {
            Ok(svg) => svgs.push((*stem, svg)),
            Err(e) => return Failure::write_failed(e).exit(),
        }
    }
    let (md, html) = capacity::render(&points, slo, rec.as_ref(), &svgs);
    // Bound after the charts, which its PNGs borrow until the commit.
    let mut outputs = outputs;
    outputs.put(dir.join(capacity::CSV), csv);
    capacity::put(&mut outputs, &dir, &md, &html, &charts, svgs);
    if let Err(e) = outputs.commit() {
        return Failure::output(&e).exit();
    }
    let headline = md
        .lines()
        .find(|l| l.starts_with("**") || l.starts_with("No point"))
        .unwrap_or("")
        .replace("**", "");
    out(&format!(
        "{} points x {} runs of {}\n{headline}\n  wrote {}/{{sweep.csv, report.md, report.html, *.svg, *.png}}\n",
        points.len(),
        args.repeats,
        escape::terminal(&base.name),
        escape::terminal(&dir.display().to_string())
    ))
}
