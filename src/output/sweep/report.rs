//! The capacity report of a sweep: charts (SVG and PNG), `report.md` and a self-contained
//! `report.html` (charts inlined, every scenario-provided string escaped).

use std::fmt::Write as _;
use std::path::Path;

use super::table::{failures, Failure, Recommendation};
use super::PointResult;
use crate::analysis::plan::{self, fmt_num, PlanInput};
use crate::analysis::slo::Threshold;
use crate::engine::recorder::Recording;
use crate::output::files::OutputSet;
use crate::output::report::charts::{self, Chart, Reference, Series, XAxis};
use crate::output::report::escape::markdown;
use crate::output::report::html;
use crate::output::report::metrics::{self, Metric};

const MAX_CONCURRENCY: &str = "scheduler.max_concurrency";
const HEADROOM: &str = "scheduler.headroom";

/// The table of every point, in the output folder.
pub const CSV: &str = "sweep.csv";
/// The report, in Markdown and in HTML.
const REPORTS: [&str; 2] = ["report.md", "report.html"];
/// Stems of the sweep's charts, then of the recommended point's.
const SWEEP_CHARTS: [&str; 3] = ["latency", "throughput", "rate_limited"];
const POINT_CHARTS: [&str; 2] = ["latency_distribution", "rpm_over_time"];

/// `metric` in a point's mean summary.
fn mean_at(p: &PointResult, metric: Metric) -> Option<f64> {
    metric.read(&p.mean)
}

/// A metric every summary.json holds as a number (a field of `Summary` that is not optional),
/// in a point's mean summary (whose numbers are means of finite numbers).
fn always(p: &PointResult, metric: Metric) -> f64 {
    mean_at(p, metric).unwrap_or_else(|| {
        panic!("a point's mean summary lacks {metric}, which every summary.json holds")
    })
}

