//! Charts: both files written, deterministic output, tick labels of the log2 and percentile axes,
//! legend and axis text in the SVG, no panic on empty data, errors that name the path; time axes
//! in the unit that suits them, the legend beside the plot, objectives labelled on their line,
//! a note in place of an empty plot, panels (small multiples).
//!
//! Set `CAPSIZE_CHART_GALLERY=<dir>` to keep one chart of each axis kind there for viewing.

use std::path::{Path, PathBuf};

use capsize::api::charts::{self, texts as svg_texts, Chart, Reference, Series, XAxis};

mod common;
use common::temp::Temp;

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

fn sweep_chart() -> Chart {
    let xs: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
    let mut chart = Chart::new(
        "Throughput by max concurrency",
        "max concurrency (calls in flight)",
        "throughput (calls/s)",
        XAxis::Log2,
    );
    chart.series = vec![
        Series::new(
            "queries",
            xs.iter().map(|&x| (x, 3.0 * x.min(20.0))).collect(),
        ),
        Series::new(
            "calls",
            xs.iter().map(|&x| (x, 9.5 * x.min(10.0))).collect(),
        ),
    ];
    chart.references = vec![Reference::new("provider ceiling 600 RPM", 10.0)];
    chart.y_from_zero = true;
    chart
}

fn percentile_chart() -> Chart {
    let qs = [0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999];
    let mut chart = Chart::new(
        "Call latency by percentile",
        "percentile",
        "latency (ms)",
        XAxis::Percentile,
    );
    chart.series = (1..=3)
        .map(|c| {
            let points = qs
                .iter()
                .map(|&q| (q, 40.0 * c as f64 * (1.0 + 10.0 * q * q * q)))
                .collect();
            Series::new(format!("max_concurrency {}", 8 * c), points)
        })
        .collect();
    chart.references = vec![Reference::new("SLO p99 1000 ms", 1000.0)];
    chart.y_from_zero = true;
    chart
}

fn linear_chart() -> Chart {
    let mut chart = Chart::new(
        "429 rate by offered load",
        "offered load (calls/s)",
        "rate-limited (%)",
        XAxis::Linear,
    );
    chart.series = vec![Series::new(
        "rate-limited",
        (0..=12)
            .map(|i| {
                let load = 2.5 * i as f64;
                (load, (load - 10.0).max(0.0) * 1.7)
            })
            .collect(),
    )];
    chart
}

