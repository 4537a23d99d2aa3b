//! Charts for capacity reports: latency and throughput curves over a sweep, written as SVG (for
//! inlining into an HTML report) and PNG (for reading anywhere).
//!
//! Text is drawn with the bundled DejaVu Sans, registered with plotters under the family name
//! [`FONT_FAMILY`], so PNGs need no system fonts; PNG text is laid out glyph by glyph from the
//! font's own metrics (the `text` module). (An SVG names the family and leaves the glyphs to its viewer.)
//! Output is deterministic: the same [`Chart`] always gives byte-identical files.
//!
//! What a chart shows at a glance:
//! - durations in the unit that suits them ([`Chart::y_time`], [`Chart::x_time`]): ms, s or min;
//! - the legend beside the plot, never over a line;
//! - reference lines (limits, objectives), constant or stepping ([`Reference::steps`]), an
//!   objective labelled on its line ([`Reference::on_line`]);
//! - a note in place of data that is all zero ([`Chart::note`], e.g. "no 429s");
//! - small multiples: one panel per value of a third key ([`Chart::panels`]), sharing axes.
//!
//! A chart with no plottable point is still drawn (title, axes, legend) with a "no data" note in
//! the middle, rather than being an error.

mod axes;
mod render;
mod text;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::output::files::OutputSet;

pub use axes::{duration, TimeUnit};

/// Width of every chart, in pixels.
pub const WIDTH: u32 = 900;
/// Height of every chart, in pixels.
pub const HEIGHT: u32 = 560;
/// Font family of every text style; the bundled font is registered under this name, which an
/// SVG names as its CSS font list (DejaVu Sans where the viewer has it, as in the PNG).
pub const FONT_FAMILY: &str = "DejaVu Sans, sans-serif";

static FONT: &[u8] = include_bytes!("../../../../assets/fonts/DejaVuSans.ttf");

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

/// A reference line (e.g. "provider ceiling 600 RPM"), dashed and named in the legend:
/// horizontal at `y`, or a step line through [`Reference::steps`] (a limit that changes).
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// Legend text.
    pub label: String,
    /// Height of the line; a non-finite value (and no steps) leaves only the legend entry.
    pub y: f64,
    /// A limit that changes over x: `(from x, y)` in x order, each y holding until the next
    /// step and the last to the axis's end. Empty: the horizontal line at `y`.
    pub steps: Vec<(f64, f64)>,
    /// Also write the label on the line, at its right end (an objective).
    pub on_line: bool,
}

impl Reference {
    /// A horizontal reference line from its legend text and height.
    pub fn new(label: impl Into<String>, y: f64) -> Self {
        Self {
            label: label.into(),
            y,
            steps: Vec::new(),
            on_line: false,
        }
    }

    /// A step line from its legend text and steps `(from x, y)`, in x order.
    pub fn steps(label: impl Into<String>, steps: Vec<(f64, f64)>) -> Self {
        Self {
            y: steps.first().map_or(f64::NAN, |s| s.1),
            steps,
            ..Self::new(label, f64::NAN)
        }
    }

    /// The same line, its label also written on it.
    pub fn labelled_on_line(mut self) -> Self {
        self.on_line = true;
        self
    }
}

/// One panel of a chart of small multiples: its caption and lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Caption above the panel (e.g. "burst_s=2").
    pub title: String,
    /// Lines; a label has the same colour in every panel.
    pub series: Vec<Series>,
}

impl Panel {
    /// A panel from its caption and lines.
    pub fn new(title: impl Into<String>, series: Vec<Series>) -> Self {
        Self {
            title: title.into(),
            series,
        }
    }
}

/// Counts per bin of `bin_s` seconds, summed over the last 60 s at each bin's end and given
/// per minute: `(end of bin in s, per minute)` points of a rate over time (a bin wider than a
/// minute is its own window).
pub fn per_minute(bin_s: u64, counts: &[u64]) -> Vec<(f64, f64)> {
    let width = usize::try_from(bin_s.max(1)).unwrap_or(usize::MAX);
    let window = (60 / width).max(1);
    let mut sum = 0u64;
    let mut out = Vec::with_capacity(counts.len());
    for (i, &c) in counts.iter().enumerate() {
        sum += c;
        if i >= window {
            sum -= counts[i - window];
        }
        out.push((
            ((i + 1) * width) as f64,
            sum as f64 * 60.0 / (window * width) as f64,
        ));
    }
    out
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

/// A chart: title, axes, series and reference lines (or panels of series).
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Caption above the plot.
    pub title: String,
    /// X axis description, with its unit (e.g. "max concurrency (calls)"); for a time axis
    /// ([`Chart::x_time`]) without it: the chart adds the unit it picks.
    pub x_label: String,
    /// Y axis description, with its unit (e.g. "p99 latency (ms)"); for a time axis
    /// ([`Chart::y_time`]) without it.
    pub y_label: String,
    /// How the x axis is drawn.
    pub x_axis: XAxis,
    /// Lines, coloured from a fixed palette in order (unless [`Chart::panels`] has panels).
    pub series: Vec<Series>,
    /// Reference lines, drawn in every panel.
    pub references: Vec<Reference>,
    /// Start the y axis at 0 (when no value is negative).
    pub y_from_zero: bool,
    /// Small multiples: when not empty, one panel each (in a grid, axes shared) in place of
    /// [`Chart::series`].
    pub panels: Vec<Panel>,
    /// Text in the middle of a plot with no point to draw, in place of "no data" (e.g. "no 429s").
    pub note: Option<String>,
    /// The x values are durations in this unit: drawn in ms, s or min, whichever suits them,
    /// the unit added to the label. Only for a linear axis.
    pub x_time: Option<TimeUnit>,
    /// The y values (and references) are durations in this unit, drawn as for `x_time`.
    pub y_time: Option<TimeUnit>,
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
            panels: Vec::new(),
            note: None,
            x_time: None,
            y_time: None,
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

/// The text of every `<text>` element of a drawn SVG chart, trimmed and unescaped, in order:
/// what a reader of the chart sees written (titles, labels, legends, notes).
pub fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| {
            let body = &rest[rest.find('>')? + 1..];
            let text = body[..body.find("</text>")?].trim();
            Some(
                text.replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

/// The SVG as a string (for inlining into an HTML report).
pub fn svg(chart: &Chart) -> Result<String, ChartError> {
    ensure_font()?;
    let chart = axes::in_units(chart);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        render::draw(&root, &chart)
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
    let chart = axes::in_units(chart);
    let backend = text::CrispText::new(BitMapBackend::new(path, (WIDTH, HEIGHT)), FONT)
        .ok_or("the bundled chart font cannot be parsed")?;
    let root = backend.into_drawing_area();
    render::draw(&root, &chart)
        .and_then(|()| root.present())
        .map_err(|e| e.to_string())
}
