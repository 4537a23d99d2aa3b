//! A sweep's grid: the axes from the scenario's `[sweep]` table and `--sweep` flags, the points
//! of their product, and each run's seed.

use std::path::Path;

use crate::engine::scenario::bounds::MAX_SEED;
use crate::engine::scenario::{self, sweep_slo, Axis, AxisValue, Scenario, ScenarioError};
use crate::engine::workload::stream_seed;

/// Grids larger than this need `--force`.
pub const MAX_POINTS: usize = 10_000;

/// One point of the grid: a value for every axis, in axis order.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// `(key, value)` per axis.
    pub values: Vec<(String, AxisValue)>,
}

impl Point {
    /// `key=value` overrides for this point.
    pub fn sets(&self) -> Vec<String> {
        self.values
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_toml()))
            .collect()
    }

    /// `max_concurrency=4 headroom=0.7`: the last segment of each key, for labels.
    pub fn label(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| format!("{}={v}", k.rsplit('.').next().unwrap_or(k)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The value of `key` at this point, if it is swept.
    pub fn get(&self, key: &str) -> Option<&AxisValue> {
        self.values.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// FNV-1a of `text`: a stable hash (std's hashers may change between releases).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The seed of `repeat` (0-based) at `point`: derived from the scenario's seed and the point's
/// values, so it does not depend on the order points run in, nor on the rest of the grid. It
/// lies in the range of a scenario's `seed`, so a point can be rerun with `--seed`.
pub fn seed(base: u64, point: &Point, repeat: u32) -> u64 {
    let id = point.sets().join(";");
    stream_seed(base ^ fnv1a(&id), 0x5EED_0000 + u64::from(repeat)) & MAX_SEED
}

/// Reads a `--sweep key=values` flag: values as in `[sweep]` (`[1, 2, 4]`, `"1..=64"`,
/// `{ from = 1, to = 64 }`), or written bare: `1,2,4`, `1..=64` or words, `local,shared`.
pub fn flag(text: &str) -> Result<Axis, String> {
    let (key, values) = text.split_once('=').ok_or_else(|| {
        format!("--sweep {text:?}: expected key.path=values, e.g. scheduler.max_concurrency=1,2,4")
    })?;
    let (key, values) = (key.trim(), values.trim());
    let literal = if values.starts_with(['[', '{', '"']) {
        values.to_string()
    } else if values.contains("..=") {
        format!("\"{values}\"")
    } else {
        format!("[{values}]")
    };
    let read = |literal: &str| {
        toml::from_str::<toml::Table>(&format!("v = {literal}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
    };
    // Bare words are quoted one by one: `local,shared` is `["local", "shared"]`.
    let words = || {
        let quoted: Vec<String> = values
            .split(',')
            .map(|w| toml::Value::String(w.trim().to_string()).to_string())
            .collect();
        read(&format!("[{}]", quoted.join(", ")))
    };
    // An integer TOML cannot hold is named, not read as a word.
    let value = scenario::toml_value(key, &literal)
        .map_err(|m| format!("--sweep {text:?}: {m}"))?
        .or_else(|| (!values.starts_with(['[', '{', '"'])).then(words).flatten())
        .ok_or_else(|| format!("--sweep {text:?}: cannot read {values:?} as a list or a range"))?;
    sweep_slo::axis(key, &value).map_err(|e| format!("--sweep {key}: {}", e.message))
}

/// The grid of a sweep and the scenario of each point.
#[derive(Debug, Clone)]
pub struct Grid {
    /// Every point, with its validated scenario; the first axis varies slowest.
    pub points: Vec<(Point, Scenario)>,
    /// The `[sweep]` keys a `--set` pinned to one value, each with the `--set` argument:
    /// they are not swept.
    pub pinned: Vec<(String, String)>,
}

/// The `--set` among `sets` that decides `key`, if any.
fn set_of<'a>(sets: &'a [String], key: &str) -> Option<&'a String> {
    sets.iter()
        .find(|s| scenario::set_key(s).is_some_and(|k| scenario::key_within(key, k)))
}

/// Why a grid cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum GridError {
    /// A scenario (base, or at some point) is invalid.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// A flag is malformed, the grid is empty or too large.
    #[error("{0}")]
    Flag(String),
}

impl Grid {
    /// The grid of the scenario at `path` (with `sets` applied), its `[sweep]` axes replaced or
    /// extended by `flags`. Every point's scenario is validated before anything runs.
    pub fn build(
        path: &Path,
        sets: &[String],
        flags: &[String],
        force: bool,
    ) -> Result<Grid, GridError> {
        let text = scenario::read(path)?;
        let base = scenario::parse(&text, path, sets)?;
        let mut axes = base.sweep.clone();
        for f in flags {
            let axis = flag(f).map_err(GridError::Flag)?;
            if let Some(set) = set_of(sets, &axis.key) {
                return Err(GridError::Flag(format!(
                    "--set {set} and --sweep {f} both give {}: keep one",
                    axis.key
                )));
            }
            match axes.iter_mut().find(|a| a.key == axis.key) {
                Some(a) => *a = axis,
                None => axes.push(axis),
            }
        }
        // A --set of a key the [sweep] table varies pins it: the key is not swept.
        let mut pinned = Vec::new();
        axes.retain(|a| match set_of(sets, &a.key) {
            Some(set) => {
                pinned.push((a.key.clone(), set.clone()));
                false
            }
            None => true,
        });
        if axes.is_empty() {
            let why = match pinned.as_slice() {
                [] => String::new(),
                p => format!(
                    " (--set pinned every swept key: {})",
                    p.iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(GridError::Flag(format!(
                "{}: nothing to sweep{why}: add a [sweep] table (e.g. \"scheduler.max_concurrency\" = [1, 2, 4, 8]) or --sweep key=values",
                path.display()
            )));
        }
        if let Some(prefer) = base.prefer.as_ref() {
            let swept = axes.iter().find(|a| a.key == prefer.key);
            // A metric of summary.json (`min cost.per_good_query_usd`), or a swept number.
            let metric = swept.is_none()
                && crate::engine::summary::Summary::is_metric(&prefer.key, &base.provider_names());
            if !metric && !swept.is_some_and(|a| a.values[0].is_number()) {
                let keys: Vec<&str> = axes.iter().map(|a| a.key.as_str()).collect();
                return Err(GridError::Flag(format!(
                    "{}: sweep.prefer: \"{prefer}\" names neither a swept key of numbers nor a metric of summary.json (swept: {}; a metric such as cost.per_good_query_usd)",
                    path.display(),
                    keys.join(", ")
                )));
            }
        }
        // The first key is the charts' x axis and orders the recommendation: a number.
        if let Some(words) = axes.first().filter(|a| !a.values[0].is_number()) {
            return Err(GridError::Flag(format!(
                "{}: sweep.\"{}\": the first swept key must take numbers (it is the charts' x axis); put a key of words such as fleet.limiter after one of numbers",
                path.display(),
                words.key
            )));
        }
        let size = axes
            .iter()
            .try_fold(1usize, |n, a| n.checked_mul(a.values.len()))
            .unwrap_or(usize::MAX);
        if size > MAX_POINTS && !force {
            return Err(GridError::Flag(format!(
                "the grid has {size} points (more than {MAX_POINTS}); pass --force to run it anyway"
            )));
        }
        let points = Self::points(&text, path, sets, &axes, size)?;
        Ok(Grid { points, pinned })
    }

    /// The grid of one `axis` over the scenario at `path` with `sets` applied, its `[sweep]`
    /// table left aside: the probes of `capsize search`.
    pub fn single(path: &Path, sets: &[String], axis: Axis) -> Result<Grid, GridError> {
        let text = scenario::read(path)?;
        let size = axis.values.len();
        let points = Self::points(&text, path, sets, &[axis], size)?;
        Ok(Grid {
            points,
            pinned: Vec::new(),
        })
    }

    /// Every point of the product of `axes` (`size` of them), each validated.
    fn points(
        text: &str,
        path: &Path,
        sets: &[String],
        axes: &[Axis],
        size: usize,
    ) -> Result<Vec<(Point, Scenario)>, GridError> {
        let mut points = Vec::with_capacity(size);
        for i in 0..size {
            let mut rest = i;
            let mut values = vec![(String::new(), AxisValue::Int(0)); axes.len()];
            for (slot, axis) in values.iter_mut().zip(axes).rev() {
                let n = axis.values.len();
                *slot = (axis.key.clone(), axis.values[rest % n].clone());
                rest /= n;
            }
            let point = Point { values };
            let all: Vec<String> = sets.iter().cloned().chain(point.sets()).collect();
            let s = scenario::parse(text, path, &all).map_err(|mut e| {
                // Name the sweep, not --set, as where a swept value came from.
                if e.key.as_ref().is_some_and(|k| point.get(k).is_some()) {
                    e.message = e
                        .message
                        .replace("(from --set ", "(a swept value: ")
                        .replace("--set ", "sweep ");
                }
                e
            })?;
            points.push((point, s));
        }
        Ok(points)
    }
}
