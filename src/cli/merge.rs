//! `capsize merge`: a sweep's outputs from its shards (`capsize sweep --shard I/N`), or a
//! fleet's summary from its replicas run as separate processes (`capsize run --replica I/K`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{default_out, out, Failure};
use crate::analysis::sweep::shard::{self, Manifest, Read, RunLine};
use crate::analysis::sweep::{self, Grid, GridError};
use crate::engine::exec::fleet::{self, Member};
use crate::engine::scenario::identity::{self, Identity};
use crate::engine::sim::replica::{self, Piece, Record, RECORD_FILE as RECORD};
use crate::engine::sim::SimOutcome;
use crate::engine::summary::Summary;
use crate::output::exec::ExecSummary;
use crate::output::files::OutputSet;
use crate::output::report::escape;
use crate::output::sweep::shard::{MANIFEST, RUNS};

/// Flags of `capsize merge`.
#[derive(Debug, ClapArgs)]
pub struct MergeArgs {
    /// Shard folders (each with shard.json and runs.jsonl) or replica folders (each with
    /// replica.json), or folders holding them (shard-I-of-N/, replica-I-of-K/), in any order:
    /// every shard of the sweep, or every replica of the run, each once.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// The scenario file, where it is not at the path the shards (replicas) were given (the
    /// same file: its FNV-1a must match theirs).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Output folder (default: capsize-out/<scenario name>/, as the sweep's or the run's).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The largest `shard.json` read.
const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// What the folders given hold.
enum Found {
    /// A sweep's shards (folders with a shard.json).
    Shards(Vec<PathBuf>),
    /// A fleet's replicas (folders with a replica.json).
    Replicas(Vec<PathBuf>),
}

/// The shard or replica folders under `dirs`: each a folder with a `shard.json` or a
/// `replica.json`, or one whose `shard-*` or `replica-*` folders have one (in name order).
fn find(dirs: &[PathBuf]) -> Result<Found, String> {
    let kind = |d: &Path| {
        if d.join(MANIFEST).is_file() {
            Some(true)
        } else if d.join(RECORD).is_file() {
            Some(false)
        } else {
            None
        }
    };
    let mut found: Vec<(PathBuf, bool)> = Vec::new();
    for dir in dirs {
        if let Some(k) = kind(dir) {
            found.push((dir.clone(), k));
            continue;
        }
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut inner: Vec<(PathBuf, bool)> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with("shard-") || n.starts_with("replica-")
                })
            })
            .filter_map(|p| kind(&p).map(|k| (p, k)))
            .collect();
        if inner.is_empty() {
            return Err(format!(
                "{}: no {MANIFEST} or {RECORD}, and no shard-I-of-N or replica-I-of-K folder with one: not a sweep's shard nor a fleet's replica",
                dir.display()
            ));
        }
        inner.sort();
        found.extend(inner);
    }
    let shards = found.iter().filter(|(_, k)| *k).count();
    if shards > 0 && shards < found.len() {
        return Err(
            "a sweep's shards and a fleet's replicas cannot be merged together: merge each apart"
                .into(),
        );
    }
    let dirs = found.into_iter().map(|(d, _)| d).collect();
    Ok(if shards > 0 {
        Found::Shards(dirs)
    } else {
        Found::Replicas(dirs)
    })
}

/// `capsize merge`.
pub fn merge(args: MergeArgs) -> ExitCode {
    match find(&args.dirs) {
        Ok(Found::Shards(dirs)) => merge_shards(&args, &dirs),
        Ok(Found::Replicas(dirs)) => merge_replicas(&args, &dirs),
        Err(e) => Failure::bad_input(e).exit(),
    }
}

/// The scenario file the pieces ran (`--scenario`, or where they were given it), its bytes
/// checked against their FNV-1a (the files it reads are checked by [`recheck`]).
fn scenario_of(
    args: &MergeArgs,
    recorded: &str,
    fnv1a: &str,
    what: &str,
) -> Result<PathBuf, Failure> {
    let path = args
        .scenario
        .clone()
        .unwrap_or_else(|| PathBuf::from(recorded));
    let (now, _) = identity::scenario_fnv1a(&path).map_err(|e| {
        Failure::bad_input(format!(
            "{e} (the {what}' scenario{})",
            if args.scenario.is_none() {
                ": give --scenario where it is on this machine"
            } else {
                ""
            }
        ))
    })?;
    if now != fnv1a {
        return Err(Failure::bad_input(format!(
            "{}: not the scenario the {what} ran (FNV-1a {now}, theirs {fnv1a}): it changed since, or is another file",
            path.display(),
        )));
    }
    Ok(path)
}