/// The x key of the sweep charts (max_concurrency if swept, else the first key) and the key
/// whose values make one line each (the other key of a two-key sweep).
pub(super) fn layout(points: &[PointResult]) -> (String, Option<String>) {
    let keys: Vec<String> = points
        .first()
        .map(|p| p.point.values.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    let x = if keys.iter().any(|k| k == MAX_CONCURRENCY) {
        MAX_CONCURRENCY.to_string()
    } else {
        keys.first().cloned().unwrap_or_default()
    };
    let group = keys.iter().find(|k| **k != x).cloned();
    (x, group)
}

/// One series per value of `group` (or one in all), of `metric` against the `x` key.
fn lines(
    points: &[PointResult],
    x: &str,
    group: Option<&str>,
    metric: Metric,
    label: &str,
) -> Vec<Series> {
    lines_of(points, x, group, label, |p| mean_at(p, metric))
}

/// One series per value of `group` (or one in all), of `value` against the `x` key.
pub(super) fn lines_of(
    points: &[PointResult],
    x: &str,
    group: Option<&str>,
    label: &str,
    value: impl Fn(&PointResult) -> Option<f64>,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for p in points {
        let (Some(xv), Some(y)) = (p.point.get(x), value(p)) else {
            continue;
        };
        let name = match group.and_then(|g| p.point.get(g).map(|v| (g, v))) {
            Some((g, v)) => format!("{label}, {}={v}", g.rsplit('.').next().unwrap_or(g)),
            None => label.to_string(),
        };
        match out.iter_mut().find(|s| s.label == name) {
            Some(s) => s.points.push((xv.as_f64(), y)),
            None => out.push(Series::new(name, vec![(xv.as_f64(), y)])),
        }
    }
    out
}

pub(super) fn short(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}

/// The sweep's charts: (file stem, chart).
pub fn sweep_charts(points: &[PointResult], rpm: Option<f64>) -> Vec<(&'static str, Chart)> {
    let (x, group) = layout(points);
    let axis = if x == MAX_CONCURRENCY {
        XAxis::Log2
    } else {
        XAxis::Linear
    };
    let g = group.as_deref();
    let mut latency = Chart::new(
        "Query latency by concurrency",
        short(&x),
        "query latency (ms)",
        axis,
    );
    latency.series = if g.is_some() {
        lines(points, &x, g, metrics::QUERY_P95, "p95")
    } else {
        [
            (metrics::QUERY_P50, "p50"),
            (metrics::QUERY_P95, "p95"),
            (metrics::QUERY_P99, "p99"),
        ]
        .into_iter()
        .flat_map(|(m, q)| lines(points, &x, None, m, q))
        .collect()
    };
    latency.y_from_zero = true;
    let mut throughput = Chart::new(
        "Throughput by concurrency",
        short(&x),
        "calls per second",
        axis,
    );
    throughput.series = lines(points, &x, g, metrics::CALLS_PER_S, "calls/s");
    throughput.y_from_zero = true;
    if let Some(rpm) = rpm {
        throughput.references.push(Reference::new(
            format!("provider ceiling {} RPM", fmt_num(rpm)),
            rpm / 60.0,
        ));
        let mut hs: Vec<f64> = points
            .iter()
            .map(|p| p.scenario.scheduler.headroom)
            .collect();
        hs.sort_by(f64::total_cmp);
        hs.dedup();
        for h in hs.into_iter().filter(|h| *h < 1.0) {
            throughput.references.push(Reference::new(
                format!("ceiling x headroom {h}"),
                rpm / 60.0 * h,
            ));
        }
    }
    let (hx, hg) = if points
        .first()
        .is_some_and(|p| p.point.get(HEADROOM).is_some())
    {
        (
            HEADROOM.to_string(),
            if g == Some(HEADROOM) {
                Some(x.clone())
            } else {
                group.clone()
            },
        )
    } else {
        (x.clone(), group.clone())
    };
    let mut limited = Chart::new(
        "Share of requests refused with 429",
        short(&hx),
        "429s / requests received",
        XAxis::Linear,
    );
    for p in points {
        let (Some(xv), Some(rl), Some(rec)) = (
            p.point.get(&hx),
            mean_at(p, metrics::PROVIDER_RATE_LIMITED),
            mean_at(p, metrics::PROVIDER_RECEIVED),
        ) else {
            continue;
        };
        let ratio = if rec > 0.0 { rl / rec } else { 0.0 };
        let name = match hg.as_deref().and_then(|k| p.point.get(k).map(|v| (k, v))) {
            Some((k, v)) => format!("{}={v}", short(k)),
            None => "429 ratio".to_string(),
        };
        match limited.series.iter_mut().find(|s| s.label == name) {
            Some(s) => s.points.push((xv.as_f64(), ratio)),
            None => limited
                .series
                .push(Series::new(name, vec![(xv.as_f64(), ratio)])),
        }
    }
    limited.y_from_zero = true;
    let [l, t, r] = SWEEP_CHARTS;
    vec![(l, latency), (t, throughput), (r, limited)]
}

/// The recommended point's charts: its query latency percentile distribution, and its
/// requests per minute over time against the ceiling.
pub fn point_charts(
    rec: &Recording,
    rpm: Option<f64>,
    headroom: f64,
) -> Vec<(&'static str, Chart)> {
    let mut dist = Chart::new(
        "Recommended point: query latency distribution",
        "percentile",
        "query latency (ms)",
        XAxis::Percentile,
    );
    let points: Vec<(f64, f64)> = if rec.query.is_empty() {
        Vec::new()
    } else {
        rec.query
            .iter_quantiles(5)
            .map(|v| {
                (
                    v.quantile_iterated_to(),
                    v.value_iterated_to() as f64 / 1000.0,
                )
            })
            .filter(|(q, _)| *q < 1.0)
            .collect()
    };
    dist.series.push(Series::new("query latency", points));
    dist.y_from_zero = true;
    let mut rpm_chart = Chart::new(
        "Recommended point: requests per minute",
        "time (s)",
        "requests charged in the last 60 s",
        XAxis::Linear,
    );
    let bins = &rec.series.bins;
    let width = rec.series.bin_s.max(1) as usize;
    let window = (60 / width).max(1);
    let mut sum = 0u64;
    let mut series = Vec::with_capacity(bins.len());
    for (i, b) in bins.iter().enumerate() {
        sum += b.charged;
        if i >= window {
            sum -= bins[i - window].charged;
        }
        series.push((
            ((i + 1) * width) as f64,
            sum as f64 * 60.0 / (window * width) as f64,
        ));
    }
    rpm_chart
        .series
        .push(Series::new("achieved RPM (60 s window)", series));
    if let Some(rpm) = rpm {
        rpm_chart
            .references
            .push(Reference::new(format!("ceiling {} RPM", fmt_num(rpm)), rpm));
        if headroom < 1.0 {
            rpm_chart.references.push(Reference::new(
                format!("ceiling x headroom {headroom}"),
                rpm * headroom,
            ));
        }
    }
    rpm_chart.y_from_zero = true;
    let [d, r] = POINT_CHARTS;
    vec![(d, dist), (r, rpm_chart)]
}

/// Declares every file a sweep may write into `dir`: the CSV, the report and every chart.
/// With `adaptive` (some point of the sweep has an adaptive limit), its two charts too
/// ([`super::limit::CHARTS`]).
pub fn declare(set: &mut OutputSet, dir: &Path, adaptive: bool) {
    for name in [CSV].iter().chain(&REPORTS) {
        set.output(dir.join(name), "--out");
    }
    let limit = super::limit::CHARTS.iter().filter(|_| adaptive);
    for stem in SWEEP_CHARTS.iter().chain(&POINT_CHARTS).chain(limit) {
        charts::declare(set, dir, stem);
    }
}

/// Gives the report (`md`, `html`) and every chart its content in `set`: each chart's SVG as
/// already drawn (`svgs`, in the order of `all`) and its PNG.
pub fn put<'a>(
    set: &mut OutputSet<'a>,
    dir: &Path,
    md: &str,
    html: &str,
    all: &'a [(&'static str, Chart)],
    svgs: Vec<(&'static str, String)>,
) {
    let [md_name, html_name] = REPORTS;
    set.put(dir.join(md_name), md)
        .put(dir.join(html_name), html);
    for ((stem, chart), (_, svg)) in all.iter().zip(svgs) {
        charts::put(set, chart, dir, stem, svg);
    }
}

