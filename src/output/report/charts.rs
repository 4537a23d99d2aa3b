//! Charts for capacity reports: latency and throughput curves over a sweep, written as SVG (for
//! inlining into an HTML report) and PNG (for reading anywhere).
//!
//! Text is drawn with the bundled DejaVu Sans, registered with plotters under the family name
//! [`FONT_FAMILY`], so PNGs need no system fonts. (An SVG names the family and leaves the glyphs
//! to its viewer.) Output is deterministic: the same [`Chart`] always gives byte-identical files.
//!
//! A chart with no plottable point is still drawn (title, axes, legend) with a "no data" note in
//! the middle, rather than being an error.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

use crate::output::files::OutputSet;

/// Width of every chart, in pixels.
pub const WIDTH: u32 = 900;
/// Height of every chart, in pixels.
pub const HEIGHT: u32 = 560;
/// Font family of every text style; the bundled font is registered under this name.
pub const FONT_FAMILY: &str = "sans-serif";

static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// Line colours, one per series in order (repeating after the last): matplotlib's "tab10".
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Reference line colours (dashed, so they differ from series even where the hue is close).
const REFERENCE_PALETTE: [RGBColor; 4] = [
    RGBColor(30, 30, 30),
    RGBColor(150, 30, 30),
    RGBColor(30, 30, 150),
    RGBColor(110, 110, 110),
];

/// The most points of a series drawn with a marker each.
const MAX_MARKED: usize = 100;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points `(x, y)`, joined in the order given. Non-finite points (and, on a log or percentile
    /// axis, points whose x cannot be placed) are skipped.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from its legend text and points.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            label: label.into(),
            points,
        }
    }
}

/// A horizontal reference line (e.g. "provider ceiling 600 RPM"), dashed and named in the legend.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// Legend text.
    pub label: String,
    /// Height of the line; a non-finite value leaves only the legend entry.
    pub y: f64,
}

impl Reference {
    /// A reference line from its legend text and height.
    pub fn new(label: impl Into<String>, y: f64) -> Self {
        Self {
            label: label.into(),
            y,
        }
    }
}

/// How the x axis is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XAxis {
    /// Plain linear axis with round-number ticks.
    #[default]
    Linear,
    /// Base-2 logarithmic axis (e.g. `max_concurrency` 1, 2, 4, ..., 64): ticks at powers of two
    /// with integer labels. Points with x <= 0 are skipped.
    Log2,
    /// HdrHistogram-style percentile axis: x given as a quantile in [0, 1), drawn at
    /// log10(1/(1-q)), ticks labelled "0%", "90%", "99%", "99.9%", "99.99%". Points with q outside
    /// [0, 1) are skipped.
    Percentile,
}

/// A chart: title, axes, series and reference lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Caption above the plot.
    pub title: String,
    /// X axis description, with its unit (e.g. "max concurrency (calls)").
    pub x_label: String,
    /// Y axis description, with its unit (e.g. "p99 latency (ms)").
    pub y_label: String,
    /// How the x axis is drawn.
    pub x_axis: XAxis,
    /// Lines, coloured from a fixed palette in order.
    pub series: Vec<Series>,
    /// Horizontal reference lines.
    pub references: Vec<Reference>,
    /// Start the y axis at 0 (when no value is negative).
    pub y_from_zero: bool,
}

impl Chart {
    /// A chart with no series or references, y axis fitted to the data.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        x_axis: XAxis,
    ) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_axis,
            series: Vec::new(),
            references: Vec::new(),
            y_from_zero: false,
        }
    }
}

/// Why a chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The bundled font could not be parsed or registered.
    #[error("could not register the bundled chart font under {FONT_FAMILY:?}")]
    Font,
    /// Plotters failed to draw the chart into `target` (a file, or "SVG string").
    #[error("chart {chart:?}: could not draw {target}: {message}")]
    Draw {
        /// Title of the chart.
        chart: String,
        /// The file (or in-memory SVG) being drawn.
        target: String,
        /// Plotters' error.
        message: String,
    },
    /// A chart file could not be written or moved into place.
    #[error("chart {chart:?}: could not write {}: {source}", path.display())]
    Io {
        /// Title of the chart.
        chart: String,
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Registers the bundled font under [`FONT_FAMILY`], once per process.
fn ensure_font() -> Result<(), ChartError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok =
        *REGISTERED.get_or_init(|| register_font(FONT_FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(ChartError::Font)
    }
}

/// Writes `dir/<stem>.svg` and `dir/<stem>.png` (width 900 x 560 px) together through an
/// the all-or-nothing output writer: both or neither, nothing temporary left. `dir` must exist.
pub fn write(chart: &Chart, dir: &Path, stem: &str) -> Result<(), ChartError> {
    let svg_text = svg(chart)?; // Registers the font, which render_png needs.
    let io_err = |path: &Path, source| ChartError::Io {
        chart: chart.title.clone(),
        path: path.to_path_buf(),
        source,
    };
    if !dir.is_dir() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder");
        return Err(io_err(dir, missing));
    }
    let mut set = OutputSet::new();
    put(&mut set, chart, dir, stem, svg_text);
    set.commit()
        .map_err(|e| io_err(&e.path, std::io::Error::other(e.why)))
}

