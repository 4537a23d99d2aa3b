//! A chart's data placed on its axes: durations put in the unit that suits them, x transformed
//! (log2, percentile), ranges padded and round-number ticks chosen, shared by every panel.

use std::borrow::Cow;
use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;

use super::{Chart, Series, XAxis};
use crate::fmt::fmt_num;

/// A unit of time, for an axis of durations ([`Chart::y_time`], [`Chart::x_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Minutes.
    Min,
}

impl TimeUnit {
    /// Milliseconds in one of the unit.
    pub fn ms(self) -> f64 {
        match self {
            TimeUnit::Ms => 1.0,
            TimeUnit::S => 1_000.0,
            TimeUnit::Min => 60_000.0,
        }
    }

    /// The unit's symbol: "ms", "s", "min".
    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
            TimeUnit::Min => "min",
        }
    }

    /// The unit a person reads `largest_ms` in without six digits: ms below 10 s, s below
    /// 10 min, min above.
    pub fn fitting(largest_ms: f64) -> TimeUnit {
        match largest_ms.abs() {
            v if v < 10_000.0 => TimeUnit::Ms,
            v if v < 600_000.0 => TimeUnit::S,
            _ => TimeUnit::Min,
        }
    }
}

/// A duration given in ms, for a label: ms below 1 s, s below 10 min, min above: "250 ms",
/// "2 s", "15 min".
pub fn duration(ms: f64) -> String {
    let unit = match ms.abs() {
        v if v < 1_000.0 => TimeUnit::Ms,
        v => TimeUnit::fitting(v.max(10_000.0)),
    };
    format!("{} {}", fmt_num(ms / unit.ms()), unit.symbol())
}

/// Every series of `chart`, of every panel.
pub(super) fn all_series(chart: &Chart) -> impl Iterator<Item = &Series> {
    chart
        .series
        .iter()
        .filter(|_| chart.panels.is_empty())
        .chain(chart.panels.iter().flat_map(|p| &p.series))
}

/// The panels of `chart`: (caption, lines); one without a caption if it has no panels.
pub(super) fn views(chart: &Chart) -> Vec<(Option<&str>, &[Series])> {
    if chart.panels.is_empty() {
        vec![(None, chart.series.as_slice())]
    } else {
        chart
            .panels
            .iter()
            .map(|p| (Some(p.title.as_str()), p.series.as_slice()))
            .collect()
    }
}

/// Rows and columns of the grid of `n` panels: one row up to three, then about square.
pub(super) fn grid(n: usize) -> (usize, usize) {
    let cols = if n <= 3 {
        n.max(1)
    } else {
        (n as f64).sqrt().ceil() as usize
    };
    (n.max(1).div_ceil(cols), cols)
}

/// `chart` with its durations in the unit that suits them and that unit in the axis labels
/// (borrowed as it is when neither axis is of time).
pub(super) fn in_units(chart: &Chart) -> Cow<'_, Chart> {
    if chart.x_time.is_none() && chart.y_time.is_none() {
        return Cow::Borrowed(chart);
    }
    let mut c = chart.clone();
    if let Some(from) = chart.x_time {
        let xs = all_series(chart)
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(
                chart
                    .references
                    .iter()
                    .flat_map(|r| r.steps.iter().map(|s| s.0)),
            );
        let to = fitting_unit(from, xs);
        let f = from.ms() / to.ms();
        for s in series_mut(&mut c) {
            s.points.iter_mut().for_each(|p| p.0 *= f);
        }
        for r in &mut c.references {
            r.steps.iter_mut().for_each(|s| s.0 *= f);
        }
        c.x_label = format!("{} ({})", c.x_label, to.symbol());
    }
    if let Some(from) = chart.y_time {
        let ys = all_series(chart)
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(chart.references.iter().map(|r| r.y))
            .chain(
                chart
                    .references
                    .iter()
                    .flat_map(|r| r.steps.iter().map(|s| s.1)),
            );
        let to = fitting_unit(from, ys);
        let f = from.ms() / to.ms();
        for s in series_mut(&mut c) {
            s.points.iter_mut().for_each(|p| p.1 *= f);
        }
        for r in &mut c.references {
            r.y *= f;
            r.steps.iter_mut().for_each(|s| s.1 *= f);
        }
        c.y_label = format!("{} ({})", c.y_label, to.symbol());
    }
    Cow::Owned(c)
}

/// The unit for `values` given in `from` (`from` itself when none is finite).
fn fitting_unit(from: TimeUnit, values: impl Iterator<Item = f64>) -> TimeUnit {
    let largest = values
        .filter(|v| v.is_finite())
        .map(f64::abs)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    largest.map_or(from, |v| TimeUnit::fitting(v * from.ms()))
}

