//! Capacity search: the largest (or smallest) value of one numeric key that still meets the
//! objectives, by bracketing then bisection, each probe a point of a one-key sweep.
//!
//! A value passes as a sweep's point does ([`super::passes`]: every `[slo]` objective
//! on the mean of its runs, and its busiest minute under the provider's RPM × headroom). The
//! search assumes passing is monotone in the key: with `--max` (load: sessions, arrival rate)
//! every value below the answer passes; with `--min` (capacity: max_concurrency, RPM) every
//! value above it does. It checks the assumption with the probes it makes
//! ([`Found::contradiction`]).
//!
//! 0. **Limits.** The values tried lie within the key's own bounds (the values the scenario's
//!    validation takes, found by asking it: [`limits`]), `--to` (default 2^20 × the start) and,
//!    below, 1 for an integer key or 2^-20 × the start for a fractional one.
//! 1. **Bracket.** From the start value (`--from`, or the scenario's own value of the key),
//!    double (or halve) until the verdict flips or a limit is reached.
//! 2. **Check.** If nothing passed (the start failed, and so did everything the other way up to
//!    the limit), go the other way from the start, for as long as an objective the probes miss
//!    gets closer to its threshold: a pass there contradicts the assumption, and the search
//!    carries on from it as from a passing start.
//! 3. **Bisect** between the last passing and the first failing value: to the integer for an
//!    integer key, to `precision` (relative) for a fractional one.
//!
//! **Noise.** Each probe runs `repeats` seeds. When its seeds disagree (some pass on their
//! own, some fail), the probe is noisy near the boundary: it runs `repeats` more seeds, up to
//! `max_repeats`, and is judged on the mean of all of them. The answer says how many of its
//! seeds passed on their own.
//!
//! **On a metric** (`--over KEY --min METRIC`): the value of the key, among those that pass,
//! with the least (or greatest) mean of a metric of summary.json, such as
//! `cost.per_good_query_usd`; see [`least`].

mod least;
mod limits;

pub use least::{dips, gaps, near, reading};
use limits::axis_value;
pub use limits::{limits, outside, shown, start, Outside};

use super::grid::{Grid, GridError};
use super::recommend::{failures_in, Failure};
use super::{PointResult, SweepError, SweepOptions};
use crate::engine::scenario::Axis;
use crate::engine::summary::slo::{Op, Threshold};

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
    /// A metric of summary.json to optimise over the passing values (`--over KEY --min
    /// METRIC`): then `max` asks for its greatest mean, not the key's largest passing value.
    pub metric: Option<String>,
}

/// The words of a search on a metric, by its way: the answer it gives and the shape it
/// assumes (`--min`: the least, one minimum, a dip; `--max`: the greatest, one maximum, a
/// peak).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extremum {
    /// `least` or `greatest`.
    pub answer: &'static str,
    /// `minimum` or `maximum`.
    pub noun: &'static str,
    /// `dips` or `peaks`.
    pub verb: &'static str,
    /// `dip` or `peak`.
    pub turn: &'static str,
}

impl SearchSpec {
    /// The words of a search on a metric this way (see [`Extremum`]).
    pub fn extremum(&self) -> Extremum {
        extremum(self.max)
    }
}

/// [`Extremum`]'s words for a search of the greatest (`max`) or the least.
pub fn extremum(max: bool) -> Extremum {
    if max {
        Extremum {
            answer: "greatest",
            noun: "maximum",
            verb: "peaks",
            turn: "peak",
        }
    } else {
        Extremum {
            answer: "least",
            noun: "minimum",
            verb: "dips",
            turn: "dip",
        }
    }
}

/// How a probe's value was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The start value.
    Start,
    /// Doubled while bracketing.
    Up,
    /// Halved while bracketing.
    Down,
    /// Doubled against the assumption: nothing smaller passed (`--max`).
    CheckUp,
    /// Halved against the assumption: nothing larger passed (`--min`).
    CheckDown,
    /// Between a passing and a failing value.
    Bisect,
    /// Near the best value of the metric so far (a search on a metric).
    Refine,
}

