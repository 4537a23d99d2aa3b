//! Drawing a [`Chart`] onto any plotters backend: the title, one plot or a grid of panels
//! sharing their axes, reference lines (horizontal or stepping, an objective labelled on its
//! line), the series, a note where a plot has nothing to draw, and the legend in a column of
//! its own to the right of the plots, so it never covers a line.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axes::{grid, number, views, Prepared, Ticked};
use super::{Chart, Reference, Series, FONT_FAMILY};

/// Line colours, one per series label in order (repeating after the last): matplotlib's "tab10".
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

/// Height of one legend entry, in pixels.
const LEGEND_ROW: i32 = 22;
/// Widest legend column, in pixels (longer labels are cut by the image's edge).
const LEGEND_MAX: i32 = 320;

/// A series' points placed on the axes.
type Placed = Vec<(f64, f64)>;

/// What a legend entry shows beside its label.
enum Swatch {
    /// A dashed reference line.
    Dashed(RGBColor),
    /// A series: a line with a marker.
    Line(RGBColor),
}

/// The legend: reference lines, then one entry per series label (the same in every panel).
fn legend(chart: &Chart, p: &Prepared) -> Vec<(String, Swatch)> {
    let mut out: Vec<(String, Swatch)> = chart
        .references
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let c = REFERENCE_PALETTE[i % REFERENCE_PALETTE.len()];
            (r.label.clone(), Swatch::Dashed(c))
        })
        .collect();
    let labels = series_labels(chart);
    for (i, label) in labels.iter().enumerate() {
        let has_points = views(chart)
            .iter()
            .zip(&p.panels)
            .any(|((_, series), points)| {
                series
                    .iter()
                    .zip(points)
                    .any(|(s, pts)| s.label == *label && !pts.is_empty())
            });
        let text = if has_points {
            label.clone()
        } else {
            format!("{label} (no data)")
        };
        out.push((text, Swatch::Line(PALETTE[i % PALETTE.len()])));
    }
    out
}

/// The distinct series labels of every panel, in order of first appearance.
fn series_labels(chart: &Chart) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for s in super::axes::all_series(chart) {
        if !labels.contains(&s.label) {
            labels.push(s.label.clone());
        }
    }
    labels
}

/// Draws the whole chart onto `root`.
pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let p = Prepared::new(chart);
    let body = root
        .margin(12, 8, 8, 14)
        .titled(&chart.title, (FONT_FAMILY, 24).into_font().color(&BLACK))?;
    let entries = legend(chart, &p);
    let label_font = (FONT_FAMILY, 15).into_font().color(&BLACK);
    let mut widest = 0;
    for (text, _) in &entries {
        widest = widest.max(root.estimate_text_size(text, &label_font)?.0 as i32);
    }
    let legend_w = if entries.is_empty() {
        0
    } else {
        (widest + 72).min(LEGEND_MAX)
    };
    let (w, _) = body.dim_in_pixel();
    let (plots, legend_area) = body.split_horizontally(w as i32 - legend_w);

    let views = views(chart);
    let labels = series_labels(chart);
    // Panels share one description per axis, beside the whole grid.
    let plots = if views.len() > 1 {
        axis_descriptions(&plots, chart)?
    } else {
        plots
    };
    let areas = plots.split_evenly(grid(views.len()));
    let mut plot_top = None;
    for (((title, series), points), area) in views.iter().zip(&p.panels).zip(&areas) {
        let names_axes = views.len() == 1;
        let top = panel(
            area,
            chart,
            &p,
            (*title, series, points),
            &labels,
            names_axes,
        )?;
        plot_top.get_or_insert(top);
    }

    if !entries.is_empty() {
        let top = plot_top.unwrap_or(0) - legend_area.get_base_pixel().1;
        draw_legend(&legend_area, &entries, top.max(0), legend_w)?;
    }
    Ok(())
}

/// Writes the chart's x axis description under `area` and its y axis description along its
/// left side; returns what is left for the panels.
fn axis_descriptions<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    let (w, h) = area.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    let font = (FONT_FAMILY, 17).into_font().color(&BLACK);
    let centred = Pos::new(HPos::Center, VPos::Center);
    let (upper, x_strip) = area.split_vertically(h - 26);
    let (y_strip, panels) = upper.split_horizontally(26);
    x_strip.draw(&Text::new(
        chart.x_label.as_str(),
        (w / 2, 12),
        font.clone().pos(centred),
    ))?;
    let rotated = font.transform(FontTransform::Rotate270).pos(centred);
    y_strip.draw(&Text::new(
        chart.y_label.as_str(),
        (12, (h - 26) / 2),
        rotated,
    ))?;
    Ok(panels)
}

