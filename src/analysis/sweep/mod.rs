//! The capacity answer: run a scenario over a grid of settings, in parallel and
//! deterministically, reduce each point's runs to means with 95 % confidence intervals, and
//! say which points pass and which one to use ([`answer`]); or search one key for the largest
//! or smallest value that passes ([`search`]).
//!
//! Each (point, repeat) is one run with its own runtime and a seed derived from the scenario's
//! seed and the point ([`grid::seed`]). Runs are spread over `jobs` threads; results are kept
//! by index, so what is written does not depend on `jobs` or on which run finished first. A
//! caller may stop a sweep ([`SweepOptions::stop`]): it then answers from the points that
//! finished, each exactly as a full sweep has it.

mod answer;
pub mod grid;
mod recommend;
pub mod search;
pub mod shard;
mod stats;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use serde_json::Value;

use crate::engine::scenario::Scenario;
use crate::engine::sim::{self, RealtimeOptions, SimError};
use crate::engine::summary::Summary;
pub use answer::{answer, conclude, Answer, Interrupted};
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
    /// Set by the caller (on Ctrl-C, say) to stop the sweep: no run starts after, the runs in
    /// flight are abandoned, and the points that finished are the answer ([`run`]). `None`: a
    /// sweep that runs to its end.
    pub stop: Option<Arc<AtomicBool>>,
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
    Ok(summary.to_value())
}

/// The scenario of `points[p]` with the seed of its repeat `r`.
fn seeded(points: &[(Point, Scenario)], p: usize, r: u32) -> Scenario {
    let (point, s) = &points[p];
    let mut s = s.clone();
    s.seed = grid::seed(s.seed, point, r);
    s
}

/// Runs every point of `grid` `opts.repeats` times (repeats `opts.first_repeat` on) and
/// returns the points in grid order.
///
/// Once `opts.stop` is set, no run starts, the runs in flight are abandoned (left to finish on
/// their threads, unseen) and only the points whose every repeat finished are returned, still
/// in grid order: fewer than the grid's. A run that fails stops the others from starting, waits
/// for those in flight, and is the error.
pub fn run(grid: &Grid, opts: &SweepOptions) -> Result<Vec<PointResult>, SweepError> {
    let repeats = opts.repeats.max(1);
    let all = jobs(grid, opts.first_repeat, repeats);
    let (results, stopped) = execute(grid, opts, all)?;
    assert!(
        stopped || results.iter().all(Option::is_some),
        "a sweep's run panicked"
    );
    Ok(assemble(grid, opts.first_repeat, repeats, results))
}

/// Every run of a sweep, `(point, repeat)`, point by point: run `k` of the list is repeat
/// `k % repeats` of point `k / repeats` (a shard's share is a set of these indices).
pub fn jobs(grid: &Grid, first_repeat: u32, repeats: u32) -> Vec<(usize, u32)> {
    let numbers = first_repeat..first_repeat + repeats;
    (0..grid.points.len())
        .flat_map(|p| numbers.clone().map(move |r| (p, r)))
        .collect()
}

/// The points of `grid` from the summaries of its runs, `results[k]` that of run `k` of
/// [`jobs`]: a point is kept, in grid order, only if every one of its repeats is there.
pub fn assemble(
    grid: &Grid,
    first_repeat: u32,
    repeats: u32,
    results: Vec<Option<Value>>,
) -> Vec<PointResult> {
    let numbers = first_repeat..first_repeat + repeats;
    let mut all = results.into_iter();
    grid.points
        .iter()
        .enumerate()
        .filter_map(|(p, (point, _))| {
            let runs: Vec<Option<Value>> = all.by_ref().take(repeats as usize).collect();
            let runs: Vec<Value> = runs.into_iter().collect::<Option<_>>()?;
            Some(PointResult {
                point: point.clone(),
                scenario: seeded(&grid.points, p, first_repeat),
                seeds: numbers
                    .clone()
                    .map(|r| seeded(&grid.points, p, r).seed)
                    .collect(),
                mean: mean_json(&runs),
                runs,
            })
        })
        .collect()
}

/// Runs `jobs` (`(point, repeat)` of `grid`) on `opts.jobs` threads and returns each one's
/// summary.json by its place in `jobs` (`None` where it did not finish), and whether the sweep
/// was stopped (`opts.stop`). A run that fails stops the others from starting, waits for
/// those in flight, and is the error.
pub fn execute(
    grid: &Grid,
    opts: &SweepOptions,
    jobs: Vec<(usize, u32)>,
) -> Result<(Vec<Option<Value>>, bool), SweepError> {
    let jobs = Arc::new(jobs);
    let points = Arc::new(grid.points.clone());
    let total = jobs.len();
    let stop = opts.stop.clone().unwrap_or_default();
    // Set by a failure: no further run starts.
    let halt = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(Progress::new(total, opts.progress));
    let threads = match opts.realtime {
        Some(_) => 1,
        None => opts.jobs.clamp(1, total.max(1)),
    };
    let (tx, rx) = mpsc::channel::<(usize, Result<Value, SweepError>)>();
    // Threads of their own, not scoped: a stopped sweep returns without waiting for them.
    for _ in 0..threads {
        let (jobs, points, stop, halt, next, progress, tx) = (
            Arc::clone(&jobs),
            Arc::clone(&points),
            Arc::clone(&stop),
            Arc::clone(&halt),
            Arc::clone(&next),
            Arc::clone(&progress),
            tx.clone(),
        );
        let realtime = opts.realtime.clone();
        std::thread::spawn(move || loop {
            if stop.load(Ordering::SeqCst) || halt.load(Ordering::SeqCst) {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= jobs.len() {
                break;
            }
            let (p, r) = jobs[i];
            let s = seeded(&points, p, r);
            let result = run_one(&s, realtime.as_ref()).map_err(|source| SweepError {
                point: points[p].0.label(),
                seed: s.seed,
                source,
            });
            // A run that ends after the sweep was stopped is abandoned: not shown, not kept.
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let failed = result.is_err();
            if failed {
                halt.store(true, Ordering::SeqCst);
            }
            // Sent before it is shown: a run the progress counts is kept, even if the sweep
            // is stopped the next instant.
            if tx.send((i, result)).is_err() || failed {
                break;
            }
            progress.tick();
        });
    }
    drop(tx);
    let mut results: Vec<Option<Value>> = vec![None; total];
    let mut failure: Option<SweepError> = None;
    let mut keep = |(i, result): (usize, Result<Value, SweepError>)| match result {
        Ok(v) => results[i] = Some(v),
        Err(e) => {
            failure.get_or_insert(e);
        }
    };
    // How often a sweep that can be stopped looks at its stop.
    let look = std::time::Duration::from_millis(50);
    let stopped = loop {
        if opts.stop.is_some() && stop.load(Ordering::SeqCst) {
            // What was sent before the stop is kept.
            rx.try_iter().for_each(&mut keep);
            break true;
        }
        let message = match &opts.stop {
            Some(_) => rx.recv_timeout(look),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match message {
            Ok(m) => keep(m),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Every thread ended: every run done, or a stop seen by the threads first.
            Err(mpsc::RecvTimeoutError::Disconnected) => break stop.load(Ordering::SeqCst),
        }
    };
    progress.finish();
    match failure {
        Some(e) => Err(e),
        None => Ok((results, stopped)),
    }
}