#[test]
fn write_produces_a_png_and_an_svg_with_all_text() {
    let dir = Temp::new("charts", "write");
    let chart = sweep_chart();
    charts::write(&chart, dir.dir(), "sweep").unwrap();

    let png = std::fs::read(dir.dir().join("sweep.png")).unwrap();
    assert!(png.len() > 1000, "PNG is {} bytes", png.len());
    assert_eq!(png[..8], PNG_SIGNATURE);

    let svg = std::fs::read_to_string(dir.dir().join("sweep.svg")).unwrap();
    assert!(svg.trim_start().starts_with("<svg"), "{}", &svg[..80]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(r#"width="900""#) && svg.contains(r#"height="560""#));
    let texts = svg_texts(&svg);
    for wanted in [
        "Throughput by max concurrency",
        "max concurrency (calls in flight)",
        "throughput (calls/s)",
        "queries",
        "calls",
        "provider ceiling 600 RPM",
    ] {
        assert!(
            texts.iter().any(|t| t == wanted),
            "no <text> {wanted:?} in {texts:?}"
        );
    }
    // Only the final files remain: no temporary left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["sweep.png", "sweep.svg"]);

    // svg() gives the same document as the file.
    assert_eq!(charts::svg(&chart).unwrap(), svg);
}

#[test]
fn the_same_chart_twice_gives_identical_files() {
    let dir = Temp::new("charts", "determinism");
    for chart in [sweep_chart(), percentile_chart(), linear_chart()] {
        charts::write(&chart, dir.dir(), "a").unwrap();
        charts::write(&chart, dir.dir(), "b").unwrap();
        for ext in ["svg", "png"] {
            let a = std::fs::read(dir.dir().join(format!("a.{ext}"))).unwrap();
            let b = std::fs::read(dir.dir().join(format!("b.{ext}"))).unwrap();
            assert!(a == b, "{ext} of {:?} differs between runs", chart.title);
        }
    }
}

#[test]
fn percentile_axis_is_labelled_in_percent() {
    let texts = svg_texts(&charts::svg(&percentile_chart()).unwrap());
    for tick in ["0%", "90%", "99%", "99.9%", "99.99%"] {
        assert!(
            texts.iter().any(|t| t == tick),
            "no tick {tick} in {texts:?}"
        );
    }
    // The axis is transformed, not linear in q: no linear tick such as "0.5".
    assert!(!texts.iter().any(|t| t == "0.5"), "{texts:?}");
}

#[test]
fn percentile_axis_drops_quantiles_of_one_or_more() {
    let mut chart = percentile_chart();
    chart.series[0].points.push((1.0, 5.0e6));
    chart.series[0].points.push((1.5, 5.0e6));
    // The unplaceable points neither panic nor stretch the y axis to 5e6.
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    assert!(!texts.iter().any(|t| t.starts_with("5000000")), "{texts:?}");
}

#[test]
fn log2_axis_ticks_are_powers_of_two() {
    let texts = svg_texts(&charts::svg(&sweep_chart()).unwrap());
    for tick in ["1", "2", "4", "8", "16", "32", "64"] {
        assert!(
            texts.iter().any(|t| t == tick),
            "no tick {tick} in {texts:?}"
        );
    }
    // Not a linear axis from 1 to 64 (ticks such as 10, 20, ...).
    assert!(!texts.iter().any(|t| t == "50"), "{texts:?}");
}

#[test]
fn empty_data_draws_a_chart_saying_so() {
    let dir = Temp::new("charts", "empty");
    let mut chart = sweep_chart();
    chart.series.push(Series::new("nothing yet", Vec::new()));
    charts::write(&chart, dir.dir(), "one_empty").unwrap();
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    assert!(
        texts.iter().any(|t| t == "nothing yet (no data)"),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "no data"), "{texts:?}");

    for axis in [XAxis::Linear, XAxis::Log2, XAxis::Percentile] {
        let mut empty = Chart::new("Nothing to show", "x (units)", "y (units)", axis);
        charts::write(&empty, dir.dir(), "empty").unwrap();
        assert!(
            std::fs::metadata(dir.dir().join("empty.png"))
                .unwrap()
                .len()
                > 0
        );
        empty.series = vec![Series::new(
            "only NaN",
            vec![(f64::NAN, 1.0), (1.0, f64::INFINITY)],
        )];
        let texts = svg_texts(&charts::svg(&empty).unwrap());
        assert!(texts.iter().any(|t| t == "Nothing to show"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "no data"), "{texts:?}");
    }
}

#[test]
fn a_single_point_or_flat_line_is_drawn() {
    let mut chart = linear_chart();
    chart.series = vec![Series::new("flat", vec![(3.0, 7.0), (3.0, 7.0)])];
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    assert!(texts.iter().any(|t| t == "7.0" || t == "7"), "{texts:?}");
}

#[test]
fn writing_into_a_missing_directory_is_an_error_naming_the_path() {
    let dir = Temp::new("charts", "missing");
    let missing = dir.dir().join("does-not-exist");
    let err = charts::write(&sweep_chart(), &missing, "sweep").unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&*missing.to_string_lossy()),
        "message {message:?} does not name {}",
        missing.display()
    );
    assert!(!missing.exists());
}

#[test]
fn gallery() {
    let temp = Temp::new("charts", "gallery");
    let dir =
        std::env::var_os("CAPSIZE_CHART_GALLERY").map_or(temp.dir().to_path_buf(), PathBuf::from);
    let dir: &Path = &dir;
    std::fs::create_dir_all(dir).unwrap();
    charts::write(&sweep_chart(), dir, "log2").unwrap();
    charts::write(&percentile_chart(), dir, "percentile").unwrap();
    charts::write(&linear_chart(), dir, "linear").unwrap();
    charts::write(
        &Chart::new("Nothing to show", "x (units)", "y (units)", XAxis::Linear),
        dir,
        "empty",
    )
    .unwrap();
    let mut grid = sweep_chart();
    grid.panels = (1..=3)
        .map(|b| {
            let series = grid.series.iter().map(|s| {
                let points = s.points.iter().map(|&(x, y)| (x, y * b as f64)).collect();
                Series::new(s.label.clone(), points)
            });
            Panel::new(format!("burst_s={b}"), series.collect())
        })
        .collect();
    charts::write(&grid, dir, "panels").unwrap();
    let mut steps = Chart::new("Requests per minute", "time", "requests", XAxis::Linear);
    steps.series = vec![Series::new(
        "achieved RPM (60 s window)",
        (0..=2400)
            .map(|t| (t as f64, 500.0 + 80.0 * (t as f64 / 90.0).sin()))
            .collect(),
    )];
    steps.references = vec![
        Reference::steps(
            "RPM limit in force",
            vec![(0.0, 600.0), (600.0, 300.0), (900.0, 600.0)],
        ),
        Reference::new("objective p95 < 2 s", 200.0).labelled_on_line(),
    ];
    steps.x_time = Some(TimeUnit::S);
    steps.y_from_zero = true;
    charts::write(&steps, dir, "steps").unwrap();
    let mut none = linear_chart();
    none.series.clear();
    none.note = Some("no 429s".into());
    charts::write(&none, dir, "note").unwrap();
}

