//! `capsize sweep`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::interrupt::{exit_code, Interrupt};
use super::{default_out, out, realtime_options, ClockArgs, Failure, EXIT_RUN_FAILED};
use crate::analysis::sweep::shard::{Manifest, Shard};
use crate::analysis::sweep::{self, Answer, Grid, GridError, SweepOptions};
use crate::output::files::OutputSet;
use crate::output::report::escape;
use crate::output::sweep::{
    self as written, csv as table, report as capacity, shard as shard_files,
};

/// Flags of `capsize sweep`.
#[derive(Debug, ClapArgs)]
pub struct SweepArgs {
    /// The scenario file (TOML) with a [sweep] table (or give --sweep).
    scenario: PathBuf,
    /// Sweep a key over values (repeatable; replaces the [sweep] entry of the same key):
    /// --sweep scheduler.max_concurrency=1,2,4,8 or =1..=64 or ='{ from = 0.5, to = 1, step = 0.1 }'.
    #[arg(long = "sweep", value_name = "KEY.PATH=VALUES")]
    sweeps: Vec<String>,
    /// Override any key at every point (repeatable): a scalar (scheduler.headroom=0.8) or an
    /// inline table (provider.latency='{ dist = "uniform", min_ms = 200, max_ms = 900 }').
    /// A key the [sweep] table varies is pinned to this value and not swept.
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
    /// Output folder (default: capsize-out/<scenario name>/). A shard writes into its own
    /// folder in it, shard-I-of-N/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run shard I of N of the sweep (1 <= I <= N): every N-th run, whatever N, each with the
    /// seed the unsharded sweep gives it. It writes shard-I-of-N/{shard.json, runs.jsonl};
    /// `capsize merge` makes the sweep's outputs from all N, byte for byte as one process
    /// writes them. Without it, a Kubernetes Indexed Job's JOB_COMPLETION_INDEX or a Slurm
    /// array's SLURM_ARRAY_TASK_ID picks the shard (the count from --shards, or
    /// SLURM_ARRAY_TASK_COUNT). Virtual time only.
    #[arg(long, value_name = "I/N", conflicts_with = "shards")]
    shard: Option<String>,
    /// How many shards a batch engine runs (with JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID).
    #[arg(long, value_name = "N")]
    shards: Option<u32>,
    #[command(flatten)]
    clock: ClockArgs,
}

/// The shard this process runs, from `--shard`, or from a batch engine's variables.
fn shard_of(args: &SweepArgs) -> Result<Option<Shard>, String> {
    if let Some(text) = &args.shard {
        return Shard::parse(text).map(Some);
    }
    let from_env = Shard::from_env(args.shards, |name| std::env::var(name).ok())?;
    match (from_env, args.shards) {
        (None, Some(n)) => Err(format!(
            "--shards {n}: neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID is set, so which shard this is is unknown: give --shard I/{n}"
        )),
        (shard, _) => Ok(shard),
    }
}