/// Checks the scenario at `path` and every file it reads (`now`, computed again here) are
/// those the pieces ran (`theirs`): a file that changed since is refused, named.
fn recheck(
    theirs: &Identity,
    now: Result<Identity, String>,
    path: &Path,
    what: &str,
) -> Result<(), Failure> {
    now.and_then(|now| theirs.recheck(&now, path, what))
        .map_err(Failure::bad_input)
}

/// The sweep's outputs from its shards.
fn merge_shards(args: &MergeArgs, dirs: &[PathBuf]) -> ExitCode {
    let shards = match dirs
        .iter()
        .map(|d| read_one(d))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(s) => s,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    // The shards agree with each other before the files they name are read again.
    if let Err(e) = shard::agree(&shards) {
        return Failure::bad_input(e).exit();
    }
    let m = &shards[0].manifest;
    let path = match scenario_of(args, &m.scenario, &m.scenario_fnv1a, "shards") {
        Ok(p) => p,
        Err(f) => return f.exit(),
    };
    let grid = match Grid::build(&path, &m.sets, &m.sweeps, m.force) {
        Ok(g) => g,
        Err(GridError::Scenario(e)) => return Failure::bad_input(e).exit(),
        Err(GridError::Flag(e)) => return Failure::bad_input(e).exit(),
    };
    let now = shard::identity(&path, &m.sets, &grid);
    if let Err(f) = recheck(&m.identity(), now, &path, "shards") {
        return f.exit();
    }
    let repeats = m.repeats;
    let sets = m.sets.clone();
    let dir = default_out(&args.out, &grid.points[0].1.name);
    let mut outputs = OutputSet::new();
    outputs.scenario(&path, &sets);
    for d in dirs {
        outputs.input(d.join(MANIFEST), "a shard");
        outputs.input(d.join(RUNS), "a shard");
    }
    super::sweep::declare(&mut outputs, &grid, &dir);
    if let Err(e) = outputs.check() {
        return Failure::output(&e).exit();
    }
    let results = match shard::gather(&grid, shards) {
        Ok(r) => r,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let points = sweep::assemble(&grid, 0, repeats, results);
    let answer = match sweep::conclude(&grid, points, None) {
        Ok(a) => a,
        Err(e) => return Failure::run_failed(e).exit(),
    };
    super::sweep::write(&answer, &grid, &dir, outputs, repeats, None)
}

/// Every `replica.json` in `dirs`, each with the folder it was read from.
fn read_records<O: Piece>(dirs: &[PathBuf]) -> Result<Vec<(String, Record<O>)>, Failure> {
    let mut records = Vec::with_capacity(dirs.len());
    for d in dirs {
        let at = d.join(RECORD);
        let record = read_text(&at)
            .and_then(|t| Record::parse(&t).map_err(|e| format!("{}: {e}", at.display())))
            .map_err(Failure::bad_input)?;
        records.push((d.display().to_string(), record));
    }
    Ok(records)
}

/// A manifest's or a replica record's text (at most [`MAX_MANIFEST_BYTES`], UTF-8).
fn read_text(at: &Path) -> Result<String, String> {
    capsize_files::read_regular_file(at, MAX_MANIFEST_BYTES)
        .map_err(|e| format!("{}: cannot read: {e}", at.display()))
        .and_then(|b| String::from_utf8(b).map_err(|_| format!("{}: not UTF-8 text", at.display())))
}

/// A fleet's replicas, by what they ran: `capsize run` or `capsize exec` (the first one's
/// kind; a replica of the other kind is refused when it is read).
fn merge_replicas(args: &MergeArgs, dirs: &[PathBuf]) -> ExitCode {
    let first = dirs[0].join(RECORD);
    match read_text(&first).map(|t| replica::kind_of(&t)) {
        Ok(Some(kind)) if kind == Member::KIND => merge_execs(args, dirs),
        Ok(_) => merge_runs(args, dirs),
        Err(e) => Failure::bad_input(e).exit(),
    }
}

/// The outputs of a merge of the replicas in `dirs`, which ran the scenario at `path` with
/// `sets`: every input declared.
fn replica_outputs<'a>(path: &Path, sets: &[String], dirs: &[PathBuf]) -> OutputSet<'a> {
    let mut outputs = OutputSet::new();
    outputs.scenario(path, sets);
    for d in dirs {
        outputs.input(d.join(RECORD), "a replica");
    }
    outputs
}

/// A real-time fleet's summary from its replicas (`capsize run --replica`).
fn merge_runs(args: &MergeArgs, dirs: &[PathBuf]) -> ExitCode {
    let go = || -> Result<ExitCode, Failure> {
        let records = read_records::<replica::Outcome>(dirs)?;
        let first = records[0].1.clone();
        let path = scenario_of(args, &first.scenario, &first.scenario_fnv1a, "replicas")?;
        let now = Identity::of(&path, &first.sets, &[]);
        recheck(&first.terms().identity, now, &path, "replicas")?;
        let scenario =
            crate::engine::scenario::load(&path, &first.sets).map_err(Failure::bad_input)?;
        let dir = default_out(&args.out, &scenario.name);
        let mut outputs = replica_outputs(&path, &first.sets, dirs);
        crate::output::report::declare_run(&mut outputs, &dir);
        outputs.check().map_err(|e| Failure::output(&e))?;
        let outcomes = replica::gather(records).map_err(Failure::bad_input)?;
        let fleet = replica::combine(outcomes.into_iter().map(SimOutcome::from).collect())
            .map_err(Failure::bad_input)?;
        let summary = Summary::new(&scenario, &fleet);
        crate::output::report::put_run(&mut outputs, &dir, &summary, &fleet.recording);
        outputs.commit().map_err(|e| Failure::output(&e))?;
        let table = crate::output::report::table(&summary);
        let shown = escape::terminal(&dir.display().to_string());
        Ok(out(&format!(
            "{table}\n  merged {} replicas of run {}\n  wrote {shown}/{{summary.json, query_latency.hgrm, call_latency.hgrm}}\n",
            first.replicas,
            escape::terminal(&first.run_id)
        )))
    };
    go().unwrap_or_else(Failure::exit)
}

/// The summary of agents that scaled out, from their replicas (`capsize exec --replica`).
fn merge_execs(args: &MergeArgs, dirs: &[PathBuf]) -> ExitCode {
    let go = || -> Result<ExitCode, Failure> {
        let records = read_records::<Member>(dirs)?;
        let first = records[0].1.clone();
        let path = scenario_of(args, &first.scenario, &first.scenario_fnv1a, "replicas")?;
        let now = Identity::of(&path, &first.sets, &[]);
        recheck(&first.terms().identity, now, &path, "replicas")?;
        let scenario = crate::engine::scenario::load_for_exec(&path, &first.sets)
            .map_err(Failure::bad_input)?;
        let dir = super::exec::exec_dir(&args.out, &scenario);
        let members = replica::gather(records).map_err(Failure::bad_input)?;
        let fleet = fleet::combine(members).map_err(Failure::bad_input)?;
        let summary = ExecSummary::new(&scenario, &fleet.agents, &fleet.report);
        let charts = crate::output::exec::charts(&fleet.report.traffic.series, scenario.provider());
        let mut outputs = replica_outputs(&path, &first.sets, dirs);
        crate::output::exec::declare(&mut outputs, &dir);
        outputs.check().map_err(|e| Failure::output(&e))?;
        super::exec::put_summary(&mut outputs, &dir, &summary, &charts)?;
        outputs.commit().map_err(|e| Failure::output(&e))?;
        super::exec::say_if_failed(&summary.agent);
        let shown = escape::terminal(&dir.display().to_string());
        Ok(out(&format!(
            "{}\n  merged {} replicas of run {}\n  wrote {shown}/{{{}}}\n",
            crate::output::exec::table(&summary),
            first.replicas,
            escape::terminal(&first.run_id),
            super::exec::SUMMARY_FILES
        )))
    };
    go().unwrap_or_else(Failure::exit)
}

/// The longest line of a `runs.jsonl` read: one run's summary.json, which even a scenario of
/// the largest size (1 MiB) with every phase it may have keeps well within.
const MAX_RUN_LINE_BYTES: u64 = 16 << 20;

/// The shard in `dir`: its manifest, then its runs (a regular file only, each line within
/// [`MAX_RUN_LINE_BYTES`], and no more lines' worth than its manifest's runs).
fn read_one(dir: &Path) -> Result<Read, String> {
    let from = dir.display().to_string();
    let at = |name: &str| dir.join(name).display().to_string();
    let text = read_text(&dir.join(MANIFEST))?;
    let manifest = Manifest::parse(&text).map_err(|e| format!("{}: {e}", at(MANIFEST)))?;
    let runs_from = at(RUNS);
    let limit = (manifest.runs as u64)
        .saturating_add(1)
        .saturating_mul(MAX_RUN_LINE_BYTES);
    let lines = capsize_files::read_regular_lines(&dir.join(RUNS), limit, MAX_RUN_LINE_BYTES)
        .map_err(|e| format!("{runs_from}: cannot read: {e}"))?;
    let mut runs = Vec::with_capacity(manifest.runs.min(1 << 20));
    for (n, line) in lines.enumerate() {
        let line = line.map_err(|e| format!("{runs_from}: line {}: {e}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let mut run: RunLine =
            serde_json::from_str(&line).map_err(|e| format!("{runs_from}: line {}: {e}", n + 1))?;
        run.line = n + 1;
        runs.push(run);
    }
    Ok(Read {
        from,
        manifest,
        runs,
        runs_from,
    })
}