/// The smallest value of the x key whose throughput reaches 95 % of the best in the
/// recommended point's line (the knee of the throughput curve).
fn knee(points: &[PointResult], rec: &PointResult) -> Option<(String, f64)> {
    let (x, group) = layout(points);
    let same = |p: &PointResult| {
        group
            .as_deref()
            .is_none_or(|g| p.point.get(g) == rec.point.get(g))
    };
    let line: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| same(p))
        .filter_map(|p| {
            Some((
                p.point.get(&x)?.as_f64(),
                mean_at(p, metrics::QUERIES_PER_S)?,
            ))
        })
        .collect();
    let best = line.iter().map(|(_, y)| *y).fold(0.0, f64::max);
    let at = line
        .iter()
        .filter(|(_, y)| *y >= 0.95 * best)
        .map(|(x, _)| *x)
        .fold(f64::INFINITY, f64::min);
    at.is_finite().then(|| (short(&x).to_string(), at))
}

/// What the plan's closed forms are compared with: (plan key, metric, factor).
const MEASURED: &[(&str, Metric, f64)] = &[
    ("call_ceiling_per_s", metrics::CALLS_PER_S, 1.0),
    ("queries_per_min_at_headroom", metrics::QUERIES_PER_S, 60.0),
    ("queries_per_min_ceiling", metrics::QUERIES_PER_S, 60.0),
    (
        "headroom_slots_per_min",
        metrics::PEAK_REQUESTS_PER_60S,
        1.0,
    ),
    ("littles_law_throughput", metrics::CALLS_PER_S, 1.0),
    ("fanout_expected_max_ms", metrics::QUERY_MEAN, 1.0),
    ("strict_waves_ms", metrics::QUERY_MEAN, 1.0),
];

