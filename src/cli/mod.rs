//! The command line: parses arguments and hands each subcommand to the library.
//!
//! Exit codes: 0 success; 1 a check failed (the CI gate); 2 bad input (flags, scenario files);
//! 4 the run could not finish (watchdog, or a provider that cannot be started or reached); 5
//! the outputs could not be written. A provider that answers something unreadable (a malformed
//! rate-limit header) is bad input: 2. `capsize check` also exits 2 when its run cannot be
//! done, so a CI gate has three outcomes: 0 pass, 1 fail, 2 could not check. `capsize exec`
//! adds 3, its `--timeout` stopped the agent, and 129 / 130 / 143, capsize got SIGHUP / SIGINT
//! / SIGTERM and stopped the agent (outputs written in these cases); a COMMAND not found is bad input (2),
//! and an agent that fails is not an error of capsize's (its exit code is in summary.json).
//! `capsize sweep` exits 130 / 143 when it got SIGINT / SIGTERM: the points that finished are
//! written, marked partial (nothing if none finished); a second signal exits at once with its
//! own code, writing nothing. Other commands die of these signals as the shell reports them.

use std::path::PathBuf;
use std::process::ExitCode;

mod calibrate;
mod check;
mod compare;
mod examples;
mod exec;
mod failure;
mod interrupt;
mod merge;
mod plan;
mod run;
mod search;
mod sweep;

use clap::{Args as ClapArgs, Parser, Subcommand};

use crate::engine::scenario::Scenario;
use crate::engine::sim::replica::ReplicaOf;
use crate::engine::sim::{RealtimeOptions, RunExtras, SimError, SimOutcome};
use crate::output::files::OutputError;
use crate::output::report::escape;
pub(crate) use failure::Failure;

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for a simulation that could not finish.
pub const EXIT_RUN_FAILED: u8 = 4;
/// Exit code for outputs that could not be written.
pub const EXIT_WRITE_FAILED: u8 = 5;

/// `capsize --version`: the version and the commit it was built from (build.rs: `unknown`
/// for a build outside a git checkout that was not given `CAPSIZE_COMMIT`).
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CAPSIZE_COMMIT"),
    ")"
);

