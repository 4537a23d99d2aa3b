//! A sweep split over processes or machines, and put back together.
//!
//! Shard `i` of `n` runs the runs `k` of the sweep's [`jobs`](super::jobs) list with
//! `k % n == i - 1`. A run's seed comes from the scenario's seed, its point and its repeat
//! ([`grid::seed`](super::grid::seed)), never from the shard, so every `n` runs the same runs.
//! A shard keeps each run's summary.json as it is ([`RunLine`]) and says what it ran in a
//! [`Manifest`]; [`gather`] checks a set of shards are the whole of one sweep and hands back
//! every run's summary in the order the unsharded sweep keeps them, from which the same points,
//! answer and outputs follow, byte for byte.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{execute, jobs, seeded, Grid, SweepError, SweepOptions};
use crate::engine::summary::Summary;

/// The shard manifest's schema: a merge refuses any other (2: the files the scenario reads).
pub const SCHEMA_VERSION: u32 = 2;

/// Where shard `index` of `count` (1-based) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1 to `count`.
    pub index: u32,
    /// How many shards the sweep is split into.
    pub count: u32,
}

/// The most shards a sweep may be split into.
pub const MAX_SHARDS: u32 = 100_000;

impl Shard {
    /// Reads `i/n` (1 ≤ i ≤ n), as `--shard` takes it.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {text:?}: expected i/n with 1 <= i <= n, e.g. 2/7");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        Shard::new(index, count).map_err(|e| format!("--shard {text:?}: {e}"))
    }

    /// Shard `index` of `count`, checked.
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!("{count} shards: from 1 to {MAX_SHARDS}"));
        }
        if index == 0 || index > count {
            return Err(format!("shard {index} of {count}: from 1 to {count}"));
        }
        Ok(Shard { index, count })
    }

    /// The shard a batch engine says this process is, when no `--shard` is given:
    /// `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job, from 0) or `SLURM_ARRAY_TASK_ID`
    /// (a Slurm job array, counted from `SLURM_ARRAY_TASK_MIN`). The count is `shards` (the
    /// `--shards` flag), else `SLURM_ARRAY_TASK_COUNT`. `None`: no engine's index is set.
    /// `env` reads a variable (the process environment, or a test's).
    pub fn from_env(
        shards: Option<u32>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Shard>, String> {
        let number = |name: &str| -> Result<Option<u64>, String> {
            env(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{name}={v:?}: not a whole number"))
                })
                .transpose()
        };
        let (from, zero_based) = if let Some(i) = number("JOB_COMPLETION_INDEX")? {
            ("JOB_COMPLETION_INDEX", i)
        } else if let Some(i) = number("SLURM_ARRAY_TASK_ID")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let i = i.checked_sub(min).ok_or_else(|| {
                format!("SLURM_ARRAY_TASK_ID={i} is below SLURM_ARRAY_TASK_MIN={min}")
            })?;
            ("SLURM_ARRAY_TASK_ID", i)
        } else {
            return Ok(None);
        };
        let count = match shards {
            Some(n) => u64::from(n),
            None => number("SLURM_ARRAY_TASK_COUNT")?.ok_or_else(|| {
                format!("{from} is set but not how many shards there are: pass --shards N")
            })?,
        };
        let count = u32::try_from(count).map_err(|_| format!("{count} shards: too many"))?;
        let index = u32::try_from(zero_based + 1).unwrap_or(u32::MAX);
        Shard::new(index, count)
            .map(Some)
            .map_err(|e| format!("{from}: {e}"))
    }

    /// Whether run `k` of the sweep's list is this shard's.
    pub fn takes(&self, k: usize) -> bool {
        k % self.count as usize == (self.index - 1) as usize
    }

    /// The folder a shard writes into, under the sweep's output folder: `shard-2-of-7`.
    pub fn folder(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a shard ran: enough to check that shards belong to one sweep, and to build that
/// sweep's grid again (`shard.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always "capsize sweep shard".
    pub kind: String,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The capsize that ran it: runs are merged only with runs of the same version.
    pub capsize: String,
    /// The scenario file as given on the command line.
    pub scenario: String,
    /// FNV-1a (64-bit, hex) of the scenario file's bytes.
    pub scenario_fnv1a: String,
    /// Every file the scenario reads (at any point of the grid), with its FNV-1a.
    pub files: Vec<FileDigest>,
    /// The `--set` arguments (a `--seed` among them, as `seed=N`).
    pub sets: Vec<String>,
    /// The `--sweep` arguments.
    pub sweeps: Vec<String>,
    /// Whether `--force` let a grid of more than 10,000 points run.
    pub force: bool,
    /// Runs per point.
    pub repeats: u32,
    /// Every point's `key=value` overrides, in grid order (the whole grid, not the shard's).
    pub points: Vec<String>,
    /// Which shard this is.
    pub shard: Shard,
    /// How many runs it ran (the lines of `runs.jsonl`).
    pub runs: usize,
}