/// Declares `dir/<stem>.svg` and `dir/<stem>.png` as outputs of `set`, named by `--out`.
pub fn declare(set: &mut OutputSet, dir: &Path, stem: &str) {
    for ext in ["svg", "png"] {
        set.output(dir.join(format!("{stem}.{ext}")), "--out");
    }
}

/// Gives `dir/<stem>.svg` (`svg_text`, as [`svg`] drew it, which also registers the font) and
/// `dir/<stem>.png` their content in `set`; the PNG is drawn when the set is committed.
pub fn put<'a>(
    set: &mut OutputSet<'a>,
    chart: &'a Chart,
    dir: &Path,
    stem: &str,
    svg_text: String,
) {
    set.put(dir.join(format!("{stem}.svg")), svg_text);
    set.put_with(dir.join(format!("{stem}.png")), move |path| {
        render_png(chart, path).map_err(|message| format!("chart {:?}: {message}", chart.title))
    });
}

/// The SVG as a string (for inlining into an HTML report).
pub fn svg(chart: &Chart) -> Result<String, ChartError> {
    ensure_font()?;
    let prepared = Prepared::new(chart);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, chart, &prepared)
            .and_then(|()| root.present())
            .map_err(|e| ChartError::Draw {
                chart: chart.title.clone(),
                target: "SVG string".into(),
                message: e.to_string(),
            })?;
    }
    Ok(out)
}

/// Draws `chart` into a PNG at `path` (the font already registered); the error is plotters' message.
fn render_png(chart: &Chart, path: &Path) -> Result<(), String> {
    let prepared = Prepared::new(chart);
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(&root, chart, &prepared)
        .and_then(|()| root.present())
        .map_err(|e| e.to_string())
}

/// A chart's data placed on its axes: x transformed, ranges and ticks chosen.
struct Prepared {
    /// Per series: transformed, finite points.
    series: Vec<Vec<(f64, f64)>>,
    x: Range<f64>,
    y: Range<f64>,
    x_ticks: Vec<f64>,
    y_ticks: Vec<f64>,
    /// Decimal places of linear tick labels (x, y).
    x_decimals: usize,
    y_decimals: usize,
    /// No series has a point to draw.
    empty: bool,
}

impl Prepared {
    fn new(chart: &Chart) -> Self {
        let series: Vec<Vec<(f64, f64)>> = chart
            .series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .filter(|(_, y)| y.is_finite())
                    .filter_map(|&(x, y)| place_x(chart.x_axis, x).map(|x| (x, y)))
                    .collect()
            })
            .collect();
        let xs = series.iter().flatten().map(|p| p.0);
        let ys = series.iter().flatten().map(|p| p.1);
        let empty = series.iter().all(Vec::is_empty);
        let ref_ys = chart
            .references
            .iter()
            .map(|r| r.y)
            .filter(|y| y.is_finite());

        let x = match (chart.x_axis, min_max(xs)) {
            (XAxis::Linear, None) => 0.0..1.0,
            (XAxis::Log2, None) => -0.3..6.3,
            (XAxis::Linear, Some((lo, hi))) => pad(lo, hi, 0.04, 0.0),
            (XAxis::Log2, Some((lo, hi))) => pad(lo, hi, 0.04, 0.25),
            (XAxis::Percentile, found) => {
                let hi = found.map_or(3.0, |(_, hi)| hi).max(1.0);
                -0.03 * hi..hi * 1.03
            }
        };
        let y = match min_max(ys.chain(ref_ys)) {
            None => 0.0..1.0,
            Some((lo, hi)) if chart.y_from_zero && lo >= 0.0 => 0.0..pad(0.0, hi, 0.06, 0.0).end,
            Some((lo, hi)) => pad(lo, hi, 0.06, 0.0),
        };
        let (x_ticks, x_decimals) = match chart.x_axis {
            XAxis::Linear => linear_ticks(&x, 10),
            XAxis::Log2 | XAxis::Percentile => (integer_ticks(&x, 12), 0),
        };
        let (y_ticks, y_decimals) = linear_ticks(&y, 8);
        Self {
            series,
            x,
            y,
            x_ticks,
            y_ticks,
            x_decimals,
            y_decimals,
            empty,
        }
    }

    /// The legend corner with the fewest points (and reference lines) under it.
    fn legend_corner(&self, chart: &Chart) -> SeriesLabelPosition {
        let nx = |x: f64| (x - self.x.start) / (self.x.end - self.x.start);
        let ny = |y: f64| (y - self.y.start) / (self.y.end - self.y.start);
        let corners = [
            (SeriesLabelPosition::UpperRight, false, true),
            (SeriesLabelPosition::UpperLeft, true, true),
            (SeriesLabelPosition::LowerRight, false, false),
            (SeriesLabelPosition::LowerLeft, true, false),
        ];
        let in_band = |v: f64, low: bool| if low { v <= 0.45 } else { v >= 0.55 };
        let mut best = (SeriesLabelPosition::UpperRight, usize::MAX);
        for (pos, left, upper) in corners {
            let points = self
                .series
                .iter()
                .flatten()
                .filter(|&&(x, y)| in_band(nx(x), left) && in_band(ny(y), !upper))
                .count();
            let lines = chart
                .references
                .iter()
                .filter(|r| r.y.is_finite() && in_band(ny(r.y), !upper))
                .count();
            let score = points + 5 * lines;
            if score < best.1 {
                best = (pos, score);
            }
        }
        best.0
    }

    /// Tick label for a transformed x value.
    fn x_tick_label(&self, axis: XAxis, v: f64) -> String {
        match axis {
            XAxis::Linear => number(v, self.x_decimals),
            XAxis::Log2 => format!("{}", 2f64.powf(v.round())),
            XAxis::Percentile => percentile_label(v.round()),
        }
    }
}