/// Size the concurrency and rate-limit headroom of LLM agent tool calls.
///
/// capsize drives a real scheduler (bounded fan-out, RPM/TPM token buckets, retry with jitter
/// and Retry-After, cancellation, read/write dispatch, budgets) against a provider that behaves
/// like a rate-limited LLM API, in virtual time or real time, and reports what max_concurrency
/// and headroom to run at.
#[derive(Debug, Parser)]
#[command(name = "capsize", version = LONG_VERSION, about, long_about)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the article's scheduler examples in virtual time and print what was measured.
    Demo,
    /// List the example scenarios built into capsize, or write one out to start from.
    ///
    /// `capsize examples` lists them with what each shows; `capsize examples NAME` writes
    /// NAME.toml into the current folder (or --out, a file or a folder), refusing to replace a
    /// file that is there without --force.
    Examples(examples::ExamplesArgs),
    /// Run a scenario file and report latency, throughput and 429s.
    ///
    /// In virtual time by default (fast, deterministic); --mode realtime runs it over HTTP
    /// against the mock provider. Writes summary.json, query_latency.hgrm and call_latency.hgrm into --out (default
    /// capsize-out/<name>/) and prints a summary table (or, with --json, summary.json);
    /// --timeseries adds timeseries.csv. A real-time run on a terminal shows a live status line.
    Run(run::RunArgs),
    /// Run a scenario over a grid of settings and write a capacity report.
    ///
    /// The grid comes from the scenario's [sweep] table and --sweep flags. Writes sweep.csv,
    /// charts (SVG and PNG), report.md and report.html into --out (default capsize-out/<name>/).
    Sweep(sweep::SweepArgs),
    /// Make a sharded sweep's outputs from its shards, or a fleet's summary from its replicas.
    ///
    /// Shards (`capsize sweep --shard I/N`): checks they are the whole of one sweep (the same
    /// capsize, scenario file, flags and shard count; every shard once, every run in it), reads
    /// the scenario again (from where the shards were given it, or --scenario) and writes
    /// sweep.csv, report.md, report.html and the charts into --out (default
    /// capsize-out/<name>/): byte for byte what the unsharded sweep writes. Replicas (`capsize
    /// run --replica I/K`): checks they are every replica of one run, adds what they recorded
    /// (histograms, counters, the per-second series) and writes the fleet's summary.json and
    /// .hgrm files. Agents' replicas (`capsize exec --replica I/K`): every agent's end and the
    /// target's last reading, as exec's summary.json and charts (default
    /// capsize-out/<name>/exec/). Exit 2 when a piece is missing, given twice or of another
    /// sweep or run.
    Merge(merge::MergeArgs),
    /// Find the largest (--max) or smallest (--min) value of one key that meets the objectives,
    /// or (--over KEY --min METRIC) the passing value with the least mean of a metric.
    ///
    /// Brackets from the scenario's own value (or --from) by doubling or halving, then bisects:
    /// to the integer for an integer key, to --precision for a fractional one. Each probe runs
    /// --repeats seeds and passes as a sweep's point does (every [slo] objective on the mean,
    /// the busiest minute under RPM x headroom); a probe whose seeds disagree runs more, up to
    /// --max-repeats. Prints each probe and the answer; writes search.csv into --out (default
    /// capsize-out/<name>/search/).
    Search(search::SearchArgs),
    /// Print the closed-form rate-limit arithmetic, no simulation.
    Plan(plan::PlanArgs),
    /// Reproduce the article: run scenarios/article/ and write its claims table.
    ///
    /// Writes capsize-out/article/README.md (or --out DIR) and each scenario's summary.json.
    Article {
        /// The folder of the article's scenarios.
        #[arg(long, default_value = "scenarios/article")]
        scenarios: PathBuf,
        /// Output folder.
        #[arg(long, default_value = "capsize-out/article")]
        out: PathBuf,
    },
    /// Gate CI: run a scenario and check its [slo] objectives and, with --baseline, its
    /// metrics against a baseline run (all but the *.max ones, or those --metrics chooses).
    ///
    /// Virtual time by default, so the gate is deterministic. Prints a table of the checks
    /// (--only-failures: the failed ones). A tolerance is 5% or 0.05; a bare 5 is refused.
    /// Exit 0 when all pass, 1 when an objective or a baseline comparison fails, 2 on bad input
    /// (scenario, flags, an unknown metric, a missing or mismatched baseline) or a run that
    /// could not be done, 5 when an output cannot be written.
    Check(check::CheckArgs),
    /// Write a baseline for `capsize check --baseline`: the summary.json of a clean run.
    Baseline(check::BaselineArgs),
    /// Compare two runs or two sweeps: the figures that moved beyond their noise.
    ///
    /// A and B are each a summary.json (a run), a sweep.csv (a sweep), or the folder holding
    /// one; a run is not compared with a sweep. Two runs: throughput, query and call
    /// percentiles, the share of 429s and of failed queries, requests, tokens and retries per
    /// query started, each provider's, with A, B, the change and a verdict (better, worse,
    /// within noise, no change; no interval without the .hgrm files beside summary.json).
    /// Two sweeps: points matched by their swept values, each metric moved when the change
    /// exceeds the two 95 % intervals combined (--repeats 2 or more; one run per point has
    /// none). Warns on stderr when summary.json or report.md shows the two were not run on the
    /// same load (another scenario or mode, queries started that no one stop explains); seeds
    /// may differ. Exit 0, or with --fail-on-worse 1 when a figure got worse beyond its noise;
    /// 2 when an input is missing, unreadable or not a run or a sweep.
    Compare(compare::CompareArgs),
    /// Run your own agent (any command) against the mock provider and report what it did.
    ///
    /// Serves the scenario's [provider] on a free loopback port in real time and runs COMMAND
    /// with OPENAI_BASE_URL=http://HOST:PORT/v1, ANTHROPIC_BASE_URL=http://HOST:PORT,
    /// CAPSIZE_MOCK_URL=http://HOST:PORT, OPENAI_API_KEY and ANTHROPIC_API_KEY set to a dummy
    /// key (always: a real key never leaves the machine) and 127.0.0.1 added to NO_PROXY;
    /// {address} in an argument becomes HOST:PORT. Its [workload] and [scheduler] are not used.
    /// Writes summary.json (mode "exec": requests, 429s, errors, tokens, the busiest 60 s,
    /// requests in flight, retries and the wait before each, orphans, the agent's exit code and
    /// wall time) and charts (SVG and PNG) into --out (default capsize-out/<name>/exec/).
    ///
    /// An agent that fails (exits non-zero) is reported, not an error: its exit code is in
    /// summary.json, capsize says it failed on stderr and exits 0 (with --check, 0 or 1 on the
    /// objectives). Exit 2 if COMMAND is not found (nothing written). On --timeout, or SIGINT,
    /// SIGTERM or SIGHUP to capsize, the agent's process group gets SIGTERM, then SIGKILL after
    /// 5 s, the outputs are written with what was seen, and capsize exits 3 (timeout), 130
    /// (SIGINT), 143 (SIGTERM) or 129 (SIGHUP). Whatever the agent leaves running in its process group when it exits is
    /// killed.
    ///
    /// --target URL sends the agent to a capsize mock already running (checked to serve the
    /// scenario's provider, reset first, read after). Agents that scale out run as K processes,
    /// each `--replica I/K --run-id ID --target URL --fleet-redis URL`: they start together
    /// on Redis, each writes replica-I-of-K/replica.json, and `capsize merge` writes the
    /// fleet's summary.
    Exec(exec::ExecArgs),
    /// Measure a scenario from your own traces, request logs or exec recordings, and check it.
    ///
    /// Reads each INPUT by its content (OTLP JSON traces with the GenAI semantic conventions,
    /// capsize exec's calls.jsonl, or a CSV / JSON-lines request log), fits each provider's and
    /// tool's latency and tokens, error rates, the query's shape (model turns, rounds, tool
    /// calls a round, tool mix) and the arrival process, each by a stated goodness-of-fit
    /// measure (Kolmogorov-Smirnov). Writes scenario.toml (every value commented with its
    /// source and fit; empirical distributions as files beside it) and calibration.md / .html
    /// (the fit table, the structure found, the check, what was assumed and skipped) into --out
    /// (default capsize-out/<--name>/). The check replays the observed conditions through the
    /// calibrated scenario in virtual time and compares query p50/p95/p99, model call p50/p95,
    /// throughput, requests, 429s and failures. What the input cannot say (the provider's limits, the client's
    /// settings) comes from --set and is otherwise written as assumed. Exit 2 on an input that
    /// cannot be read, 4 if the check cannot run, 5 if an output cannot be written.
    Calibrate(calibrate::CalibrateArgs),
    /// Serve the mock provider over HTTP: a rate-limited LLM API for real agents and SDKs.
    ///
    /// The same provider model as the simulator, behind OpenAI- and Anthropic-compatible
    /// endpoints (POST /v1/chat/completions, POST /v1/messages, POST /tools/NAME, GET /stats,
    /// GET /report, GET /config, POST /reset, GET /healthz). Prints its address as the first line on stdout; stops on Ctrl-C or
    /// SIGTERM. Also installed as the `capsize-mock` binary.
    Mock(capsize_mock::cli::MockArgs),
}