impl Manifest {
    /// The manifest of `shard` of a sweep of `grid` with these arguments, of the scenario
    /// `scenario` (as given) whose [`Identity`] (its bytes, its files', the `--set` arguments)
    /// is `identity`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        grid: &Grid,
        scenario: &str,
        identity: &Identity,
        sweeps: &[String],
        force: bool,
        repeats: u32,
        shard: Shard,
        runs: usize,
    ) -> Manifest {
        Manifest {
            kind: KIND.into(),
            schema_version: SCHEMA_VERSION,
            capsize: crate::engine::VERSION.into(),
            scenario: scenario.into(),
            scenario_fnv1a: identity.scenario_fnv1a.clone(),
            files: identity.files.clone(),
            sets: identity.sets.clone(),
            sweeps: sweeps.to_vec(),
            force,
            repeats,
            points: point_ids(grid),
            shard,
            runs,
        }
    }

    /// Reads a `shard.json`'s text; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        // The kind and schema first: another schema's fields are not this one's.
        #[derive(Deserialize)]
        struct Head {
            kind: String,
            schema_version: u32,
        }
        let head: Head = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if head.kind != KIND {
            return Err(format!(
                "kind {:?}: not a sweep shard ({KIND:?})",
                head.kind
            ));
        }
        if head.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "schema_version {}: this capsize reads {SCHEMA_VERSION}",
                head.schema_version
            ));
        }
        let m: Manifest = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if m.capsize != crate::engine::VERSION {
            return Err(format!(
                "written by capsize {:?}: merge with the capsize that ran the shards ({:?} here)",
                m.capsize,
                crate::engine::VERSION
            ));
        }
        Shard::new(m.shard.index, m.shard.count)?;
        Ok(m)
    }

    /// The identity of the scenario the shard ran: its bytes, its files', the `--set`s.
    pub fn identity(&self) -> Identity {
        Identity {
            scenario_fnv1a: self.scenario_fnv1a.clone(),
            files: self.files.clone(),
            sets: self.sets.clone(),
        }
    }

    /// What differs between two shards' sweeps (`None`: they are shards of one sweep).
    fn differs(&self, other: &Manifest) -> Option<String> {
        let say = |what: &str, a: &dyn fmt::Debug, b: &dyn fmt::Debug| {
            Some(format!("{what} {a:?} and {b:?}"))
        };
        if self.capsize != other.capsize {
            return say("capsize versions", &self.capsize, &other.capsize);
        }
        if let Some(what) = self.identity().differs(&other.identity()) {
            return Some(what);
        }
        if self.sweeps != other.sweeps {
            return say("--sweep arguments", &self.sweeps, &other.sweeps);
        }
        if self.repeats != other.repeats {
            return say("--repeats", &self.repeats, &other.repeats);
        }
        if self.shard.count != other.shard.count {
            return say("shard counts", &self.shard.count, &other.shard.count);
        }
        if self.points != other.points {
            return Some(format!(
                "grids ({} and {} points)",
                self.points.len(),
                other.points.len()
            ));
        }
        None
    }
}

const KIND: &str = "capsize sweep shard";

/// Every point's overrides, `key=value` joined by spaces, in grid order.
fn point_ids(grid: &Grid) -> Vec<String> {
    grid.points
        .iter()
        .map(|(p, _)| p.sets().join(" "))
        .collect()
}

use crate::engine::scenario::identity::{FileDigest, Identity};

/// The identity of the scenario at `path` swept over `grid` with `sets`: its bytes, those of
/// every file it reads at any point, the `--set` arguments.
pub fn identity(path: &std::path::Path, sets: &[String], grid: &Grid) -> Result<Identity, String> {
    let points: Vec<Vec<String>> = grid.points.iter().map(|(p, _)| p.sets()).collect();
    Identity::of(path, sets, &points)
}

/// One run of a shard: a line of `runs.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLine {
    /// Its place in the sweep's list of runs.
    pub run: usize,
    /// Its point, in grid order.
    pub point: usize,
    /// Its repeat (0-based).
    pub repeat: u32,
    /// Its seed.
    pub seed: u64,
    /// Its summary.json, as the run wrote it.
    pub summary: Value,
    /// Where it was read from: its line in `runs.jsonl` (1-based; 0 for a run not read).
    #[serde(skip)]
    pub line: usize,
}

