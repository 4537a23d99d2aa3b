//! `capsize merge`: a sweep's outputs from its shards (`capsize sweep --shard I/N`).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{default_out, Failure};
use crate::analysis::sweep::shard::{self, fnv1a_hex, Manifest, Read, RunLine};
use crate::analysis::sweep::{self, Grid, GridError};
use crate::output::files::OutputSet;
use crate::output::sweep::shard::{MANIFEST, RUNS};

/// Flags of `capsize merge`.
#[derive(Debug, ClapArgs)]
pub struct MergeArgs {
    /// Shard folders (each with shard.json and runs.jsonl), or folders holding them
    /// (shard-I-of-N/), in any order: every shard of the sweep, each once.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// The scenario file, where it is not at the path the shards were given (the same file:
    /// its FNV-1a must match theirs).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Output folder (default: capsize-out/<scenario name>/, as the sweep's).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The largest `shard.json` read.
const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// `capsize merge`.
pub fn merge(args: MergeArgs) -> ExitCode {
    let shards = match read_all(&args.dirs) {
        Ok(s) => s,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let m = &shards[0].manifest;
    let path = args
        .scenario
        .clone()
        .unwrap_or_else(|| PathBuf::from(&m.scenario));
    let bytes = match capsize_files::read_regular_file(&path, u64::MAX) {
        Ok(b) => b,
        Err(e) => {
            return Failure::bad_input(format!(
                "{}: cannot read the shards' scenario: {e}{}",
                path.display(),
                if args.scenario.is_none() {
                    " (give --scenario where it is on this machine)"
                } else {
                    ""
                }
            ))
            .exit()
        }
    };
    if fnv1a_hex(&bytes) != m.scenario_fnv1a {
        return Failure::bad_input(format!(
            "{}: not the scenario the shards ran (FNV-1a {}, theirs {}): it changed since, or is another file",
            path.display(),
            fnv1a_hex(&bytes),
            m.scenario_fnv1a
        ))
        .exit();
    }
    let grid = match Grid::build(&path, &m.sets, &m.sweeps, m.force) {
        Ok(g) => g,
        Err(GridError::Scenario(e)) => return Failure::bad_input(e).exit(),
        Err(GridError::Flag(e)) => return Failure::bad_input(e).exit(),
    };
    let repeats = m.repeats;
    let (sets, first_name) = (m.sets.clone(), grid.points[0].1.name.clone());
    let dir = default_out(&args.out, &first_name);
    let mut outputs = OutputSet::new();
    outputs.scenario(&path, &sets);
    for s in &shards {
        outputs.input(Path::new(&s.from).join(MANIFEST), "a shard");
        outputs.input(Path::new(&s.from).join(RUNS), "a shard");
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

/// Every shard under `dirs`: a folder with a `shard.json`, or one whose `shard-*` folders
/// have one (taken in name order).
fn read_all(dirs: &[PathBuf]) -> Result<Vec<Read>, String> {
    let mut shards = Vec::new();
    for dir in dirs {
        if dir.join(MANIFEST).exists() {
            shards.push(read_one(dir)?);
            continue;
        }
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut inner: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("shard-"))
                    && p.join(MANIFEST).exists()
            })
            .collect();
        if inner.is_empty() {
            return Err(format!(
                "{}: no {MANIFEST}, and no shard-I-of-N folder with one: not a sweep shard",
                dir.display()
            ));
        }
        inner.sort();
        for d in inner {
            shards.push(read_one(&d)?);
        }
    }
    Ok(shards)
}

/// The shard in `dir`.
fn read_one(dir: &Path) -> Result<Read, String> {
    let from = dir.display().to_string();
    let at = |name: &str| dir.join(name).display().to_string();
    let bytes = capsize_files::read_regular_file(&dir.join(MANIFEST), MAX_MANIFEST_BYTES)
        .map_err(|e| format!("{}: cannot read: {e}", at(MANIFEST)))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", at(MANIFEST)))?;
    let manifest = Manifest::parse(&text).map_err(|e| format!("{}: {e}", at(MANIFEST)))?;
    let file = std::fs::File::open(dir.join(RUNS))
        .map_err(|e| format!("{}: cannot read: {e}", at(RUNS)))?;
    let mut runs = Vec::with_capacity(manifest.runs.min(1 << 20));
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: line {}: {e}", at(RUNS), n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let run: RunLine = serde_json::from_str(&line)
            .map_err(|e| format!("{}: line {}: {e}", at(RUNS), n + 1))?;
        runs.push(run);
    }
    Ok(Read {
        from,
        manifest,
        runs,
    })
}
