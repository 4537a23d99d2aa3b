//! The capacity report of a sweep: charts (SVG and PNG), `report.md` and a self-contained
//! `report.html` (charts inlined, every scenario-provided string escaped).

use std::fmt::Write as _;
use std::path::Path;

use super::charts::{layout, short, POINT_CHARTS, SWEEP_CHARTS};
use crate::analysis::plan::{self, Demand, Key, PlanInput, Row};
use crate::analysis::sweep::{
    failures, marginal, mean_ci, Failure, Interrupted, PointResult, Recommendation,
};
use crate::engine::summary::metrics::{self, Metric};
use crate::engine::summary::slo::{number, Threshold};
use crate::fmt::fmt_num;
use crate::output::files::OutputSet;
use crate::output::report::charts::{self, Chart};
use crate::output::report::dollars;
use crate::output::report::escape::markdown;
use crate::output::report::html;

pub use super::charts::{point_charts, sweep_charts};

/// The table of every point, in the output folder.
pub const CSV: &str = "sweep.csv";
/// The report, in Markdown and in HTML.
const REPORTS: [&str; 2] = ["report.md", "report.html"];

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

/// Declares every file a sweep may write into `dir`: the CSV, the report and every chart.
/// With `adaptive` (some point of the sweep has an adaptive limit), its two charts too
/// ([`super::limit::CHARTS`]).
pub fn declare(set: &mut OutputSet, dir: &Path, adaptive: bool, priced: bool) {
    for name in [CSV].iter().chain(&REPORTS) {
        set.output(dir.join(name), "--out");
    }
    let limit = super::limit::CHARTS.iter().filter(|_| adaptive);
    let cost = [super::charts::COST_CHART];
    let cost = cost.iter().filter(|_| priced);
    for stem in SWEEP_CHARTS
        .iter()
        .chain(cost)
        .chain(&POINT_CHARTS)
        .chain(limit)
    {
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
    let (x, _) = layout(points);
    // The recommended point's line: the points that share its value of every other key.
    let same = |p: &PointResult| {
        p.point
            .values
            .iter()
            .all(|(k, v)| *k == x || rec.point.get(k) == Some(v))
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

/// What a closed form is set beside.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Beside {
    /// A ceiling: the simulated rate it caps, and the share of it used.
    Ceiling(Metric, f64),
    /// An estimate of a simulated value: the value, and the difference.
    Estimate(Metric),
    /// What a query asks of a provider: the field of `providers.NAME` it counted, over the
    /// queries started (retries and 429s included), and the difference.
    Counted(&'static str),
}

/// What the plan's closed forms are compared with: (plan key, what, factor to the row's unit).
const MEASURED: &[(Key, Beside)] = &[
    (
        Key::CallCeilingPerS,
        Beside::Ceiling(metrics::CALLS_PER_S, 1.0),
    ),
    (
        Key::QueriesPerMinAtHeadroom,
        Beside::Ceiling(metrics::QUERIES_PER_S, 60.0),
    ),
    (
        Key::QueriesPerMinCeiling,
        Beside::Ceiling(metrics::QUERIES_PER_S, 60.0),
    ),
    (
        Key::LimitQueriesPerMin,
        Beside::Ceiling(metrics::QUERIES_PER_S, 60.0),
    ),
    (
        Key::LimitQueriesPerMinAtHeadroom,
        Beside::Ceiling(metrics::QUERIES_PER_S, 60.0),
    ),
    (
        Key::HeadroomSlotsPerMin,
        Beside::Ceiling(metrics::PEAK_REQUESTS_PER_60S, 1.0),
    ),
    (
        Key::LittlesLawThroughput,
        Beside::Ceiling(metrics::CALLS_PER_S, 1.0),
    ),
    (
        Key::FanoutExpectedMaxMs,
        Beside::Estimate(metrics::QUERY_MEAN),
    ),
    (Key::StrictWavesMs, Beside::Estimate(metrics::QUERY_MEAN)),
    (Key::QueryFloorMs, Beside::Estimate(metrics::QUERY_MEAN)),
    (Key::RequestsPerQuery, Beside::Counted("received")),
    (Key::TokensPerQuery, Beside::Counted("tokens_charged")),
];

/// The simulated value beside `row` and how they compare, or why there is none.
fn beside(row: &Row, p: &PointResult, parallel: bool, multi_step: bool) -> (String, String) {
    let Some((_, what)) = MEASURED.iter().find(|(k, _)| *k == row.key) else {
        return (String::new(), "no simulated counterpart".into());
    };
    let whole_query = matches!(row.key, Key::FanoutExpectedMaxMs | Key::StrictWavesMs);
    if whole_query && multi_step {
        return (
            String::new(),
            "a round's, not a query's: see the least query time".into(),
        );
    }
    if row.key == Key::FanoutExpectedMaxMs && !parallel {
        return (
            String::new(),
            "the concurrency splits the round: see strict waves".into(),
        );
    }
    match *what {
        Beside::Ceiling(metric, f) => match mean_at(p, metric).map(|v| v * f) {
            Some(m) if row.value > 0.0 => (
                fmt_num(m),
                format!("{} % of the ceiling", fmt_num(m / row.value * 100.0)),
            ),
            _ => (String::new(), String::new()),
        },
        Beside::Estimate(metric) => difference(row, mean_at(p, metric), ""),
        Beside::Counted(field) => {
            let Some(name) = &row.provider else {
                return (String::new(), "no simulated counterpart".into());
            };
            let counted = number(&p.mean, &format!("providers.{name}.{field}"));
            let started = mean_at(p, metrics::QUERIES_STARTED).filter(|q| *q > 0.0);
            let per_query = counted.zip(started).map(|(c, q)| c / q);
            difference(row, per_query, " (retries included)")
        }
    }
}

/// `measured` beside `row`'s estimate, and the difference in per cent (with `note`).
fn difference(row: &Row, measured: Option<f64>, note: &str) -> (String, String) {
    match measured {
        Some(m) if row.value != 0.0 => (
            fmt_num(m),
            format!("{:+.1} %{note}", (m - row.value) / row.value * 100.0),
        ),
        _ => (String::new(), String::new()),
    }
}

/// The report's text: `(markdown, html)`, one section after another. `chart_svgs` are inlined
/// in the HTML. A sweep that was `interrupted` says so under its title.
///
/// Every scenario string (name, description, keys) is escaped into the Markdown; the HTML is
/// the Markdown rendered ([`html::page`]).
pub fn render(
    points: &[PointResult],
    slo: &[Threshold],
    rec: Option<&Recommendation>,
    interrupted: Option<&Interrupted>,
    chart_svgs: &[(&'static str, String)],
) -> (String, String) {
    let mut md = String::new();
    title(&mut md, points.first());
    if let Some(i) = interrupted {
        partial(&mut md, i);
    }
    if let Some(p) = recommendation(&mut md, points, slo, rec, interrupted.is_some()) {
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
    let _ = writeln!(md, "_Written by capsize {}._\n", crate::engine::VERSION);
}

/// That the sweep was interrupted: how many points finished, and what that means for the rest
/// of the report.
fn partial(md: &mut String, i: &Interrupted) {
    let _ = writeln!(
        md,
        "**Partial sweep**: interrupted after {} of {} points; the recommendation is among the points that finished. The runs in progress were abandoned, and the recommended point was not run again for its own charts: rerun the sweep to complete it.\n",
        i.finished, i.total
    );
}

/// The recommended point (its headline, the rule that chose it and the knee of its throughput
/// curve), or that there is none (among the points that finished, if `partial`). Returns the
/// recommended point.
fn recommendation<'a>(
    md: &mut String,
    points: &'a [PointResult],
    slo: &[Threshold],
    rec: Option<&Recommendation>,
    partial: bool,
) -> Option<&'a PointResult> {
    let _ = writeln!(md, "## Recommendation\n");
    let Some((r, p)) = rec.map(|r| (r, &points[r.index])) else {
        let which = if partial {
            "No point that finished"
        } else {
            "No point of the sweep"
        };
        let _ = writeln!(
            md,
            "{which} meets the objectives and stays under the provider's limits × headroom."
        );
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
    if let Some(line) = margins(p, r) {
        let _ = writeln!(md, "{line}");
    }
    let _ = writeln!(
        md,
        "Retries as the `{}` client does (`scheduler.retry.preset`).",
        p.scenario.scheduler.retry_preset
    );
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

/// How sure the answer is: the objectives the point meets only on average (with their 95 %
/// interval), or that one run per point gives no interval at all.
fn margins(p: &PointResult, r: &Recommendation) -> Option<String> {
    if p.runs.len() < 2 {
        return Some(
            "One run per point: this answer has no interval (`--repeats 3` or more gives each point one, and recommends only a point whose interval meets the objectives).".to_string(),
        );
    }
    if r.marginal.is_empty() {
        return None;
    }
    let each: Vec<String> = r
        .marginal
        .iter()
        .map(|m| {
            format!(
                "`{}` is met on average ({} ± {}) but its 95 % interval reaches {}",
                m.threshold,
                fmt_num(m.mean),
                fmt_num(m.ci95),
                fmt_num(m.worst())
            )
        })
        .collect();
    Some(format!(
        "**Marginal** (no point meets the objectives across its interval over {} runs): {}. More repeats, or a point with room, settle it.",
        p.runs.len(),
        each.join("; ")
    ))
}

/// The burst the client's RPM bucket allows at `p`, in a sentence (`None` when the client does
/// not limit itself or the provider has no RPM).
fn burst(p: &PointResult) -> Option<String> {
    let s = &p.scenario.scheduler;
    if p.scenario.named_providers {
        let each: Vec<String> = p
            .scenario
            .providers
            .iter()
            .filter_map(|n| {
                let rpm = n.config.rpm.filter(|_| s.rate_limit)?;
                Some(format!(
                    "{} up to {} requests at once at {} RPM × {}",
                    markdown(&n.name),
                    fmt_num(s.bucket_capacity(rpm)),
                    fmt_num(rpm),
                    s.headroom
                ))
            })
            .collect();
        return (!each.is_empty()).then(|| {
            format!(
                "The client's buckets in force: `scheduler.burst_s` = {} s of refill; {}.",
                fmt_num(s.burst_s),
                each.join("; ")
            )
        });
    }
    let rpm = p.scenario.provider().rpm.filter(|_| s.rate_limit)?;
    Some(format!(
        "The client's bucket in force: `scheduler.burst_s` = {} s of refill, up to {} requests at once at {} RPM × {}.",
        fmt_num(s.burst_s),
        fmt_num(s.bucket_capacity(rpm)),
        fmt_num(rpm),
        s.headroom
    ))
}

/// A point's swept keys and values as Markdown, each `max_concurrency = 8`.
pub(super) fn values(p: &PointResult) -> Vec<String> {
    p.point
        .values
        .iter()
        .map(|(k, v)| format!("{} = {}", markdown(short(k)), markdown(&v.to_string())))
        .collect()
}

/// The recommended point in one line: its values, queries per minute, p95, 429s and the RPM
/// its busiest minute leaves (with several providers: the limit that binds, and its use).
fn headline(p: &PointResult) -> String {
    let rpm = p.scenario.provider().rpm;
    let qpm = always(p, metrics::QUERIES_PER_S) * 60.0;
    let p95 = always(p, metrics::QUERY_P95) / 1000.0;
    let limited = always(p, metrics::PROVIDER_RATE_LIMITED);
    let at = values(p);
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
    if let Some(per_good) = mean_at(p, metrics::COST_PER_GOOD_QUERY_USD) {
        let _ = write!(
            line,
            ", ${} a good query (${} wasted, {} % of the bill)",
            dollars(per_good),
            dollars(always(p, metrics::COST_WASTED_USD)),
            fmt_num(always(p, metrics::COST_WASTED_SHARE) * 100.0)
        );
    }
    if p.scenario.named_providers {
        // Several providers: the limit that binds, and how much of what it allows is used.
        let d = Demand::of(&p.scenario);
        if let Some(b) = d.binding() {
            let _ = write!(
                line,
                "; {} binds at {} queries/min ({} % used)",
                b.name(),
                fmt_num(b.at_headroom),
                fmt_num(qpm / b.at_headroom * 100.0)
            );
        }
        return line;
    }
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
        "| closed form | formula | value | simulated | beside it |\n|---|---|---:|---:|---|"
    );
    let input = PlanInput::from_scenario(&p.scenario);
    // E[max of n] describes a fully parallel fan-out only.
    let mc = p.scenario.scheduler.max_concurrency as f64;
    let parallel = mc == 0.0 || mc >= input.calls_per_query;
    let multi_step = plan::multi_step(&p.scenario);
    for row in plan::plan_scenario(&p.scenario) {
        let (sim, diff) = beside(&row, p, parallel, multi_step);
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
    let priced = super::csv::priced(points);
    if !points.is_empty() {
        let cost = if priced {
            " $ / good query | wasted |"
        } else {
            ""
        };
        let _ = writeln!(
            md,
            "| {} | queries/s | query p95 (ms) | 429s |{cost} passes |",
            keys.join(" | ")
        );
        let _ = writeln!(
            md,
            "|{}---:|---:|---:|{}---|",
            "---:|".repeat(keys.len()),
            if priced { "---:|---:|" } else { "" }
        );
    }
    for p in points {
        let vals: Vec<String> = p.point.values.iter().map(|(_, v)| v.to_string()).collect();
        let get = |metric: Metric| {
            let xs: Option<Vec<f64>> = p.runs.iter().map(|r| metric.read(r)).collect();
            match xs.filter(|xs| xs.len() > 1).map(|xs| mean_ci(&xs)) {
                Some(m) => format!("{} ± {}", fmt_num(m.mean), fmt_num(m.ci95)),
                None => mean_at(p, metric).map_or("".into(), fmt_num),
            }
        };
        let cost = if priced {
            format!(
                " {} | {} % |",
                mean_at(p, metrics::COST_PER_GOOD_QUERY_USD)
                    .map_or("none good".into(), |v| format!("${}", dollars(v))),
                fmt_num(always(p, metrics::COST_WASTED_SHARE) * 100.0)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |{cost} {} |",
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
    let coin: Vec<String> = marginal(p, slo)
        .iter()
        .map(|m| format!("`{}` ± {}", m.threshold.metric, fmt_num(m.ci95)))
        .collect();
    if reasons.is_empty() && !coin.is_empty() {
        format!("marginal: {}", coin.join("; "))
    } else if reasons.is_empty() {
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
