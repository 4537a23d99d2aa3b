//! A sweep from grid to answer: every point run ([`run`](super::run)), the recommended one
//! chosen ([`recommend`](super::recommend)) and run once more, same seed, for the histograms
//! and time series its report charts. A sweep stopped early ([`SweepOptions::stop`]) answers
//! from the points that finished, and runs nothing more.

use super::{recommend, run, Grid, PointResult, Recommendation, SweepError, SweepOptions};
use crate::engine::sim::{self, RealtimeOptions, SimOutcome};

/// What a sweep found: its points in grid order, the recommended one (none if no point
/// passes) and that point's run again (same seed: the same run), for its charts.
#[derive(Debug)]
pub struct Answer {
    /// Every point that finished (every point, unless `interrupted`), in grid order.
    pub points: Vec<PointResult>,
    /// The recommended point, if one passes.
    pub recommendation: Option<Recommendation>,
    /// The recommended point's first repeat, run again with its recording kept (not when
    /// `interrupted`).
    pub recommended_run: Option<SimOutcome>,
    /// The sweep was stopped before every point finished: `points` are those that did.
    pub interrupted: Option<Interrupted>,
}

/// How much of a stopped sweep finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// The points whose every repeat finished.
    pub finished: usize,
    /// The points of the grid.
    pub total: usize,
}

/// Runs `grid` with `opts` and answers it against the first point's `[slo]` objectives.
///
/// If `opts.stop` is set before every point finished, the answer is among the points that
/// did, and the recommended point is not run again (its charts are not drawn).
pub fn answer(grid: &Grid, opts: &SweepOptions) -> Result<Answer, SweepError> {
    let points = run(grid, opts)?;
    conclude(grid, points, opts.realtime.as_ref())
}

/// The answer from `points`, the grid's points that finished (all of them, or the sweep was
/// interrupted): the recommendation, and the recommended point run again on the sweep's clock
/// (`realtime`, or virtual time) when every point finished. A merge of shards answers here.
pub fn conclude(
    grid: &Grid,
    points: Vec<PointResult>,
    realtime: Option<&RealtimeOptions>,
) -> Result<Answer, SweepError> {
    let total = grid.points.len();
    let interrupted = (points.len() < total).then_some(Interrupted {
        finished: points.len(),
        total,
    });
    let slo = &grid.points[0].1.slo;
    let recommendation = recommend(&points, slo);
    let recommended_run = match &recommendation {
        Some(r) if interrupted.is_none() => {
            let s = &points[r.index].scenario;
            let outcome = match realtime {
                None => sim::run(s),
                Some(o) => sim::run_realtime(s, o),
            };
            Some(outcome.map_err(|source| SweepError {
                point: points[r.index].point.label(),
                seed: s.seed,
                source,
            })?)
        }
        _ => None,
    };
    Ok(Answer {
        points,
        recommendation,
        recommended_run,
        interrupted,
    })
}
