//! What a shard of a sweep writes (`capsize sweep --shard i/n`): `shard.json`, its
//! [`Manifest`], and `runs.jsonl`, one [`RunLine`] per run (each run's summary.json as the
//! unsharded sweep has it: numbers written shortest-exact, so a merge reads back the very
//! values). Both are read again by `capsize merge`.

use std::path::Path;

use crate::analysis::sweep::shard::{Manifest, RunLine};
use crate::output::files::OutputSet;

/// The manifest's file name.
pub const MANIFEST: &str = "shard.json";
/// The runs' file name.
pub const RUNS: &str = "runs.jsonl";

/// Declares the shard's two files in `dir` (its own folder).
pub fn declare(set: &mut OutputSet, dir: &Path) {
    for name in [MANIFEST, RUNS] {
        set.output(dir.join(name), "--out");
    }
}

/// Gives the shard's two files their content.
pub fn put(
    set: &mut OutputSet,
    dir: &Path,
    manifest: &Manifest,
    runs: &[RunLine],
) -> Result<(), String> {
    let mut json = serde_json::to_string_pretty(manifest).map_err(|e| e.to_string())?;
    json.push('\n');
    let mut lines = String::new();
    for run in runs {
        lines.push_str(&serde_json::to_string(run).map_err(|e| e.to_string())?);
        lines.push('\n');
    }
    set.put(dir.join(MANIFEST), json).put(dir.join(RUNS), lines);
    Ok(())
}