/// Runs `shard`'s share of a sweep of `grid` (`opts.first_repeat` is 0: a sweep's), in the
/// sweep's order. `None` if the sweep was stopped (`opts.stop`) before every run finished: a
/// shard is written whole or not at all.
pub fn run(
    grid: &Grid,
    opts: &SweepOptions,
    shard: Shard,
) -> Result<Option<Vec<RunLine>>, SweepError> {
    let all = jobs(grid, 0, opts.repeats.max(1));
    let mine: Vec<(usize, (usize, u32))> = all
        .into_iter()
        .enumerate()
        .filter(|(k, _)| shard.takes(*k))
        .collect();
    let (results, stopped) = execute(grid, opts, mine.iter().map(|(_, j)| *j).collect())?;
    if stopped {
        return Ok(None);
    }
    assert!(
        results.iter().all(Option::is_some),
        "a sweep's run panicked"
    );
    Ok(Some(
        mine.into_iter()
            .zip(results)
            .map(|((run, (point, repeat)), summary)| RunLine {
                run,
                point,
                repeat,
                seed: seeded(&grid.points, point, repeat).seed,
                summary: summary.unwrap_or_default(),
                line: 0,
            })
            .collect(),
    ))
}

/// A shard as read back: where it was, its manifest, its runs.
#[derive(Debug)]
pub struct Read {
    /// The folder it was read from (for errors).
    pub from: String,
    /// Its `shard.json`.
    pub manifest: Manifest,
    /// Its `runs.jsonl`.
    pub runs: Vec<RunLine>,
    /// Where its `runs.jsonl` was read from (for errors).
    pub runs_from: String,
}

/// Checks `shards` are shards of one sweep: the same capsize, scenario, files, arguments and
/// grid. `Err` names two that differ and how.
pub fn agree(shards: &[Read]) -> Result<(), String> {
    let Some(first) = shards.first() else {
        return Err("no shard to merge".into());
    };
    for s in shards {
        if let Some(what) = first.manifest.differs(&s.manifest) {
            return Err(format!(
                "{} and {} are shards of different sweeps: {what}",
                first.from, s.from
            ));
        }
    }
    Ok(())
}

/// Checks `shards` are the whole of one sweep, `grid` with the manifests' repeats (each shard
/// once, every run there once, seeds as the grid gives them), and returns every run's summary
/// in the sweep's order, for [`assemble`](super::assemble). `Err` names what is missing,
/// given twice or different.
pub fn gather(grid: &Grid, shards: Vec<Read>) -> Result<Vec<Option<Value>>, String> {
    let Some(first) = shards.first() else {
        return Err("no shard to merge".into());
    };
    let m = first.manifest.clone();
    if m.points != point_ids(grid) {
        return Err(format!(
            "{}: its grid ({} points) is not the scenario's now ({} points): the scenario or its files changed since it ran",
            first.from,
            m.points.len(),
            grid.points.len()
        ));
    }
    agree(&shards)?;
    let mut seen: Vec<Option<&str>> = vec![None; m.shard.count as usize];
    for s in &shards {
        let slot = &mut seen[(s.manifest.shard.index - 1) as usize];
        if let Some(earlier) = slot {
            return Err(format!(
                "shard {} is given twice: {earlier} and {}",
                s.manifest.shard, s.from
            ));
        }
        *slot = Some(&s.from);
    }
    let missing: Vec<String> = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{}/{}", i + 1, m.shard.count))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} of {} shards missing: {} (merge every shard of the sweep)",
            missing.len(),
            m.shard.count,
            abridge(&missing)
        ));
    }
    let all = jobs(grid, 0, m.repeats.max(1));
    let mut results: Vec<Option<Value>> = vec![None; all.len()];
    for s in shards {
        let shard = s.manifest.shard;
        let expected = (0..all.len()).filter(|k| shard.takes(*k)).count();
        if s.runs.len() != expected || s.manifest.runs != expected {
            return Err(format!(
                "{}: shard {shard} holds {} runs (its manifest says {}), a whole one {expected}",
                s.from,
                s.runs.len(),
                s.manifest.runs
            ));
        }
        for line in s.runs {
            let at = format!("{}: line {}", s.runs_from, line.line);
            let k = line.run;
            let Some(&(point, repeat)) = all.get(k).filter(|_| shard.takes(k)) else {
                return Err(format!("{at}: run {k} is not one of shard {shard}'s"));
            };
            let seeded = seeded(&grid.points, point, repeat);
            if (line.point, line.repeat, line.seed) != (point, repeat, seeded.seed) {
                return Err(format!(
                    "{at}: run {k} is point {} repeat {} seed {}, the grid has point {point} repeat {repeat} seed {}",
                    line.point, line.repeat, line.seed, seeded.seed
                ));
            }
            summary_of(&line, &seeded).map_err(|e| format!("{at}: summary: {e}"))?;
            if results[k].replace(line.summary).is_some() {
                return Err(format!("{at}: run {k} is given twice"));
            }
        }
    }
    Ok(results)
}