/// A linear f64 axis with ticks chosen here (plotters' `WithKeyPoints` lacks a label formatter).
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: &Range<f64>, ticks: &[f64]) -> Self {
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
fn place_x(axis: XAxis, x: f64) -> Option<f64> {
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
fn number(v: f64, decimals: usize) -> String {
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

/// Draws the whole chart onto `root`.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    p: &Prepared,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let y_fmt = |v: &f64| number(*v, p.y_decimals);
    let x_fmt = |v: &f64| p.x_tick_label(chart.x_axis, *v);
    let widest_y = p.y_ticks.iter().map(|v| y_fmt(v).len()).max().unwrap_or(1);
    let y_area = (44 + 9 * widest_y as u32).clamp(64, 180);

    let mut ctx = ChartBuilder::on(root)
        .caption(&chart.title, (FONT_FAMILY, 24).into_font().color(&BLACK))
        .margin(18)
        .x_label_area_size(56)
        .y_label_area_size(y_area)
        .build_cartesian_2d(Ticked::new(&p.x, &p.x_ticks), Ticked::new(&p.y, &p.y_ticks))?;
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FONT_FAMILY, 15).into_font().color(&BLACK))
        .axis_desc_style((FONT_FAMILY, 17).into_font().color(&BLACK))
        .bold_line_style(RGBColor(225, 225, 225).stroke_width(1))
        .axis_style(BLACK.stroke_width(1))
        .draw()?;

    for (i, r) in chart.references.iter().enumerate() {
        let color = REFERENCE_PALETTE[i % REFERENCE_PALETTE.len()];
        let style = color.stroke_width(2);
        let line = if r.y.is_finite() {
            vec![(p.x.start, r.y), (p.x.end, r.y)]
        } else {
            Vec::new()
        };
        ctx.draw_series(DashedLineSeries::new(line, 9, 6, style))?
            .label(r.label.as_str())
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (7, 0)], style)
                    + PathElement::new(vec![(13, 0), (20, 0)], style)
            });
    }

    for (i, (s, points)) in chart.series.iter().zip(&p.series).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let label = if points.is_empty() {
            format!("{} (no data)", s.label)
        } else {
            s.label.clone()
        };
        // A dense series is drawn thin: a thick line's sharp turns draw spikes past the data.
        let width = if points.len() <= MAX_MARKED { 2 } else { 1 };
        ctx.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(width),
        ))?
        .label(label)
        .legend(move |(x, y)| {
            EmptyElement::at((x + 10, y))
                + PathElement::new(vec![(-10, 0), (10, 0)], color.stroke_width(2))
                + Circle::new((0, 0), 4, color.filled())
        });
        // A dense series (a time series) is a line: markers would hide it.
        if points.len() <= MAX_MARKED {
            ctx.draw_series(points.iter().map(|&pt| Circle::new(pt, 4, color.filled())))?;
        }
    }

    if p.empty {
        let centre = ((p.x.start + p.x.end) / 2.0, (p.y.start + p.y.end) / 2.0);
        let style = (FONT_FAMILY, 22)
            .into_font()
            .color(&RGBColor(110, 110, 110))
            .pos(Pos::new(HPos::Center, VPos::Center));
        ctx.plotting_area()
            .draw(&Text::new("no data", centre, style))?;
    }

    if !chart.series.is_empty() || !chart.references.is_empty() {
        ctx.configure_series_labels()
            .position(p.legend_corner(chart))
            .margin(12)
            .label_font((FONT_FAMILY, 15).into_font().color(&BLACK))
            .background_style(WHITE.filled())
            .border_style(BLACK.stroke_width(1))
            .draw()?;
    }
    Ok(())
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
}