impl std::fmt::Display for Step {
    /// `start`, `up`, `down`, `check up`, `check down`, `bisect`: search.csv's `step` column.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Start => "start",
            Step::Up => "up",
            Step::Down => "down",
            Step::CheckUp => "check up",
            Step::CheckDown => "check down",
            Step::Bisect => "bisect",
            Step::Refine => "refine",
        })
    }
}

/// One value tried.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The value.
    pub value: f64,
    /// How it was chosen.
    pub step: Step,
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

/// Why the search tries no value beyond a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The key's own bound: the scenario refuses a value beyond it.
    Key,
    /// `--to`.
    To,
    /// 2^20 times the start (above) or 2^-20 times it (below, a fractional key).
    Range,
    /// 1, the smallest integer above 0 (an integer key).
    Floor,
}

/// The last value the search may try one way, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// The value.
    pub value: f64,
    /// Why nothing beyond it is tried.
    pub stop: Stop,
}

/// The range of values a search may try.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The smallest.
    pub low: Limit,
    /// The largest.
    pub high: Limit,
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
    /// The values it could try.
    pub limits: Limits,
}

impl Found {
    /// A failing value and a passing one that contradict the assumption that passing is
    /// monotone (with `--max`, a value fails below one that passes; with `--min`, above one),
    /// the nearest such pair; `None` if the probes agree with it.
    pub fn contradiction(&self, max: bool) -> Option<(f64, f64)> {
        let passing = || self.probes.iter().filter(|p| p.passes()).map(|p| p.value);
        let failing = self.probes.iter().filter(|p| !p.passes()).map(|p| p.value);
        // --max: the largest failing value below a passing one, and the smallest passing
        // value above it; --min: the mirror image.
        if max {
            let top = passing().fold(f64::NEG_INFINITY, f64::max);
            let f = failing.filter(|f| *f < top).fold(f64::NAN, f64::max);
            let p = passing().filter(|p| *p > f).fold(f64::NAN, f64::min);
            (!f.is_nan()).then_some((f, p))
        } else {
            let bottom = passing().fold(f64::INFINITY, f64::min);
            let f = failing.filter(|f| *f > bottom).fold(f64::NAN, f64::min);
            let p = passing().filter(|p| *p < f).fold(f64::NAN, f64::max);
            (!f.is_nan()).then_some((f, p))
        }
    }

    /// The values that pass, from the smallest, each once.
    pub fn passing_values(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .probes
            .iter()
            .filter(|p| p.passes())
            .map(|p| p.value)
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }

