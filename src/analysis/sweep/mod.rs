//! The capacity answer: run a scenario over a grid of settings, in parallel and
//! deterministically, reduce each point's runs to means with 95 % confidence intervals, and
//! say which points pass and which one to use ([`answer`]); or search one key for the largest
//! or smallest value that passes ([`search`]).
//!
//! Each (point, repeat) is one run with its own runtime and a seed derived from the scenario's
//! seed and the point ([`grid::seed`]). Runs are spread over `jobs` threads; results are kept
//! by index, so what is written does not depend on `jobs` or on which run finished first.

mod answer;
pub mod grid;
mod recommend;
pub mod search;
mod stats;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::Value;

use crate::engine::scenario::Scenario;
use crate::engine::sim::{self, RealtimeOptions, SimError};
use crate::engine::summary::Summary;
pub use answer::answer;
pub use grid::{Grid, GridError, Point};
pub use recommend::{failures, marginal, passes, recommend, Failure, Recommendation};
pub use stats::{mean_ci, mean_json};

/// How a sweep runs.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Runs per point, each with its own seed.
    pub repeats: u32,
    /// The number of the first of them (0 for a sweep): a caller adding seeds to a point it
    /// has run runs the next ones, not the same again.
    pub first_repeat: u32,
    /// Threads running points at once (real time always uses one).
    pub jobs: usize,
    /// Real time instead of virtual time.
    pub realtime: Option<RealtimeOptions>,
    /// Progress on stderr (a caller that reports its own, `capsize search`, turns it off).
    pub progress: bool,
}

/// One point's results.
#[derive(Debug, Clone)]
pub struct PointResult {
    /// Where in the grid.
    pub point: Point,
    /// The scenario at this point (seed of its first repeat).
    pub scenario: Scenario,
    /// The seed of each repeat.
    pub seeds: Vec<u64>,
    /// summary.json of each repeat.
    pub runs: Vec<Value>,
    /// The mean of every number over the repeats, in summary.json's shape.
    pub mean: Value,
}

/// Why a sweep failed.
#[derive(Debug, thiserror::Error)]
#[error("point {point}, seed {seed}: {source}")]
pub struct SweepError {
    /// The point's label.
    pub point: String,
    /// The run's seed.
    pub seed: u64,
    /// What went wrong.
    pub source: SimError,
}

/// Progress on stderr: on a terminal a bar with the runs done, their rate per second, the time
/// elapsed and an ETA; a plain line per tenth otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    done: AtomicUsize,
    shown: bool,
}

impl Progress {
    fn new(total: usize, shown: bool) -> Self {
        let bar = (shown && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:40}] {pos}/{len} runs, {per_sec}, {elapsed} elapsed, ~{eta} left",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix("capsize sweep");
            bar
        });
        Progress {
            bar,
            total,
            done: AtomicUsize::new(0),
            shown,
        }
    }

    fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(bar) => bar.inc(1),
            None if self.shown => {
                let tenth = self.total.div_ceil(10).max(1);
                if done % tenth == 0 || done == self.total {
                    eprintln!("capsize sweep: {done}/{} runs", self.total);
                }
            }
            None => {}
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn run_one(s: &Scenario, realtime: Option<&RealtimeOptions>) -> Result<Value, SimError> {
    let out = match realtime {
        None => sim::run(s)?,
        Some(opts) => sim::run_realtime(s, opts)?,
    };
    let summary = Summary::new(s, &out);
    serde_json::to_value(&summary).map_err(|e| SimError::BadProvider(e.to_string()))
}

/// Runs every point of `grid` `opts.repeats` times (repeats `opts.first_repeat` on) and
/// returns the points in grid order.
pub fn run(grid: &Grid, opts: &SweepOptions) -> Result<Vec<PointResult>, SweepError> {
    let repeats = opts.repeats.max(1) as usize;
    let numbers = opts.first_repeat..opts.first_repeat + repeats as u32;
    let jobs: Vec<(usize, u32)> = (0..grid.points.len())
        .flat_map(|p| numbers.clone().map(move |r| (p, r)))
        .collect();
    let seeded = |p: usize, r: u32| {
        let (point, s) = &grid.points[p];
        let mut s = s.clone();
        s.seed = grid::seed(s.seed, point, r);
        s
    };
    let results: Mutex<Vec<Option<Value>>> = Mutex::new(vec![None; jobs.len()]);
    let failure: Mutex<Option<SweepError>> = Mutex::new(None);
    let next = AtomicUsize::new(0);
    let progress = Progress::new(jobs.len(), opts.progress);
    let threads = match opts.realtime {
        Some(_) => 1,
        None => opts.jobs.clamp(1, jobs.len().max(1)),
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs.len() || failure.lock().map_or(true, |f| f.is_some()) {
                    break;
                }
                let (p, r) = jobs[i];
                let s = seeded(p, r);
                match run_one(&s, opts.realtime.as_ref()) {
                    Ok(v) => {
                        if let Ok(mut all) = results.lock() {
                            all[i] = Some(v);
                        }
                        progress.tick();
                    }
                    Err(source) => {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(SweepError {
                                point: grid.points[p].0.label(),
                                seed: s.seed,
                                source,
                            });
                        }
                        break;
                    }
                }
            });
        }
    });
    progress.finish();
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut all = results.into_inner().unwrap_or_default().into_iter();
    Ok(grid
        .points
        .iter()
        .enumerate()
        .map(|(p, (point, _))| {
            let runs: Vec<Value> = all.by_ref().take(repeats).flatten().collect();
            PointResult {
                point: point.clone(),
                scenario: seeded(p, opts.first_repeat),
                seeds: numbers.clone().map(|r| seeded(p, r).seed).collect(),
                mean: mean_json(&runs),
                runs,
            }
        })
        .collect())
}