/// The scenario to run and how (shared by `run`, `check` and `baseline`).
#[derive(Debug, ClapArgs)]
pub(crate) struct ScenarioArgs {
    /// The scenario file (TOML).
    scenario: PathBuf,
    /// Override the scenario's seed (0 to 9223372036854775807, so it can be written back into
    /// a scenario file).
    #[arg(long, value_parser = seed_flag)]
    seed: Option<u64>,
    /// Override any key (repeatable): a scalar, e.g. --set scheduler.max_concurrency=8, or an
    /// inline table, e.g. --set provider.latency='{ dist = "uniform", min_ms = 200, max_ms = 900 }'.
    #[arg(long = "set", value_name = "KEY.PATH=VALUE")]
    sets: Vec<String>,
    #[command(flatten)]
    clock: ClockArgs,
}

/// Which clock a run uses (shared by `run` and `sweep`).
#[derive(Debug, ClapArgs)]
pub(crate) struct ClockArgs {
    /// virtual: a virtual clock (capsize-des, a discrete-event executor) against the
    /// in-process provider model (fast, exact, deterministic); realtime: the real clock, over
    /// HTTP to the mock provider.
    #[arg(long, value_enum, default_value_t = Mode::Virtual)]
    mode: Mode,
    /// Real time only: run F times faster than model time (every duration / F, every rate
    /// x F); every figure reported is converted back to model time.
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    time_scale: Option<f64>,
    /// Real time only: send to this running capsize-mock (e.g. http://127.0.0.1:8080) instead
    /// of starting one in-process. It must serve GET /stats and GET /healthz.
    #[arg(long, value_name = "URL")]
    target: Option<String>,
    /// Real time only: the Redis (redis://host:port) on which a fleet with limiter = "shared"
    /// keeps its limiter: each replica's scheduler reserves there, on a connection of its own.
    #[arg(long, value_name = "URL")]
    fleet_redis: Option<String>,
}