    /// The value of a probe nearest to `p` that contradicts it (see
    /// [`Found::contradiction`]): for a failing probe a passing value on its failing side, for
    /// a passing probe a failing value on its passing side.
    pub fn contradicts(&self, p: &Probe, max: bool) -> Option<f64> {
        // With --max a value fails below a pass; with --min above one.
        let wrong_side = |fail: f64, pass: f64| if max { fail < pass } else { fail > pass };
        self.probes
            .iter()
            .filter(|q| q.passes() != p.passes())
            .filter(|q| {
                if p.passes() {
                    wrong_side(q.value, p.value)
                } else {
                    wrong_side(p.value, q.value)
                }
            })
            .map(|q| q.value)
            .min_by(|a, b| (a - p.value).abs().total_cmp(&(b - p.value).abs()))
    }
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

/// Runs one probe at `value` with `seeds` seeds (the first `seeds` of the point).
fn probe(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    slo: &[Threshold],
    value: f64,
    step: Step,
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
            step,
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

/// How far a failure lies from passing: a missed objective's distance from its threshold
/// (infinite without a value), a busiest minute's requests over RPM × headroom.
fn shortfall(f: &Failure) -> f64 {
    match f {
        Failure::Objective {
            threshold,
            value: Some(v),
        } => match threshold.op {
            Op::Lt | Op::Le => v - threshold.limit,
            Op::Gt | Op::Ge => threshold.limit - v,
            Op::Eq => (v - threshold.limit).abs(),
        },
        Failure::Objective { value: None, .. } => f64::INFINITY,
        Failure::OverHeadroom { peak, allowed, .. } => peak - allowed,
    }
}

/// Whether `now` is closer to passing than `before`: some objective `before` misses is met by
/// `now`, or missed by less.
fn closer(before: &Probe, now: &Probe) -> bool {
    let same = |a: &Failure, b: &Failure| match (a, b) {
        (Failure::Objective { threshold: x, .. }, Failure::Objective { threshold: y, .. }) => {
            x == y
        }
        (Failure::OverHeadroom { .. }, Failure::OverHeadroom { .. }) => true,
        _ => false,
    };
    before.failures.iter().any(|b| {
        let then = shortfall(b);
        let now = now
            .failures
            .iter()
            .find(|n| same(b, n))
            .map_or(f64::NEG_INFINITY, shortfall);
        now < then
    })
}

/// `v` as the key takes it: rounded for an integer key.
fn round(spec: &SearchSpec, v: f64) -> f64 {
    if spec.integer {
        v.round()
    } else {
        v
    }
}

/// The next value from `v` one way, doubled or halved, within `limits` (`None`: `v` is the
/// limit).
fn next(spec: &SearchSpec, limits: &Limits, v: f64, up: bool) -> Option<f64> {
    let (low, high) = (limits.low.value, limits.high.value);
    let n = if up {
        round(
            spec,
            (v * 2.0)
                .min(high)
                .max(v + if spec.integer { 1.0 } else { 0.0 }),
        )
    } else {
        round(spec, (v / 2.0).max(low))
    };
    let beyond = if up {
        n > high || n == v
    } else {
        n < low || n == v
    };
    (!beyond).then_some(n)
}

/// Searches the scenario at `path` (with `sets`) along `spec`, reporting each probe to
/// `seen` as it finishes. The start must be a value the key takes (see [`outside`]).
pub fn search(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    slo: &[Threshold],
    opts: &SweepOptions,
    mut seen: impl FnMut(&Probe),
) -> Result<Found, SearchError> {
    if spec.metric.is_some() {
        return least::least(path, sets, spec, slo, opts, seen);
    }
    let limits = limits(path, sets, spec);
    let mut probes: Vec<Probe> = Vec::new();
    let mut run = |v: f64, step: Step, probes: &mut Vec<Probe>| -> Result<bool, SearchError> {
        let p = probe(path, sets, spec, slo, v, step, opts)?;
        seen(&p);
        let pass = p.passes();
        probes.push(p);
        Ok(pass)
    };
    let round = |v: f64| round(spec, v);
    let next = |v: f64, up: bool| next(spec, &limits, v, up);
    // "Up" is the direction of more load for --max (values fail above the answer), of more
    // capacity for --min (values pass above it). `good` is the passing side of the boundary.
    let up_fails = spec.max;
    let step = |up: bool| if up { Step::Up } else { Step::Down };
    let start = start(spec);
    let start_passes = run(start, Step::Start, &mut probes)?;
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
    while let Some(n) = next(v, towards_up) {
        v = n;
        if run(v, step(towards_up), &mut probes)? {
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
    // Nothing passed, up to the limit: the assumption says nothing will. Check it the other
    // way from the start, while the probes get closer to passing; a pass there contradicts
    // it, and the search carries on from that pass as from a passing start.
    if good.is_none() {
        let away = !towards_up;
        let check = if away { Step::CheckUp } else { Step::CheckDown };
        let mut v = start;
        let mut before = 0;
        while let Some(n) = next(v, away) {
            v = n;
            if run(v, check, &mut probes)? {
                good = Some(v);
                break;
            }
            if !closer(&probes[before], &probes[probes.len() - 1]) {
                break;
            }
            before = probes.len() - 1;
        }
        if let Some(g) = good {
            bad = None;
            let mut v = g;
            while let Some(n) = next(v, away) {
                v = n;
                if run(v, step(away), &mut probes)? {
                    good = Some(v);
                } else {
                    bad = Some(v);
                    break;
                }
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
            if run(mid, Step::Bisect, &mut probes)? {
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
        limits,
    })
}