/// Draws one panel (`title`, its `series` and their placed `points`) into `area`, its axes
/// described if `names_axes` (a chart of one panel: panels share [`axis_descriptions`]);
/// returns the top of its plotting area, in root pixels.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
    p: &Prepared,
    (title, series, points): (Option<&str>, &[Series], &[Placed]),
    labels: &[String],
    names_axes: bool,
) -> Result<i32, DrawingAreaErrorKind<DB::ErrorType>> {
    let y_fmt = |v: &f64| number(*v, p.y_decimals);
    let x_fmt = |v: &f64| p.x_tick_label(chart.x_axis, *v);
    let widest_y = p.y_ticks.iter().map(|v| y_fmt(v).len()).max().unwrap_or(1);
    // Room for the tick labels, and for the axis's description if the panel writes it.
    let desc = if names_axes { 24 } else { 0 };
    let y_area = (20 + desc + 9 * widest_y as u32).clamp(40 + desc, 180);

    let mut builder = ChartBuilder::on(area);
    builder
        .margin(8)
        .x_label_area_size(28 + desc)
        .y_label_area_size(y_area);
    if let Some(t) = title {
        builder.caption(t, (FONT_FAMILY, 17).into_font().color(&BLACK));
    }
    let mut ctx =
        builder.build_cartesian_2d(Ticked::new(&p.x, &p.x_ticks), Ticked::new(&p.y, &p.y_ticks))?;
    let mut mesh = ctx.configure_mesh();
    if names_axes {
        mesh.x_desc(chart.x_label.as_str());
        mesh.y_desc(chart.y_label.as_str());
    }
    mesh.x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FONT_FAMILY, 15).into_font().color(&BLACK))
        .axis_desc_style((FONT_FAMILY, 17).into_font().color(&BLACK))
        .bold_line_style(RGBColor(225, 225, 225).stroke_width(1))
        .axis_style(BLACK.stroke_width(1))
        .draw()?;

    for (i, r) in chart.references.iter().enumerate() {
        let color = REFERENCE_PALETTE[i % REFERENCE_PALETTE.len()];
        let line = reference_path(r, &p.x);
        let end = line.last().copied();
        ctx.draw_series(DashedLineSeries::new(line, 9, 6, color.stroke_width(2)))?;
        if let (true, Some(end)) = (r.on_line, end) {
            let style = (FONT_FAMILY, 15)
                .into_font()
                .color(&color)
                .pos(Pos::new(HPos::Right, VPos::Bottom));
            ctx.plotting_area()
                .draw(&(EmptyElement::at(end) + Text::new(r.label.clone(), (-6, -5), style)))?;
        }
    }

    for (s, pts) in series.iter().zip(points) {
        let i = labels.iter().position(|l| *l == s.label).unwrap_or(0);
        let color = PALETTE[i % PALETTE.len()];
        // A dense series is drawn thin: a thick line's sharp turns draw spikes past the data.
        let width = if pts.len() <= MAX_MARKED { 2 } else { 1 };
        ctx.draw_series(LineSeries::new(
            pts.iter().copied(),
            color.stroke_width(width),
        ))?;
        // A dense series (a time series) is a line: markers would hide it.
        if pts.len() <= MAX_MARKED {
            ctx.draw_series(pts.iter().map(|&pt| Circle::new(pt, 4, color.filled())))?;
        }
    }

    if points.iter().all(Vec::is_empty) {
        let centre = ((p.x.start + p.x.end) / 2.0, (p.y.start + p.y.end) / 2.0);
        let style = (FONT_FAMILY, 22)
            .into_font()
            .color(&RGBColor(110, 110, 110))
            .pos(Pos::new(HPos::Center, VPos::Center));
        let note = chart.note.as_deref().unwrap_or("no data");
        ctx.plotting_area().draw(&Text::new(note, centre, style))?;
    }
    Ok(ctx.plotting_area().get_base_pixel().1)
}

/// The path of a reference line across `x`: horizontal at its height, or through its steps
/// (each y held until the next step's x, the last to the axis's end).
fn reference_path(r: &Reference, x: &Range<f64>) -> Vec<(f64, f64)> {
    if r.steps.is_empty() {
        return if r.y.is_finite() {
            vec![(x.start, r.y), (x.end, r.y)]
        } else {
            Vec::new()
        };
    }
    let mut path: Vec<(f64, f64)> = Vec::new();
    for &(sx, sy) in &r.steps {
        if !(sx.is_finite() && sy.is_finite()) || sx > x.end {
            continue;
        }
        let sx = sx.max(x.start);
        if let Some(&(_, held)) = path.last() {
            path.push((sx, held));
        }
        path.push((sx, sy));
    }
    if let Some(&(_, last)) = path.last() {
        path.push((x.end, last));
    }
    path
}

/// Draws the legend's `entries` in a bordered box `top` pixels down `area`, `width` wide.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, Swatch)],
    top: i32,
    width: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let left = 14;
    let right = width - 6;
    let bottom = top + 8 + LEGEND_ROW * entries.len() as i32;
    area.draw(&Rectangle::new(
        [(left, top), (right, bottom)],
        BLACK.stroke_width(1),
    ))?;
    let font = (FONT_FAMILY, 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (text, swatch)) in entries.iter().enumerate() {
        let y = top + 4 + LEGEND_ROW * i as i32 + LEGEND_ROW / 2;
        let x = left + 10;
        match *swatch {
            Swatch::Dashed(c) => {
                let style = c.stroke_width(2);
                area.draw(&PathElement::new(vec![(x, y), (x + 8, y)], style))?;
                area.draw(&PathElement::new(vec![(x + 14, y), (x + 22, y)], style))?;
            }
            Swatch::Line(c) => {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 22, y)],
                    c.stroke_width(2),
                ))?;
                area.draw(&Circle::new((x + 11, y), 4, c.filled()))?;
            }
        }
        area.draw(&Text::new(text.as_str(), (x + 30, y), font.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_reference_holds_each_value_until_the_next_step() {
        let r = Reference::steps("limit", vec![(0.0, 600.0), (600.0, 300.0), (900.0, 600.0)]);
        let path = reference_path(&r, &(-10.0..1000.0));
        assert_eq!(
            path,
            [
                (0.0, 600.0),
                (600.0, 600.0),
                (600.0, 300.0),
                (900.0, 300.0),
                (900.0, 600.0),
                (1000.0, 600.0)
            ]
        );
        let flat = reference_path(&Reference::new("c", 5.0), &(0.0..2.0));
        assert_eq!(flat, [(0.0, 5.0), (2.0, 5.0)]);
    }
}