/// The report's text: `(markdown, html)`, one section after another. `chart_svgs` are inlined
/// in the HTML.
///
/// Every scenario string (name, description, keys) is escaped into the Markdown; the HTML is
/// the Markdown rendered ([`html::page`]).
pub fn render(
    points: &[PointResult],
    slo: &[Threshold],
    rec: Option<&Recommendation>,
    chart_svgs: &[(&'static str, String)],
) -> (String, String) {
    let mut md = String::new();
    title(&mut md, points.first());
    if let Some(p) = recommendation(&mut md, points, slo, rec) {
        arithmetic(&mut md, p);
    }
    objectives(&mut md, slo);
    let keys = key_names(points);
    point_table(&mut md, points, &keys, slo);
    super::phases::section(&mut md, points, &keys);
    charts_section(&mut md, chart_svgs);
    let name = points.first().map_or("", |p| p.scenario.name.as_str());
    let html = html::page(
        &md,
        &html::Page {
            title: &format!("Capacity report: {name}"),
            boxed: Some("Recommendation"),
            charts: chart_svgs,
        },
    );
    (md, html)
}

/// The title, with the scenario's name, and its description.
fn title(md: &mut String, first: Option<&PointResult>) {
    let name = first.map_or("", |p| p.scenario.name.as_str());
    let _ = writeln!(md, "# Capacity report: {}\n", markdown(name));
    if let Some(d) = first.and_then(|p| p.scenario.description.as_deref()) {
        let _ = writeln!(md, "{}\n", markdown(d));
    }
}

/// The recommended point (its headline, the rule that chose it and the knee of its throughput
/// curve), or that there is none. Returns the recommended point.
fn recommendation<'a>(
    md: &mut String,
    points: &'a [PointResult],
    slo: &[Threshold],
    rec: Option<&Recommendation>,
) -> Option<&'a PointResult> {
    let _ = writeln!(md, "## Recommendation\n");
    let Some((r, p)) = rec.map(|r| (r, &points[r.index])) else {
        let _ = writeln!(md, "No point of the sweep meets the objectives and stays under the provider's limits × headroom.");
        let why = super::why::diagnose(points, slo);
        if !why.is_empty() {
            let _ = writeln!(md, "\n## Why nothing passes\n");
            for paragraph in why {
                let _ = writeln!(md, "{paragraph}\n");
            }
        }
        return None;
    };
    let _ = writeln!(md, "{}.\n\nChosen by {}.", headline(p), r.rule);
    if let Some(line) = burst(p) {
        let _ = writeln!(md, "{line}");
    }
    if let Some((k, v)) = knee(points, p) {
        let _ = writeln!(
            md,
            "The knee of its throughput curve (95 % of the best throughput) is at {} = {}.",
            markdown(&k),
            fmt_num(v)
        );
    }
    Some(p)
}

/// The burst the client's RPM bucket allows at `p`, in a sentence (`None` when the client does
/// not limit itself or the provider has no RPM).
fn burst(p: &PointResult) -> Option<String> {
    let s = &p.scenario.scheduler;
    let rpm = p.scenario.provider().rpm.filter(|_| s.rate_limit)?;
    Some(format!(
        "The client's bucket in force: `scheduler.burst_s` = {} s of refill, up to {} requests at once at {} RPM × {}.",
        fmt_num(s.burst_s),
        fmt_num((rpm * s.headroom / 60.0 * s.burst_s).max(1.0)),
        fmt_num(rpm),
        s.headroom
    ))
}

/// The recommended point in one line: its values, queries per minute, p95, 429s and the RPM
/// its busiest minute leaves.
fn headline(p: &PointResult) -> String {
    let rpm = p.scenario.provider().rpm;
    let qpm = always(p, metrics::QUERIES_PER_S) * 60.0;
    let p95 = always(p, metrics::QUERY_P95) / 1000.0;
    let limited = always(p, metrics::PROVIDER_RATE_LIMITED);
    let at: Vec<String> = p
        .point
        .values
        .iter()
        .map(|(k, v)| format!("{} = {v}", markdown(short(k))))
        .collect();
    let mut line = format!(
        "**{}**: {} queries/min sustained, p95 {} s, {}",
        at.join(" at "),
        fmt_num(qpm),
        fmt_num(p95),
        if limited == 0.0 {
            "no 429s".to_string()
        } else {
            format!("{} 429s", fmt_num(limited))
        }
    );
    if let (Some(rpm), Some(peak)) = (rpm, mean_at(p, metrics::PEAK_REQUESTS_PER_60S)) {
        let _ = write!(
            line,
            ", {} RPM left for retries and other traffic in the busiest minute",
            fmt_num(rpm - peak)
        );
    }
    line
}