/// How a scenario is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// Virtual time.
    Virtual,
    /// Real time over HTTP.
    Realtime,
}

/// A `--seed` flag: the range a scenario's `seed` takes.
pub(crate) fn seed_flag(s: &str) -> Result<u64, String> {
    let v: u64 = s.trim().parse().map_err(|_| {
        format!(
            "{s:?} is not a whole number from 0 to {}",
            crate::engine::scenario::bounds::MAX_SEED
        )
    })?;
    crate::engine::scenario::bounds::seed("--seed", v).map_err(|e| e.message)
}

/// The folder every command writes under by default, in the working directory: not the
/// repository's committed `reports/`.
pub(crate) const DEFAULT_OUT: &str = "capsize-out";

/// Where a command writes by default: `capsize-out/<scenario name>/`.
pub(crate) fn default_out(out: &Option<PathBuf>, name: &str) -> PathBuf {
    out.clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_OUT).join(name))
}

/// The real-time options, if the flags ask for real time; flags that only real time takes
/// are an error in virtual mode. `single_run`: the command runs its scenario once (a target
/// that cannot be reset may serve it; see [`RealtimeOptions::single_run`]).
pub(crate) fn realtime_options(
    args: &ClockArgs,
    single_run: bool,
) -> Result<Option<RealtimeOptions>, String> {
    if args.mode == Mode::Virtual {
        if args.time_scale.is_some() || args.target.is_some() || args.fleet_redis.is_some() {
            return Err(
                "--time-scale, --target and --fleet-redis apply to --mode realtime only".into(),
            );
        }
        return Ok(None);
    }
    let time_scale = args.time_scale.unwrap_or(1.0);
    if !(time_scale.is_finite() && (0.001..=1e6).contains(&time_scale)) {
        return Err(format!(
            "--time-scale {time_scale}: must be a number from 0.001 to 1000000"
        ));
    }
    if let Some(url) = &args.target {
        check_target(url)?;
    }
    if let Some(url) = &args.fleet_redis {
        check_redis(url)?;
    }
    Ok(Some(RealtimeOptions {
        announce: None,
        time_scale,
        target: args.target.clone(),
        fleet_redis: args.fleet_redis.clone(),
        single_run,
        replica: None,
    }))
}

/// Refuses a `--target` that is not an `http://` URL.
pub(crate) fn check_target(url: &str) -> Result<(), String> {
    if !url.starts_with("http://") || url.len() <= "http://".len() {
        return Err(format!(
            "--target {url:?}: must be an http:// URL, e.g. http://127.0.0.1:8080"
        ));
    }
    Ok(())
}

/// Refuses a `--fleet-redis` that is not a `redis://` (or `rediss://`) URL.
pub(crate) fn check_redis(url: &str) -> Result<(), String> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(format!(
            "--fleet-redis {:?}: must be a redis:// URL, e.g. redis://127.0.0.1:6379",
            capsize_scheduler::limit::shared::redact_url(url)
        ));
    }
    Ok(())
}