// ---- Charts people read at a glance (the sweep's own charts: src/output/sweep/charts.rs) ----

use capsize::api::charts::{Panel, TimeUnit};

/// The `x="..."` of every `<text>` whose content is `wanted`.
fn text_xs(svg: &str, wanted: &str) -> Vec<f64> {
    svg.split("<text")
        .skip(1)
        .filter(|rest| {
            rest.find('>').is_some_and(|i| {
                let body = &rest[i + 1..];
                body.find("</text>")
                    .is_some_and(|j| body[..j].trim() == wanted)
            })
        })
        .filter_map(|rest| {
            let at = rest.find(" x=\"")? + 4;
            rest[at..at + rest[at..].find('"')?].parse().ok()
        })
        .collect()
}

/// The right end of the plot: the largest `x2` of the grid's `<line>`s.
fn plot_right(svg: &str) -> f64 {
    svg.split("<line")
        .skip(1)
        .filter_map(|rest| {
            let at = rest.find(" x2=\"")? + 5;
            rest[at..at + rest[at..].find('"')?].parse::<f64>().ok()
        })
        .fold(f64::NEG_INFINITY, f64::max)
}

#[test]
fn a_time_axis_picks_its_unit_from_the_data() {
    let mut chart = Chart::new("Latency", "run", "query latency", XAxis::Linear);
    chart.series = vec![Series::new("p95", vec![(1.0, 20_000.0), (2.0, 250_000.0)])];
    chart.y_time = Some(TimeUnit::Ms);
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    assert!(texts.iter().any(|t| t == "query latency (s)"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "250"), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("250000")), "{texts:?}");
    // Long enough for minutes: a 40-minute run's time axis.
    let mut long = Chart::new("Over time", "time", "RPM", XAxis::Linear);
    long.series = vec![Series::new("RPM", vec![(0.0, 1.0), (2400.0, 2.0)])];
    long.x_time = Some(TimeUnit::S);
    let texts = svg_texts(&charts::svg(&long).unwrap());
    assert!(texts.iter().any(|t| t == "time (min)"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "40"), "{texts:?}");
}

#[test]
fn the_legend_is_beside_the_plot_not_over_it() {
    let svg = charts::svg(&sweep_chart()).unwrap();
    let right = plot_right(&svg);
    assert!(right > 500.0, "plot ends at {right}");
    for label in ["queries", "calls", "provider ceiling 600 RPM"] {
        let xs = text_xs(&svg, label);
        assert!(!xs.is_empty(), "no legend entry {label}");
        assert!(
            xs.iter().all(|x| *x > right),
            "{label} at {xs:?}, plot ends at {right}"
        );
    }
}

#[test]
fn an_objective_is_labelled_on_its_line_and_in_the_legend() {
    let mut chart = linear_chart();
    chart.references = vec![Reference::new("objective p95 < 2 s", 20.0).labelled_on_line()];
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    let n = texts.iter().filter(|t| *t == "objective p95 < 2 s").count();
    assert_eq!(n, 2, "{texts:?}");
    chart.references[0].on_line = false;
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    let n = texts.iter().filter(|t| *t == "objective p95 < 2 s").count();
    assert_eq!(n, 1, "{texts:?}");
}

#[test]
fn a_note_replaces_an_empty_plot_and_panels_get_their_captions() {
    let mut chart = linear_chart();
    chart.series.clear();
    chart.note = Some("no 429s".into());
    let texts = svg_texts(&charts::svg(&chart).unwrap());
    assert!(texts.iter().any(|t| t == "no 429s"), "{texts:?}");
    assert!(!texts.iter().any(|t| t == "no data"), "{texts:?}");
    assert!(
        texts.iter().any(|t| t == "rate-limited (%)"),
        "axes kept: {texts:?}"
    );

    let mut grid = sweep_chart();
    grid.panels = (1..=4)
        .map(|b| Panel::new(format!("burst_s={b}"), grid.series.clone()))
        .collect();
    let dir = Temp::new("charts", "panels");
    charts::write(&grid, dir.dir(), "panels").unwrap();
    let texts = svg_texts(&charts::svg(&grid).unwrap());
    for b in 1..=4 {
        let n = texts
            .iter()
            .filter(|t| **t == format!("burst_s={b}"))
            .count();
        assert_eq!(n, 1, "{texts:?}");
    }
    // One legend: each label once, though every panel draws it.
    assert_eq!(
        texts.iter().filter(|t| *t == "queries").count(),
        1,
        "{texts:?}"
    );
    // The axis descriptions once for the grid, not per panel.
    for desc in ["max concurrency (calls in flight)", "throughput (calls/s)"] {
        assert_eq!(texts.iter().filter(|t| *t == desc).count(), 1, "{texts:?}");
    }
}