/// The closed forms of `capsize plan` for the recommended point, beside what it measured.
fn arithmetic(md: &mut String, p: &PointResult) {
    let _ = writeln!(md, "\n## Arithmetic beside the simulation\n");
    let _ = writeln!(
        md,
        "| closed form | formula | value | simulated | difference |\n|---|---|---:|---:|---:|"
    );
    let input = PlanInput::from_scenario(&p.scenario);
    // E[max of n] describes a fully parallel fan-out only.
    let mc = p.scenario.scheduler.max_concurrency as f64;
    let parallel = mc == 0.0 || mc >= input.calls_per_query;
    for row in plan::plan(&input) {
        let measured = MEASURED
            .iter()
            .find(|(k, _, _)| *k == row.key)
            .filter(|(k, _, _)| *k != "fanout_expected_max_ms" || parallel)
            .and_then(|(_, metric, f)| mean_at(p, *metric).map(|v| v * f));
        let (sim, diff) = match measured {
            Some(m) if row.value != 0.0 => (
                fmt_num(m),
                format!("{:+.1} %", (m - row.value) / row.value * 100.0),
            ),
            _ => ("".into(), "".into()),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} {} | {sim} | {diff} |",
            row.label,
            row.formula,
            fmt_num(row.value),
            row.unit
        );
    }
}

/// The `[slo]` objectives, or that there are none.
fn objectives(md: &mut String, slo: &[Threshold]) {
    let _ = writeln!(md, "\n## Objectives\n");
    if slo.is_empty() {
        let _ = writeln!(md, "None given (add an `[slo]` table).");
    }
    for t in slo {
        let _ = writeln!(md, "- `{t}`");
    }
}

/// The swept keys' short names, escaped, as the report's tables head their columns.
fn key_names(points: &[PointResult]) -> Vec<String> {
    points.first().map_or(Vec::new(), |p| {
        p.point
            .values
            .iter()
            .map(|(k, _)| markdown(short(k)))
            .collect()
    })
}

/// Every point: its values, queries/s, query p95, 429s and whether it passes (or why not).
fn point_table(md: &mut String, points: &[PointResult], keys: &[String], slo: &[Threshold]) {
    let _ = writeln!(md, "\n## Points\n");
    if !points.is_empty() {
        let _ = writeln!(
            md,
            "| {} | queries/s | query p95 (ms) | 429s | passes |",
            keys.join(" | ")
        );
        let _ = writeln!(md, "|{}---:|---:|---:|---|", "---:|".repeat(keys.len()));
    }
    for p in points {
        let vals: Vec<String> = p.point.values.iter().map(|(_, v)| v.to_string()).collect();
        let get = |metric| mean_at(p, metric).map_or("".into(), fmt_num);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            vals.join(" | "),
            get(metrics::QUERIES_PER_S),
            get(metrics::QUERY_P95),
            get(metrics::PROVIDER_RATE_LIMITED),
            verdict(p, slo)
        );
    }
}

/// A point's `passes` cell: `yes`, or `no: ` and each reason it fails.
fn verdict(p: &PointResult, slo: &[Threshold]) -> String {
    // Objectives name summary.json metrics (checked to exist), safe in code spans as written.
    let reasons: Vec<String> = failures(p, slo)
        .iter()
        .map(|f| match f {
            Failure::Objective { threshold, value } => format!(
                "`{}` {} (needs `{}`)",
                threshold.metric,
                value.map_or("none".into(), fmt_num),
                threshold.condition()
            ),
            f => markdown(&f.to_string()),
        })
        .collect();
    if reasons.is_empty() {
        "yes".to_string()
    } else {
        format!("no: {}", reasons.join("; "))
    }
}

/// An image line per chart (its PNG), which the HTML shows as the chart's inline SVG.
fn charts_section(md: &mut String, chart_svgs: &[(&'static str, String)]) {
    let _ = writeln!(md, "\n## Charts\n");
    for (stem, _) in chart_svgs {
        let _ = writeln!(md, "![{stem}]({stem}.png)\n");
    }
}