/// Loads the scenario with its overrides (and seed).
impl ScenarioArgs {
    /// The `--set` arguments, and `--seed` as one more (`seed=N`): how the run can be loaded
    /// again elsewhere (`capsize merge` of a fleet's replicas).
    pub(crate) fn sets_with_seed(&self) -> Vec<String> {
        let mut sets = self.sets.clone();
        sets.extend(self.seed.map(|s| format!("seed={s}")));
        sets
    }
}

pub(crate) fn load(args: &ScenarioArgs) -> Result<Scenario, Failure> {
    let mut scenario =
        crate::engine::scenario::load(&args.scenario, &args.sets).map_err(Failure::bad_input)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    Ok(scenario)
}

/// Prints, once, each setting of `scenario` that is valid but cannot work as meant
/// ([`crate::engine::scenario::sanity`]): `capsize: warning: ...` on stderr, not an error.
pub(crate) fn warn(scenario: &Scenario) {
    for w in crate::engine::scenario::sanity::warnings(scenario) {
        eprintln!("capsize: warning: {}", escape::terminal(&w));
    }
}

/// Has real-time work say up front, on stderr, how long it will take when that is a minute or
/// more of wall time: `what` ("this run", "this sweep") of `scenarios`, each run `repeats`
/// times one after another, at `realtime`'s time scale. The line is said by the first run once
/// it is set up (its mock started, its target and Redis reached), so a run refused at setup
/// still fails in one line. Nothing in virtual time, or when no rate is known.
pub(crate) fn announce_wall<'a>(
    what: &str,
    scenarios: impl IntoIterator<Item = &'a Scenario>,
    repeats: usize,
    realtime: Option<&mut RealtimeOptions>,
) {
    let Some(opts) = realtime else {
        return;
    };
    let mut model_s = 0.0;
    for s in scenarios {
        let Some(secs) = crate::analysis::plan::Demand::of(s).model_seconds(s) else {
            return;
        };
        model_s += secs * repeats as f64;
    }
    let wall_s = model_s / opts.time_scale;
    if wall_s >= 60.0 {
        opts.announce = Some(crate::engine::sim::Announcement::new(format!(
            "capsize: {what} will take about {} of wall time ({} of model time at --time-scale {})",
            about(wall_s),
            about(model_s),
            opts.time_scale
        )));
    }
}

/// `45 s`, `12 min`, `2.5 h`: a duration for a sentence, to two significant digits.
fn about(secs: f64) -> String {
    let two = |v: f64| {
        let digits = 10f64.powi(1 - v.abs().max(1e-9).log10().floor() as i32);
        crate::fmt::fmt_num((v * digits).round() / digits)
    };
    match secs {
        s if s < 120.0 => format!("{} s", two(s)),
        s if s < 7_200.0 => format!("{} min", two(s / 60.0)),
        s => format!("{} h", two(s / 3_600.0)),
    }
}

/// Runs a loaded scenario in virtual time, or in real time with `realtime`.
pub(crate) fn run_in(
    scenario: &Scenario,
    realtime: Option<&RealtimeOptions>,
) -> Result<SimOutcome, Failure> {
    run_in_with(scenario, realtime, RunExtras::default())
}

/// [`run_in`], recording and showing `extras` too.
pub(crate) fn run_in_with(
    scenario: &Scenario,
    realtime: Option<&RealtimeOptions>,
    extras: RunExtras,
) -> Result<SimOutcome, Failure> {
    let result = match realtime {
        None => crate::engine::sim::run_with(scenario, extras),
        Some(opts) => crate::engine::sim::run_realtime_with(scenario, opts, extras),
    };
    result.map_err(|e| {
        if is_bad_input(&e) {
            Failure::bad_input(e)
        } else {
            Failure::run_failed(e)
        }
    })
}

/// Whether a run failed on bad input (exit 2) rather than could not finish (exit 4): a
/// configuration the scheduler refuses however it got past validation, a provider that sends
/// something unreadable, a mock at the target that serves another model.
pub(crate) fn is_bad_input(e: &SimError) -> bool {
    matches!(
        e,
        SimError::BadProvider(_) | SimError::Config(_) | SimError::Mismatch(_)
    )
}

