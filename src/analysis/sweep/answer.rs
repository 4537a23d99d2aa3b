//! A sweep from grid to answer: every point run ([`run`](super::run)), the recommended one
//! chosen ([`recommend`](super::recommend)) and run once more, same seed, for the histograms
//! and time series its report charts.

use super::{recommend, run, Grid, PointResult, Recommendation, SweepError, SweepOptions};
use crate::engine::sim::{self, SimOutcome};

/// What a sweep found: its points in grid order, the recommended one (none if no point
/// passes) and that point's run again (same seed: the same run), for its charts.
#[derive(Debug)]
pub struct Answer {
    /// Every point, in grid order.
    pub points: Vec<PointResult>,
    /// The recommended point, if one passes.
    pub recommendation: Option<Recommendation>,
    /// The recommended point's first repeat, run again with its recording kept.
    pub recommended_run: Option<SimOutcome>,
}

/// Runs `grid` with `opts` and answers it against the first point's `[slo]` objectives.
pub fn answer(grid: &Grid, opts: &SweepOptions) -> Result<Answer, SweepError> {
    let points = run(grid, opts)?;
    let slo = &grid.points[0].1.slo;
    let recommendation = recommend(&points, slo);
    let recommended_run = match &recommendation {
        None => None,
        Some(r) => {
            let s = &points[r.index].scenario;
            let outcome = match &opts.realtime {
                None => sim::run(s),
                Some(o) => sim::run_realtime(s, o),
            };
            Some(outcome.map_err(|source| SweepError {
                point: points[r.index].point.label(),
                seed: s.seed,
                source,
            })?)
        }
    };
    Ok(Answer {
        points,
        recommendation,
        recommended_run,
    })
}