/// Every series of `c`, of every panel, to change.
fn series_mut(c: &mut Chart) -> impl Iterator<Item = &mut Series> {
    c.series
        .iter_mut()
        .chain(c.panels.iter_mut().flat_map(|p| p.series.iter_mut()))
}

/// A chart's data placed on its axes: x transformed, ranges and ticks chosen.
pub(super) struct Prepared {
    /// Per panel (one for a chart without panels), per series: transformed, finite points.
    pub panels: Vec<Vec<Vec<(f64, f64)>>>,
    pub x: Range<f64>,
    pub y: Range<f64>,
    pub x_ticks: Vec<f64>,
    pub y_ticks: Vec<f64>,
    /// Decimal places of linear tick labels (x, y).
    pub x_decimals: usize,
    pub y_decimals: usize,
}

impl Prepared {
    /// Places `chart`'s points (already in their units, [`in_units`]).
    pub fn new(chart: &Chart) -> Self {
        let panels: Vec<Vec<Vec<(f64, f64)>>> = views(chart)
            .into_iter()
            .map(|(_, series)| {
                series
                    .iter()
                    .map(|s| {
                        s.points
                            .iter()
                            .filter(|(_, y)| y.is_finite())
                            .filter_map(|&(x, y)| place_x(chart.x_axis, x).map(|x| (x, y)))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let points = || panels.iter().flatten().flatten();
        let step_xs = chart
            .references
            .iter()
            .flat_map(|r| r.steps.iter().filter_map(|s| place_x(chart.x_axis, s.0)));
        let ref_ys = chart
            .references
            .iter()
            .flat_map(|r| std::iter::once(r.y).chain(r.steps.iter().map(|s| s.1)))
            .filter(|y| y.is_finite());

        let x = match (chart.x_axis, min_max(points().map(|p| p.0).chain(step_xs))) {
            (XAxis::Linear, None) => 0.0..1.0,
            (XAxis::Log2, None) => -0.3..6.3,
            (XAxis::Linear, Some((lo, hi))) => pad(lo, hi, 0.04, 0.0),
            (XAxis::Log2, Some((lo, hi))) => pad(lo, hi, 0.04, 0.25),
            (XAxis::Percentile, found) => {
                let hi = found.map_or(3.0, |(_, hi)| hi).max(1.0);
                -0.03 * hi..hi * 1.03
            }
        };
        let y = match min_max(points().map(|p| p.1).chain(ref_ys)) {
            None => 0.0..1.0,
            Some((lo, hi)) if chart.y_from_zero && lo >= 0.0 => 0.0..pad(0.0, hi, 0.06, 0.0).end,
            Some((lo, hi)) => pad(lo, hi, 0.06, 0.0),
        };
        // Narrow panels get fewer ticks.
        let (rows, cols) = grid(panels.len());
        let (x_ticks, x_decimals) = match chart.x_axis {
            XAxis::Linear => linear_ticks(&x, (10 / cols).max(3)),
            XAxis::Log2 | XAxis::Percentile => (integer_ticks(&x, (12 / cols).max(4)), 0),
        };
        let (y_ticks, y_decimals) = linear_ticks(&y, (8 / rows).max(3));
        Self {
            panels,
            x,
            y,
            x_ticks,
            y_ticks,
            x_decimals,
            y_decimals,
        }
    }

    /// Tick label for a transformed x value.
    pub fn x_tick_label(&self, axis: XAxis, v: f64) -> String {
        match axis {
            XAxis::Linear => number(v, self.x_decimals),
            XAxis::Log2 => format!("{}", 2f64.powf(v.round())),
            XAxis::Percentile => percentile_label(v.round()),
        }
    }
}

/// A linear f64 axis with ticks chosen here (plotters' `WithKeyPoints` lacks a label formatter).
pub(super) struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    pub fn new(range: &Range<f64>, ticks: &[f64]) -> Self {
        Self {
            inner: range.clone().into(),
            ticks: ticks.to_vec(),
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    /// The chosen ticks for bold grid lines and labels; no light grid lines.
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }
}

/// Where `x` sits on the axis, or `None` if it cannot be drawn there.
pub(super) fn place_x(axis: XAxis, x: f64) -> Option<f64> {
    if !x.is_finite() {
        return None;
    }
    match axis {
        XAxis::Linear => Some(x),
        XAxis::Log2 => (x > 0.0).then(|| x.log2()),
        XAxis::Percentile => (0.0..1.0).contains(&x).then(|| -(1.0 - x).log10()),
    }
}

/// Smallest and largest of `values`, if any.
fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// `lo..hi` widened by `frac` of its span on each side (at least `floor`); a zero span is widened
/// around its value.
fn pad(lo: f64, hi: f64, frac: f64, floor: f64) -> Range<f64> {
    let span = hi - lo;
    let margin = if span > 0.0 {
        span * frac
    } else if lo != 0.0 {
        lo.abs() * 0.1
    } else {
        1.0
    };
    let margin = margin.max(floor);
    lo - margin..hi + margin
}

/// Round-number ticks (steps of 1, 2 or 5 times a power of ten) inside `range`, about `target` of
/// them, and the decimal places their labels need.
fn linear_ticks(range: &Range<f64>, target: usize) -> (Vec<f64>, usize) {
    let raw = (range.end - range.start) / target as f64;
    let exponent = raw.log10().floor() as i32;
    let magnitude = 10f64.powi(exponent);
    let (mantissa, exponent) = match raw / magnitude {
        r if r <= 1.0 => (1.0, exponent),
        r if r <= 2.0 => (2.0, exponent),
        r if r <= 5.0 => (5.0, exponent),
        _ => (1.0, exponent + 1),
    };
    let step = mantissa * 10f64.powi(exponent);
    let decimals = (-exponent).max(0) as usize;
    let first = (range.start / step).ceil() as i64;
    let last = (range.end / step).floor() as i64;
    let ticks = (first..=last).map(|i| i as f64 * step).collect();
    (ticks, decimals)
}

/// Integer ticks inside `range`, thinned to at most about `max` of them.
fn integer_ticks(range: &Range<f64>, max: usize) -> Vec<f64> {
    let first = range.start.ceil() as i64;
    let last = range.end.floor() as i64;
    let count = (last - first + 1).max(1) as usize;
    let stride = count.div_ceil(max).max(1);
    (first..=last).step_by(stride).map(|i| i as f64).collect()
}

/// `v` with `decimals` places, without a "-0".
pub(super) fn number(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// Label of the percentile tick at `decades` = log10(1/(1-q)): "0%", "90%", "99%", "99.9%", ...
fn percentile_label(decades: f64) -> String {
    match decades as i64 {
        d if d <= 0 => "0%".into(),
        1 => "90%".into(),
        d => format!(
            "99{}{}%",
            if d > 2 { "." } else { "" },
            "9".repeat(d as usize - 2)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels() {
        let labels: Vec<String> = (0..5).map(|d| percentile_label(d as f64)).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
    }

    #[test]
    fn linear_ticks_are_round() {
        let (ticks, decimals) = linear_ticks(&(-0.3..10.4), 10);
        assert_eq!(decimals, 0);
        assert_eq!(ticks.first(), Some(&0.0));
        assert_eq!(ticks.last(), Some(&10.0));
        let (ticks, decimals) = linear_ticks(&(0.0..0.43), 10);
        assert_eq!((ticks.len(), decimals), (9, 2));
    }

    #[test]
    fn negative_zero_is_plain_zero() {
        assert_eq!(number(-0.0001, 2), "0.00");
        assert_eq!(number(-1.5, 1), "-1.5");
    }

    #[test]
    fn durations_take_the_unit_a_person_reads() {
        assert_eq!(TimeUnit::fitting(9_999.0), TimeUnit::Ms);
        assert_eq!(TimeUnit::fitting(250_000.0), TimeUnit::S);
        assert_eq!(TimeUnit::fitting(600_000.0), TimeUnit::Min);
        assert_eq!(duration(2000.0), "2 s");
        assert_eq!(duration(250.0), "250 ms");
        assert_eq!(duration(90_000.0 * 10.0), "15 min");
    }

    #[test]
    fn a_time_axis_is_scaled_and_labelled_in_its_unit() {
        let mut chart = Chart::new("t", "time", "latency", XAxis::Linear);
        chart.series = vec![Series::new("a", vec![(30.0, 250_000.0), (2400.0, 1.0)])];
        chart.y_time = Some(TimeUnit::Ms);
        chart.x_time = Some(TimeUnit::S);
        let c = in_units(&chart);
        assert_eq!(c.y_label, "latency (s)");
        assert_eq!(c.x_label, "time (min)");
        assert_eq!(c.series[0].points, [(0.5, 250.0), (40.0, 0.001)]);
        // Not a time axis: untouched.
        chart.x_time = None;
        chart.y_time = None;
        assert!(matches!(in_units(&chart), Cow::Borrowed(_)));
    }

    #[test]
    fn panels_fill_a_grid() {
        assert_eq!(grid(1), (1, 1));
        assert_eq!(grid(3), (1, 3));
        assert_eq!(grid(4), (2, 2));
        assert_eq!(grid(5), (2, 3));
    }
}