/// Refuses, before the first of them runs, real-time options that cannot serve every one of
/// `points` (a shared fleet with no `--fleet-redis`, or a `--fleet-redis` none of them uses).
pub(crate) fn preflight<'a>(
    realtime: Option<&RealtimeOptions>,
    points: impl IntoIterator<Item = &'a Scenario>,
) -> Result<(), Failure> {
    let Some(opts) = realtime else {
        return Ok(());
    };
    if opts.replica.is_some() {
        // A replica in a process of its own starts on its Redis whatever its limiter; the run
        // checks the rest.
        return Ok(());
    }
    crate::engine::sim::fleet::check(points, opts.fleet_redis.is_some()).map_err(Failure::bad_input)
}

/// Loads the scenario, gives it to `before_run` (which refuses what can be refused before the
/// run, such as its outputs), and runs it.
pub(crate) fn load_and_run(
    args: &ScenarioArgs,
    before_run: impl FnOnce(&Scenario) -> Result<(), Failure>,
) -> Result<(Scenario, SimOutcome), Failure> {
    load_and_run_with(args, RunExtras::default(), None, before_run)
}

/// [`load_and_run`], recording and showing `extras` too.
pub(crate) fn load_and_run_with(
    args: &ScenarioArgs,
    extras: RunExtras,
    replica: Option<ReplicaOf>,
    before_run: impl FnOnce(&Scenario) -> Result<(), Failure>,
) -> Result<(Scenario, SimOutcome), Failure> {
    let mut realtime = realtime_options(&args.clock, true).map_err(Failure::bad_input)?;
    if let Some(r) = replica {
        match realtime.as_mut() {
            Some(opts) => opts.replica = Some(r),
            None => {
                return Err(Failure::bad_input(format!(
                    "--replica {}: a fleet's replicas in separate processes run in real time: add --mode realtime",
                    r.label()
                )))
            }
        }
    }
    let scenario = load(args)?;
    preflight(realtime.as_ref(), [&scenario])?;
    before_run(&scenario)?;
    warn(&scenario);
    announce_wall("this run", [&scenario], 1, realtime.as_mut());
    let outcome = run_in_with(&scenario, realtime.as_ref(), extras)?;
    Ok((scenario, outcome))
}

/// Prints to stdout. A reader that went away (`capsize run ... | head`) is not an error; any
/// other failure to write is reported.
pub(crate) fn out(text: &str) -> ExitCode {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => Failure::write_failed(format!("cannot write to stdout: {e}")).exit(),
    }
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        // --help and --version are not errors.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line, like every other error; `--help` has the rest.
            let text = e.to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let first = lines.next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            // "the following required arguments were not provided:" names them on the next line.
            let first = match lines.next().filter(|_| first.ends_with(':')) {
                Some(next) => format!("{first} {next}"),
                None => first.to_string(),
            };
            return Failure::bad_input(format!("{first} (see --help)")).exit();
        }
    };
    match args.command {
        Command::Demo => out(&crate::output::demo::render(&crate::output::demo::rows())),
        Command::Examples(args) => examples::examples(args),
        Command::Run(args) => run::run(args),
        Command::Sweep(args) => sweep::sweep(args),
        Command::Merge(args) => merge::merge(args),
        Command::Search(args) => search::search(args),
        Command::Plan(args) => plan::plan(args),
        Command::Article {
            scenarios,
            out: dir,
        } => match crate::output::article::reproduce(&scenarios, &dir) {
            Ok(md) => out(&md),
            Err(e) => match e.downcast_ref::<OutputError>().map(Failure::output) {
                Some(f) => f.exit(),
                // A scenario that cannot be read or is invalid is bad input, as everywhere.
                None if e.is::<crate::engine::scenario::ScenarioError>() => {
                    Failure::bad_input(format!("{e:#}")).exit()
                }
                None => Failure::run_failed(format!("{e:#}")).exit(),
            },
        },
        Command::Check(args) => check::check(args),
        Command::Baseline(args) => check::baseline(args),
        Command::Compare(args) => compare::compare(args),
        Command::Exec(args) => exec::exec(args),
        Command::Calibrate(args) => calibrate::calibrate(args),
        Command::Mock(args) => capsize_mock::cli::run(&args, "capsize mock"),
    }
}
