//! The values a search may try: the key's own bounds (found by asking the scenario's
//! validation), `--to` and the range around the start; and how a value is shown and set.

use super::{Limit, Limits, SearchSpec, Stop};
use crate::analysis::sweep::grid::{Grid, GridError};
use crate::engine::scenario::{Axis, AxisValue};

/// `v` as the key's value is written (`4`, `1.0625`).
pub fn shown(spec: &SearchSpec, v: f64) -> String {
    axis_value(spec, v).to_string()
}

/// `v` as the key's value (an integer rounded).
pub(super) fn axis_value(spec: &SearchSpec, v: f64) -> AxisValue {
    if spec.integer {
        AxisValue::Int(v.round() as i64)
    } else {
        AxisValue::Float(v)
    }
}

/// The value a search starts from: `from`, rounded for an integer key.
pub fn start(spec: &SearchSpec) -> f64 {
    if spec.integer {
        spec.from.round()
    } else {
        spec.from
    }
}

/// 2^20: how far the search goes from the start without `--to` (up), and for a fractional key
/// down.
const RANGE: f64 = (1u32 << 20) as f64;

/// Whether the scenario (with `sets`) takes `v` as the key's value: the validation a probe's
/// point goes through, without running it.
fn takes(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    v: f64,
) -> Result<(), GridError> {
    takes_value(path, sets, spec, axis_value(spec, v))
}

/// As [`takes`], for a value of either type.
fn takes_value(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    v: AxisValue,
) -> Result<(), GridError> {
    let axis = Axis {
        key: spec.key.clone(),
        values: vec![v],
    };
    Grid::single(path, sets, axis).map(|_| ())
}

/// Between `ok`, a value the key takes, and `bad`, one it does not (either above the other),
/// the value it takes nearest to `bad`: the key's bound that way. Integers are bisected as
/// integers, fractions on their bit patterns (a positive float's order), so the bound is exact.
fn edge(spec: &SearchSpec, ok_at: impl Fn(f64) -> bool, mut ok: f64, mut bad: f64) -> f64 {
    if spec.integer {
        while (bad - ok).abs() > 1.0 {
            let mid = ((ok + bad) / 2.0).floor();
            if mid == ok || mid == bad {
                break;
            }
            if ok_at(mid) {
                ok = mid;
            } else {
                bad = mid;
            }
        }
        ok
    } else {
        let (mut o, mut b) = (ok.to_bits(), bad.to_bits());
        while o.abs_diff(b) > 1 {
            let mid = o / 2 + b / 2 + (o & b & 1);
            if ok_at(f64::from_bits(mid)) {
                o = mid;
            } else {
                b = mid;
            }
        }
        f64::from_bits(o)
    }
}

/// Where a value given for the key lies, when the scenario does not take it.
#[derive(Debug)]
pub enum Outside {
    /// Above the largest value the key takes (that value).
    Above(f64),
    /// Below the smallest value the key takes (that value).
    Below(f64),
    /// The key takes no value near it (the key itself is refused): the scenario's error.
    Refused(GridError),
}

/// `None` if the scenario takes `v` as the key's value; otherwise the bound it lies beyond,
/// found from `anchor` (a value the key takes, e.g. the scenario's own) or, without one, from
/// 1 and the powers of two around `v`.
pub fn outside(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    v: f64,
    anchor: Option<f64>,
) -> Option<Outside> {
    let ok_at = |x: f64| takes(path, sets, spec, x).is_ok();
    let err = takes(path, sets, spec, v).err()?;
    let round = |x: f64| if spec.integer { x.round() } else { x };
    let near = (1..=64).flat_map(|k| {
        let f = 2f64.powi(k);
        [v * f, v / f]
    });
    let anchor = anchor
        .into_iter()
        .chain([1.0])
        .chain(near)
        .map(round)
        .find(|a| a.is_finite() && *a > 0.0 && ok_at(*a));
    Some(match anchor {
        None => Outside::Refused(err),
        Some(a) if a > v => Outside::Below(edge(spec, ok_at, a, v)),
        Some(a) => Outside::Above(edge(spec, ok_at, a, v)),
    })
}

/// The values a search may try: from the start up to `--to` (default 2^20 × the start) and
/// down to 1 (an integer key) or 2^-20 × the start, each within the key's own bounds (the
/// values the scenario's validation takes). A limit is the key's own ([`Stop::Key`]) when the
/// scenario takes no number at all beyond it. The start must be a value the key takes.
pub fn limits(path: &std::path::Path, sets: &[String], spec: &SearchSpec) -> Limits {
    let ok_at = |x: f64| takes(path, sets, spec, x).is_ok();
    // Whether the key takes a number just beyond `x`: the next integer of an integer key, or
    // the next fraction (even for an integer key: `workload.arrival_rate = 1` takes 0.5;
    // `scheduler.max_concurrency` takes 0, unbounded, but no fraction).
    let beyond = |x: f64, up: bool| {
        let step = if up { 1.0 } else { -1.0 };
        let next = f64::from_bits(if up { x.to_bits() + 1 } else { x.to_bits() - 1 });
        (spec.integer && ok_at(x + step))
            || takes_value(path, sets, spec, AxisValue::Float(next)).is_ok()
    };
    let start = start(spec);
    let (high, stop) = match spec.to {
        Some(to) if spec.integer => (to.floor(), Stop::To),
        Some(to) => (to, Stop::To),
        None => (start * RANGE, Stop::Range),
    };
    let high = if high <= start || ok_at(high) {
        let value = high.max(start);
        Limit {
            value,
            stop: if beyond(value, true) { stop } else { Stop::Key },
        }
    } else {
        Limit {
            value: edge(spec, ok_at, start, high),
            stop: Stop::Key,
        }
    };
    let (low, stop) = if spec.integer {
        (1.0, Stop::Floor)
    } else {
        (start / RANGE, Stop::Range)
    };
    let low = if low >= start || ok_at(low) {
        let value = low.min(start);
        Limit {
            value,
            stop: if beyond(value, false) {
                stop
            } else {
                Stop::Key
            },
        }
    } else {
        Limit {
            value: edge(spec, ok_at, start, low),
            stop: Stop::Key,
        }
    };
    Limits { low, high }
}