/// `capsize sweep`.
pub fn sweep(args: SweepArgs) -> ExitCode {
    let mut realtime = match realtime_options(&args.clock, false) {
        Ok(r) => r,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let shard = match shard_of(&args) {
        Ok(s) => s,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    if let (Some(s), Some(_)) = (shard, &realtime) {
        return Failure::bad_input(format!(
            "shard {s}: a sharded sweep runs in virtual time only (real-time figures depend on the machine each shard ran on)"
        ))
        .exit();
    }
    let mut sets = args.sets.clone();
    if let Some(seed) = args.seed {
        sets.push(format!("seed={seed}"));
    }
    let grid = match Grid::build(&args.scenario, &sets, &args.sweeps, args.force) {
        Ok(g) => g,
        Err(GridError::Scenario(e)) => return Failure::bad_input(e).exit(),
        Err(GridError::Flag(e)) => return Failure::bad_input(e).exit(),
    };
    for (key, set) in &grid.pinned {
        eprintln!(
            "capsize sweep: --set {} pins {}: it is not swept ({} points)",
            escape::terminal(set),
            escape::terminal(key),
            grid.points.len()
        );
    }
    if let Err(f) = super::preflight(realtime.as_ref(), grid.points.iter().map(|(_, s)| s)) {
        return f.exit();
    }
    let first = &grid.points[0].1;
    if let Err(e) =
        crate::analysis::check::validate(&first.slo, &first.slo_tolerance, &first.provider_names())
    {
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
    match shard {
        Some(s) => shard_files::declare(&mut outputs, &dir.join(s.folder())),
        None => declare(&mut outputs, &grid, &dir),
    }
    if let Err(e) = outputs.check() {
        return Failure::output(&e).exit();
    }
    super::warn(first);
    super::announce_wall(
        "this sweep",
        grid.points.iter().map(|(_, s)| s),
        args.repeats as usize,
        realtime.as_mut(),
    );
    // Ctrl-C from here on keeps the points that finished (see `interrupt`); without the
    // handler, it ends the sweep as it always did.
    let interrupt = match Interrupt::install("capsize sweep") {
        Ok(i) => Some(i),
        Err(e) => {
            eprintln!(
                "capsize sweep: cannot catch Ctrl-C ({e}): an interrupted sweep writes nothing"
            );
            None
        }
    };
    let opts = SweepOptions {
        repeats: args.repeats,
        first_repeat: 0,
        jobs,
        realtime: realtime.clone(),
        progress: true,
        stop: interrupt.as_ref().map(Interrupt::stop),
    };
    if let Some(shard) = shard {
        return run_shard(&args, &sets, &grid, &opts, shard, &dir, outputs, interrupt);
    }
    let answer = match sweep::answer(&grid, &opts) {
        Ok(a) => a,
        Err(e) if super::is_bad_input(&e.source) => return Failure::bad_input(e).exit(),
        Err(e) => return Failure::run_failed(e).exit(),
    };
    write(
        &answer,
        &grid,
        &dir,
        outputs,
        args.repeats,
        interrupt.as_ref(),
    )
}

/// Declares every file a sweep of `grid` writes into `dir`.
pub(crate) fn declare(outputs: &mut OutputSet, grid: &Grid, dir: &Path) {
    let adaptive = written::limit::any_adaptive(grid.points.iter().map(|(_, s)| s));
    let priced = grid.points.first().is_some_and(|(_, s)| s.priced());
    capacity::declare(outputs, dir, adaptive, priced);
}

/// Runs `shard` of the sweep and writes its folder in `dir`.
#[allow(clippy::too_many_arguments)]
fn run_shard(
    args: &SweepArgs,
    sets: &[String],
    grid: &Grid,
    opts: &SweepOptions,
    shard: Shard,
    dir: &Path,
    mut outputs: OutputSet,
    interrupt: Option<Interrupt>,
) -> ExitCode {
    // What the shard runs, read before it runs and again after: a scenario or a file it reads
    // that changed meanwhile is not the one the manifest names.
    let identity = match sweep::shard::identity(&args.scenario, sets, grid) {
        Ok(i) => i,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let runs = match sweep::shard::run(grid, opts, shard) {
        Ok(r) => r,
        Err(e) if super::is_bad_input(&e.source) => return Failure::bad_input(e).exit(),
        Err(e) => return Failure::run_failed(e).exit(),
    };
    let after = sweep::shard::identity(&args.scenario, sets, grid)
        .and_then(|now| identity.recheck(&now, &args.scenario, "shard"));
    if let Err(e) = after {
        return Failure::bad_input(format!("{e} (while the shard ran: run it again)")).exit();
    }
    let caught = interrupt.as_ref().and_then(Interrupt::caught);
    let Some(runs) = runs else {
        eprintln!("capsize sweep: shard {shard} interrupted: nothing written (a shard is written whole, or not at all)");
        return ExitCode::from(caught.map_or(EXIT_RUN_FAILED, exit_code));
    };
    let manifest = Manifest::new(
        grid,
        &args.scenario.to_string_lossy(),
        &identity,
        &args.sweeps,
        args.force,
        args.repeats,
        shard,
        runs.len(),
    );
    let folder = dir.join(shard.folder());
    if let Err(e) = shard_files::put(&mut outputs, &folder, &manifest, &runs) {
        return Failure::write_failed(e).exit();
    }
    let writing = interrupt.as_ref().map(Interrupt::writing);
    if let Err(e) = outputs.commit_through_signals() {
        return Failure::output(&e).exit();
    }
    drop(writing);
    let shown = escape::terminal(&folder.display().to_string());
    let printed = out(&format!(
        "shard {shard}: {} of {} runs of {}\n  wrote {shown}/{{{}, {}}}\n  when all {} are done: capsize merge {}\n",
        runs.len(),
        grid.points.len() * args.repeats as usize,
        escape::terminal(&grid.points[0].1.name),
        shard_files::MANIFEST,
        shard_files::RUNS,
        shard.count,
        escape::terminal(&dir.display().to_string()),
    ));
    caught.map_or(printed, |s| ExitCode::from(exit_code(s)))
}

/// Writes a sweep's answer into `dir` (the outputs `outputs` declares, see [`declare`]) and
/// says it on stdout: `capsize sweep`'s, and `capsize merge`'s from shards.
pub(crate) fn write(
    answer: &Answer,
    grid: &Grid,
    dir: &Path,
    outputs: OutputSet,
    repeats: u32,
    interrupt: Option<&Interrupt>,
) -> ExitCode {
    // A signal caught (even after the last point finished) is the exit code: 130 or 143.
    let caught = interrupt.and_then(Interrupt::caught);
    let code = |done: ExitCode| caught.map_or(done, |s| ExitCode::from(exit_code(s)));
    let interrupted = answer.interrupted;
    if interrupted.is_some_and(|i| i.finished == 0) {
        eprintln!("capsize sweep: interrupted before any point finished: nothing written");
        return code(ExitCode::SUCCESS);
    }
    let (points, rec) = (&answer.points, answer.recommendation.as_ref());
    let adaptive = written::limit::any_adaptive(grid.points.iter().map(|(_, s)| s));
    let base = &grid.points[0].1;
    let slo = &base.slo;
    let csv = match table::csv(points, slo) {
        Ok(c) => c,
        Err(e) => return Failure::write_failed(e).exit(),
    };
    let rpm = base.provider().rpm;
    let mut charts = capacity::sweep_charts(points, rpm, slo);
    if adaptive {
        charts.push(written::limit::sweep_chart(points));
    }
    if let (Some(r), Some(o)) = (rec, &answer.recommended_run) {
        let s = &points[r.index].scenario;
        charts.extend(capacity::point_charts(&o.recording, s, slo));
        if adaptive {
            charts.push(written::limit::point_chart(&o.recording, s));
        }
    }
    let mut svgs = Vec::new();
    for (stem, chart) in &charts {
        match crate::output::report::charts::svg(chart) {
            Ok(svg) => svgs.push((*stem, svg)),
            Err(e) => return Failure::write_failed(e).exit(),
        }
    }
    let (md, html) = capacity::render(points, slo, rec, interrupted.as_ref(), &svgs);
    // Bound after the charts, which its PNGs borrow until the commit.
    let mut outputs = outputs;
    outputs.put(dir.join(capacity::CSV), csv);
    capacity::put(&mut outputs, dir, &md, &html, &charts, svgs);
    // A second Ctrl-C during the commit waits for it: all the files, or none.
    let writing = interrupt.map(Interrupt::writing);
    if let Err(e) = outputs.commit_through_signals() {
        return Failure::output(&e).exit();
    }
    drop(writing);
    let mut headline = plain(
        md.lines()
            .filter(|l| !l.starts_with("**Partial sweep**"))
            .find(|l| l.starts_with("**") || l.starts_with("No point"))
            .unwrap_or(""),
    );
    // How sure the answer is, when the report says (marginal, or no interval at all).
    for line in md
        .lines()
        .filter(|l| l.starts_with("**Marginal**") || l.starts_with("One run per point"))
    {
        headline.push_str("\n  ");
        headline.push_str(&plain(line));
    }
    for why in written::why::diagnose(points, slo) {
        headline.push_str("\n  ");
        headline.push_str(&plain(&why));
    }
    let shown_dir = escape::terminal(&dir.display().to_string());
    let of = match interrupted {
        Some(i) => format!("{} of {}", i.finished, i.total),
        None => points.len().to_string(),
    };
    let printed = out(&format!(
        "{of} points x {} runs of {}\n{headline}\n  wrote {shown_dir}/{{sweep.csv, report.md, report.html, *.svg, *.png}}\n",
        repeats,
        escape::terminal(&base.name),
    ));
    if let Some(i) = interrupted {
        eprintln!(
            "capsize sweep: interrupted: kept {} of {} points in {shown_dir}/ (marked partial); rerun to complete",
            i.finished, i.total
        );
    }
    code(printed)
}

/// A line of the report's Markdown for the terminal: no emphasis or code marks, unescaped.
fn plain(md: &str) -> String {
    escape::unmarkdown(&md.replace("**", "").replace('`', ""))
}
