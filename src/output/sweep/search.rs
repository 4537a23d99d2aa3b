//! Capacity search: the largest (or smallest) value of one numeric key that still meets the
//! objectives, by bracketing then bisection, each probe a point of a one-key sweep.
//!
//! A value passes as a sweep's point does ([`super::table::passes`]: every `[slo]` objective
//! on the mean of its runs, and its busiest minute under the provider's RPM × headroom). The
//! search assumes passing is monotone in the key: with `--max` (load: sessions, arrival rate)
//! every value below the answer passes; with `--min` (capacity: max_concurrency, RPM) every
//! value above it does.
//!
//! 1. **Bracket.** From the start value (`--from`, or the scenario's own value of the key),
//!    double (or halve) until the verdict flips, within `--to` and the key's floor.
//! 2. **Bisect** between the last passing and the first failing value: to the integer for an
//!    integer key, to `precision` (relative) for a fractional one.
//!
//! **Noise.** Each probe runs `repeats` seeds. When its seeds disagree (some pass on their
//! own, some fail), the probe is noisy near the boundary: it runs `repeats` more seeds, up to
//! `max_repeats`, and is judged on the mean of all of them. The answer says how many of its
//! seeds passed on their own.

use super::grid::{Grid, GridError};
use super::table::{failures_in, Failure};
use super::{PointResult, SweepError, SweepOptions};
use crate::analysis::slo::Threshold;
use crate::engine::scenario::{Axis, AxisValue};

/// What a search looks for.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSpec {
    /// The dotted key path, e.g. `workload.sessions`.
    pub key: String,
    /// The largest passing value (true) or the smallest.
    pub max: bool,
    /// Where to start.
    pub from: f64,
    /// The largest value to try (`None`: up to 2^20 times the start).
    pub to: Option<f64>,
    /// Whether the key takes integers.
    pub integer: bool,
    /// A fractional key's bisection stops when the bracket is this fraction of its value.
    pub precision: f64,
    /// Seeds per probe, and the most a noisy probe may run.
    pub repeats: u32,
    /// See [`SearchSpec::repeats`].
    pub max_repeats: u32,
}

/// One value tried.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The value.
    pub value: f64,
    /// Its point: every run, and the mean.
    pub result: PointResult,
    /// Seeds whose run passed on its own.
    pub seeds_passing: usize,
    /// Why its mean does not pass (empty: it passes).
    pub failures: Vec<Failure>,
}

impl Probe {
    /// Whether the value passes (on the mean of its runs).
    pub fn passes(&self) -> bool {
        self.failures.is_empty()
    }