/// Checks `line`'s summary is one a run of `scenario` (its point, its seed) wrote: the types and
/// identities of a virtual run's summary.json ([`Summary::read_back`]), and its own scenario,
/// seed and retry preset.
fn summary_of(line: &RunLine, scenario: &crate::engine::scenario::Scenario) -> Result<(), String> {
    let s = Summary::read_back(&line.summary)?;
    if s.seed != line.seed {
        return Err(format!(
            "seed {}, not its line's {}: another run's summary",
            s.seed, line.seed
        ));
    }
    if s.scenario != scenario.name {
        return Err(format!(
            "scenario {:?}, not {:?}: another scenario's run",
            s.scenario, scenario.name
        ));
    }
    let preset = scenario.scheduler.retry_preset;
    if s.retry_preset != preset {
        return Err(format!(
            "retry_preset {:?}, the scenario's is {preset:?}",
            s.retry_preset
        ));
    }
    of_its_scenario(&s, scenario).map_err(|e| format!("{e}: the run of another scenario"))
}

/// Whether summary `s` has the shape a run of `scenario` gives it: no more queries started
/// than it starts, its fleet, its adaptive limit, its providers.
fn of_its_scenario(
    s: &Summary,
    scenario: &crate::engine::scenario::Scenario,
) -> Result<(), String> {
    use crate::engine::scenario::Stop;
    if let Stop::Queries(n) = scenario.workload.stop {
        if s.queries_started > n {
            return Err(format!(
                "queries_started {}, more than the scenario's {n} queries",
                s.queries_started
            ));
        }
    }
    let k = scenario.fleet.replicas as u64;
    let fleet = s.fleet.as_ref().map(|f| (f.replicas, f.limiter.as_str()));
    if fleet != (k > 1).then(|| (k, scenario.fleet.limiter.name())) {
        return Err(format!("fleet {fleet:?}, the scenario has {k} replicas"));
    }
    if s.concurrency_limit.is_some() != scenario.scheduler.adaptive.is_some() {
        return Err(
            "concurrency_limit where the scenario's limit is not adaptive, or none where it is"
                .into(),
        );
    }
    let names = scenario.provider_names();
    let known = |n: &String| n == "none" || names.contains(n);
    if let Some(n) = s.providers.keys().find(|n| !known(n)) {
        return Err(format!("providers.{n}, which the scenario has not"));
    }
    if let Some(n) = names.iter().find(|n| !s.providers.contains_key(*n)) {
        return Err(format!("no providers.{n}, which the scenario has"));
    }
    Ok(())
}

/// The first few of `items` and how many more.
fn abridge(items: &[String]) -> String {
    const SHOWN: usize = 10;
    let head = items[..items.len().min(SHOWN)].join(", ");
    match items.len().saturating_sub(SHOWN) {
        0 => head,
        more => format!("{head} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_read_from_flags_and_engines() {
        assert_eq!(Shard::parse("2/7"), Ok(Shard { index: 2, count: 7 }));
        for bad in ["0/3", "4/3", "1/0", "a/3", "3", "1/2/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(Shard::from_env(Some(4), env(&[])), Ok(None));
        assert_eq!(
            Shard::from_env(Some(4), env(&[("JOB_COMPLETION_INDEX", "0")])),
            Ok(Some(Shard { index: 1, count: 4 }))
        );
        assert!(Shard::from_env(None, env(&[("JOB_COMPLETION_INDEX", "0")])).is_err());
        assert!(Shard::from_env(Some(4), env(&[("JOB_COMPLETION_INDEX", "4")])).is_err());
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_MIN", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ]);
        assert_eq!(
            Shard::from_env(None, slurm),
            Ok(Some(Shard { index: 3, count: 3 }))
        );
        let shard = Shard { index: 2, count: 3 };
        let mine: Vec<usize> = (0..9).filter(|k| shard.takes(*k)).collect();
        assert_eq!(mine, [1, 4, 7]);
        assert_eq!(shard.folder(), "shard-2-of-3");
    }
}