    /// Whether its seeds disagreed.
    pub fn noisy(&self) -> bool {
        self.seeds_passing != 0 && self.seeds_passing != self.result.runs.len()
    }
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct Found {
    /// Every probe, in the order run.
    pub probes: Vec<Probe>,
    /// The index of the answer (the best passing probe), if any value passes.
    pub answer: Option<usize>,
    /// The index of the nearest failing probe beyond the answer, if one was run.
    pub beyond: Option<usize>,
}

/// Why a search could not be done.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A probe's scenario is invalid.
    #[error("{0}")]
    Grid(#[from] GridError),
    /// A run failed.
    #[error("{0}")]
    Run(#[from] SweepError),
}

/// The smallest value a key may take while bracketing downward: 1 for an integer, the start
/// / 2^20 for a fraction.
fn floor(spec: &SearchSpec) -> f64 {
    if spec.integer {
        1.0
    } else {
        spec.from / f64::from(1u32 << 20)
    }
}

/// `v` as the key's value is written (`4`, `1.0625`).
pub fn shown(spec: &SearchSpec, v: f64) -> String {
    axis_value(spec, v).to_string()
}

/// `v` as the key's value (an integer rounded).
fn axis_value(spec: &SearchSpec, v: f64) -> AxisValue {
    if spec.integer {
        AxisValue::Int(v.round() as i64)
    } else {
        AxisValue::Float(v)
    }
}

/// Runs one probe at `value` with `seeds` seeds (the first `seeds` of the point).
fn probe(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    slo: &[Threshold],
    value: f64,
    opts: &SweepOptions,
) -> Result<Probe, SearchError> {
    let axis = Axis {
        key: spec.key.clone(),
        values: vec![axis_value(spec, value)],
    };
    let grid = Grid::single(path, sets, axis)?;
    let mut opts = opts.clone();
    opts.repeats = spec.repeats.max(1);
    opts.first_repeat = 0;
    let mut ran: Option<PointResult> = None;
    loop {
        let more = super::run(&grid, &opts)?
            .into_iter()
            .next()
            .ok_or_else(|| GridError::Flag("a probe ran no point".into()))?;
        // A noisy probe's further seeds join the ones it ran: none is run twice.
        let result = match ran.take() {
            None => more,
            Some(mut all) => {
                all.seeds.extend(more.seeds);
                all.runs.extend(more.runs);
                all.mean = super::mean_json(&all.runs);
                all
            }
        };
        let seeds_passing = result
            .runs
            .iter()
            .filter(|r| failures_in(&result.scenario, r, slo).is_empty())
            .count();
        let failures = failures_in(&result.scenario, &result.mean, slo);
        let p = Probe {
            value,
            result,
            seeds_passing,
            failures,
        };
        let total = p.result.runs.len() as u32;
        if !p.noisy() || total >= spec.max_repeats {
            return Ok(p);
        }
        opts.first_repeat = total;
        opts.repeats = spec.repeats.min(spec.max_repeats - total);
        ran = Some(p.result);
    }
}

/// Searches the scenario at `path` (with `sets`) along `spec`, reporting each probe to
/// `seen` as it finishes.
pub fn search(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    slo: &[Threshold],
    opts: &SweepOptions,
    mut seen: impl FnMut(&Probe),
) -> Result<Found, SearchError> {
    let mut probes: Vec<Probe> = Vec::new();
    let mut run = |v: f64, probes: &mut Vec<Probe>| -> Result<bool, SearchError> {
        let p = probe(path, sets, spec, slo, v, opts)?;
        seen(&p);
        let pass = p.passes();
        probes.push(p);
        Ok(pass)
    };
    // "Up" is the direction of more load for --max (values fail above the answer), of more
    // capacity for --min (values pass above it). `good` is the passing side of the boundary.
    let up_fails = spec.max;
    let limit_up = spec.to.unwrap_or(spec.from * f64::from(1u32 << 20));
    let limit_down = floor(spec);
    let round = |v: f64| if spec.integer { v.round() } else { v };
    let start = round(spec.from);
    let start_passes = run(start, &mut probes)?;
    // Bracket: move away from the start until the verdict flips, or a limit is reached.
    let (mut good, mut bad) = (None, None);
    if start_passes {
        good = Some(start);
    } else {
        bad = Some(start);
    }
    // Passing at the start: look for a failure towards more load (--max) or less capacity
    // (--min); failing: look for a pass the other way.
    let towards_up = start_passes == up_fails;
    let mut v = start;
    loop {
        let next = if towards_up {
            round(
                (v * 2.0)
                    .min(limit_up)
                    .max(v + if spec.integer { 1.0 } else { 0.0 }),
            )
        } else {
            round((v / 2.0).max(limit_down))
        };
        let at_limit = if towards_up {
            next > limit_up || next == v
        } else {
            next < limit_down || next == v
        };
        if at_limit {
            break;
        }
        v = next;
        if run(v, &mut probes)? {
            good = Some(v);
            if !start_passes {
                break;
            }
        } else {
            bad = Some(v);
            if start_passes {
                break;
            }
        }
    }
    // Bisect between the two sides.
    if let (Some(mut g), Some(mut b)) = (good, bad) {
        loop {
            let gap = (b - g).abs();
            let done = if spec.integer {
                gap <= 1.0
            } else {
                gap <= spec.precision * g.abs().max(b.abs())
            };
            if done {
                break;
            }
            let mid = round((g + b) / 2.0);
            if mid == g || mid == b {
                break;
            }
            if run(mid, &mut probes)? {
                g = mid;
            } else {
                b = mid;
            }
        }
        good = Some(g);
        bad = Some(b);
    }
    let index_of = |v: Option<f64>| v.and_then(|v| probes.iter().rposition(|p| p.value == v));
    Ok(Found {
        answer: index_of(good),
        beyond: index_of(bad),
        probes,
    })
}
