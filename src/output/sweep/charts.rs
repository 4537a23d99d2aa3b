//! The charts of a sweep's capacity report: query latency, throughput and 429s against the
//! swept keys (throughput in queries against the binding ceiling when there are several
//! providers), and the recommended point's latency distribution and its [`usage`](super::usage)
//! charts.
//!
//! The x axis is `max_concurrency` if swept (else the first key), a second key makes one line
//! per value, and any further keys make small multiples: one panel per combination of their
//! values, so no line joins points of different settings. Latency objectives of the `[slo]`
//! table are drawn on the latency charts.

use crate::analysis::plan::{Demand, LimitKind};
use crate::analysis::sweep::PointResult;
use crate::engine::recorder::Recording;
use crate::engine::scenario::Scenario;
use crate::engine::summary::metrics::{self, Metric};
use crate::engine::summary::slo::{Op, Threshold};
use crate::fmt::fmt_num;
use crate::output::report::charts::{duration, Chart, Panel, Reference, Series, TimeUnit, XAxis};

const MAX_CONCURRENCY: &str = "scheduler.max_concurrency";
const HEADROOM: &str = "scheduler.headroom";

/// Stems of the sweep's charts, then of the recommended point's.
pub(super) const SWEEP_CHARTS: [&str; 3] = ["latency", "throughput", "rate_limited"];
/// The stem of the cost chart, drawn when the sweep's provider has a `price`.
pub(super) const COST_CHART: &str = "cost";
pub(super) const POINT_CHARTS: [&str; 4] = [
    "latency_distribution",
    super::usage::CHARTS[0],
    super::usage::CHARTS[1],
    super::usage::CHARTS[2],
];

/// `metric` in a point's mean summary.
fn mean_at(p: &PointResult, metric: Metric) -> Option<f64> {
    metric.read(&p.mean)
}

/// The x key of the sweep charts (max_concurrency if swept, else the first key) and the key
/// whose values make one line each (the other key of a two-key sweep, the second of more).
pub(super) fn layout(points: &[PointResult]) -> (String, Option<String>) {
    let keys = keys(points);
    let x = if keys.iter().any(|k| k == MAX_CONCURRENCY) {
        MAX_CONCURRENCY.to_string()
    } else {
        keys.first().cloned().unwrap_or_default()
    };
    let group = keys.iter().find(|k| **k != x).cloned();
    (x, group)
}

/// The swept keys, in the grid's order.
fn keys(points: &[PointResult]) -> Vec<String> {
    points
        .first()
        .map(|p| p.point.values.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default()
}

/// The keys that make panels: every swept key but `x` and `group`.
pub(super) fn panel_keys(points: &[PointResult], x: &str, group: Option<&str>) -> Vec<String> {
    keys(points)
        .into_iter()
        .filter(|k| k != x && Some(k.as_str()) != group)
        .collect()
}

/// The points of each panel, per distinct values of `keys` in order of first appearance, with
/// the panel's caption ("burst_s=2").
fn panels<'a>(points: &'a [PointResult], keys: &[String]) -> Vec<(String, Vec<&'a PointResult>)> {
    let mut out: Vec<(String, Vec<&PointResult>)> = Vec::new();
    for p in points {
        let caption = keys
            .iter()
            .map(|k| match p.point.get(k) {
                Some(v) => format!("{}={v}", short(k)),
                None => format!("{}=?", short(k)),
            })
            .collect::<Vec<_>>()
            .join(", ");
        match out.iter_mut().find(|(c, _)| *c == caption) {
            Some((_, ps)) => ps.push(p),
            None => out.push((caption, vec![p])),
        }
    }
    out
}

/// Gives `chart` the lines `lines` makes of the points: of all of them, or one panel per
/// combination of the values of `keys` (the keys beyond the x and line keys).
pub(super) fn fill(
    chart: &mut Chart,
    points: &[PointResult],
    keys: &[String],
    lines: impl Fn(&[&PointResult]) -> Vec<Series>,
) {
    if keys.is_empty() {
        chart.series = lines(&points.iter().collect::<Vec<_>>());
    } else {
        chart.panels = panels(points, keys)
            .into_iter()
            .map(|(caption, ps)| Panel::new(caption, lines(&ps)))
            .collect();
    }
}

/// One series per value of `group` (or one in all), of `metric` against the `x` key.
fn lines(
    points: &[&PointResult],
    x: &str,
    group: Option<&str>,
    metric: Metric,
    label: &str,
) -> Vec<Series> {
    lines_of(points.iter().copied(), x, group, label, |p| {
        mean_at(p, metric)
    })
}

/// One series per value of `group` (or one in all), of `value` against the `x` key, named
/// "`label`, group=value" (or "group=value" with an empty label).
pub(super) fn lines_of<'a>(
    points: impl IntoIterator<Item = &'a PointResult>,
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
            Some((g, v)) if label.is_empty() => format!("{}={v}", short(g)),
            Some((g, v)) => format!("{label}, {}={v}", short(g)),
            None => label.to_string(),
        };
        match out.iter_mut().find(|s| s.label == name) {
            Some(s) => s.points.push((xv.as_f64(), y)),
            None => out.push(Series::new(name, vec![(xv.as_f64(), y)])),
        }
    }
    out
}

/// A key's last part: `scheduler.headroom` is `headroom`.
pub(super) fn short(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}

/// The `slo` objectives on the charted `metrics` (each with its short name, "p95"), as lines
/// labelled "objective p95 < 2 s".
fn objectives(slo: &[Threshold], charted: &[(Metric, &str)]) -> Vec<Reference> {
    slo.iter()
        .filter_map(|t| {
            let (_, name) = charted.iter().find(|(m, _)| m.path() == t.metric)?;
            let op = match t.op {
                Op::Lt => "<",
                Op::Le => "<=",
                Op::Gt => ">",
                Op::Ge => ">=",
                Op::Eq => "==",
            };
            let label = format!("objective {name} {op} {}", duration(t.limit));
            Some(Reference::new(label, t.limit).labelled_on_line())
        })
        .collect()
}

/// The query latency percentiles a chart may draw, with their short names.
const PERCENTILES: [(Metric, &str); 3] = [
    (metrics::QUERY_P50, "p50"),
    (metrics::QUERY_P95, "p95"),
    (metrics::QUERY_P99, "p99"),
];

/// The sweep's charts: (file stem, chart). `rpm` draws the provider's ceiling, `slo` the
/// objectives on the charted latencies.
pub fn sweep_charts(
    points: &[PointResult],
    rpm: Option<f64>,
    slo: &[Threshold],
) -> Vec<(&'static str, Chart)> {
    let (x, group) = layout(points);
    let more = panel_keys(points, &x, group.as_deref());
    let axis = if x == MAX_CONCURRENCY {
        XAxis::Log2
    } else {
        XAxis::Linear
    };
    let g = group.as_deref();
    let mut latency = Chart::new(
        "Query latency by concurrency",
        short(&x),
        "query latency",
        axis,
    );
    let charted: &[(Metric, &str)] = if g.is_some() {
        &PERCENTILES[1..2]
    } else {
        &PERCENTILES
    };
    fill(&mut latency, points, &more, |ps| {
        if g.is_some() {
            lines(ps, &x, g, metrics::QUERY_P95, "p95")
        } else {
            PERCENTILES
                .iter()
                .flat_map(|&(m, q)| lines(ps, &x, None, m, q))
                .collect()
        }
    });
    latency.references = objectives(slo, charted);
    latency.y_time = Some(TimeUnit::Ms);
    latency.y_from_zero = true;

    let named = points
        .first()
        .is_some_and(|p| p.scenario.providers.len() > 1);
    let throughput = match named {
        true => query_throughput(points, &x, g, &more, axis),
        false => call_throughput(points, &x, g, &more, axis, rpm),
    };
    let limited = rate_limited(points, &x, group.as_deref(), &more);
    let [l, t, r] = SWEEP_CHARTS;
    let mut charts = vec![(l, latency), (t, throughput), (r, limited)];
    if super::csv::priced(points) {
        charts.push((COST_CHART, cost(points, &x, g, &more, axis)));
    }
    charts
}

/// What a good query costs, and what is wasted, in dollars, against the x key.
fn cost(points: &[PointResult], x: &str, g: Option<&str>, more: &[String], axis: XAxis) -> Chart {
    let mut chart = Chart::new("Cost per good query", short(x), "dollars", axis);
    fill(&mut chart, points, more, |ps| {
        let mut series = lines(ps, x, g, metrics::COST_PER_GOOD_QUERY_USD, "per good query");
        if g.is_none() {
            // Alone, the waste per query started beside it: what a setting throws away.
            series.extend(lines_of(
                ps.iter().copied(),
                x,
                None,
                "wasted per query",
                |p| {
                    let wasted = mean_at(p, metrics::COST_WASTED_USD)?;
                    let started = mean_at(p, metrics::QUERIES_STARTED)?;
                    Some(if started > 0.0 { wasted / started } else { 0.0 })
                },
            ));
        }
        series
    });
    chart.y_from_zero = true;
    chart
}

/// The distinct headrooms of the points, lowest first.
fn headrooms(points: &[PointResult]) -> Vec<f64> {
    let mut hs: Vec<f64> = points
        .iter()
        .map(|p| p.scenario.scheduler.headroom)
        .collect();
    hs.sort_by(f64::total_cmp);
    hs.dedup();
    hs
}

/// The throughput chart of `metric`, `what` per second (`calls`, `queries`), against the x key,
/// with no reference line yet.
fn throughput_of(
    points: &[PointResult],
    x: &str,
    g: Option<&str>,
    more: &[String],
    axis: XAxis,
    metric: Metric,
    what: &str,
) -> Chart {
    let mut chart = Chart::new(
        "Throughput by concurrency",
        short(x),
        format!("{what} per second"),
        axis,
    );
    fill(&mut chart, points, more, |ps| {
        lines(ps, x, g, metric, &format!("{what}/s"))
    });
    chart.y_from_zero = true;
    chart
}

/// Calls per second against the one provider's RPM (and RPM x each headroom swept).
fn call_throughput(
    points: &[PointResult],
    x: &str,
    g: Option<&str>,
    more: &[String],
    axis: XAxis,
    rpm: Option<f64>,
) -> Chart {
    let mut throughput = throughput_of(points, x, g, more, axis, metrics::CALLS_PER_S, "calls");
    if let Some(rpm) = rpm {
        throughput.references.push(Reference::new(
            format!("provider ceiling {} RPM", fmt_num(rpm)),
            rpm / 60.0,
        ));
        for h in headrooms(points).into_iter().filter(|h| *h < 1.0) {
            throughput.references.push(Reference::new(
                format!("ceiling x headroom {h}"),
                rpm / 60.0 * h,
            ));
        }
    }
    throughput
}

/// Queries per second against the lowest of the providers' ceilings, in queries: the limit
/// that binds a query, named, at its whole limit and at each headroom swept that holds it.
fn query_throughput(
    points: &[PointResult],
    x: &str,
    g: Option<&str>,
    more: &[String],
    axis: XAxis,
) -> Chart {
    let mut throughput = throughput_of(points, x, g, more, axis, metrics::QUERIES_PER_S, "queries");
    let mut whole = None;
    for h in headrooms(points) {
        let Some(p) = points.iter().find(|p| p.scenario.scheduler.headroom == h) else {
            continue;
        };
        let demand = Demand::of(&p.scenario);
        let lowest = demand
            .ceilings
            .iter()
            .filter(|c| c.kind != LimitKind::Concurrency)
            .min_by(|a, b| a.at_headroom.total_cmp(&b.at_headroom));
        let Some(c) = lowest else { continue };
        if whole.is_none() {
            let per_s = c.queries_per_min / 60.0;
            throughput.references.push(Reference::new(
                format!(
                    "ceiling: {} {}, {} queries/s",
                    c.name(),
                    fmt_num(c.limit),
                    fmt_num(per_s)
                ),
                per_s,
            ));
            whole = Some(per_s);
        }
        let per_s = c.at_headroom / 60.0;
        if c.gated && h < 1.0 && Some(per_s) != whole {
            throughput.references.push(Reference::new(
                format!("{} x headroom {h}", c.name()),
                per_s,
            ));
        }
    }
    throughput
}

/// The share of requests refused with 429, against headroom if swept (else the x key); "no
/// 429s" in place of lines when no point had one.
fn rate_limited(points: &[PointResult], x: &str, group: Option<&str>, more: &[String]) -> Chart {
    let (hx, hg) = if points
        .first()
        .is_some_and(|p| p.point.get(HEADROOM).is_some())
    {
        (
            HEADROOM,
            if group == Some(HEADROOM) {
                Some(x)
            } else {
                group
            },
        )
    } else {
        (x, group)
    };
    let mut limited = Chart::new(
        "Share of requests refused with 429",
        short(hx),
        "429s / requests received",
        XAxis::Linear,
    );
    let ratio = |p: &PointResult| {
        let rl = mean_at(p, metrics::PROVIDER_RATE_LIMITED)?;
        let rec = mean_at(p, metrics::PROVIDER_RECEIVED)?;
        Some(if rec > 0.0 { rl / rec } else { 0.0 })
    };
    let label = if hg.is_some() { "" } else { "429 ratio" };
    fill(&mut limited, points, more, |ps| {
        lines_of(ps.iter().copied(), hx, hg, label, ratio)
    });
    let ratios: Vec<f64> = points.iter().filter_map(ratio).collect();
    if !ratios.is_empty() && ratios.iter().all(|r| *r == 0.0) {
        limited.series.clear();
        limited.panels.clear();
        limited.note = Some("no 429s".into());
    }
    limited.y_from_zero = true;
    limited
}

/// The recommended point's charts: its query latency percentile distribution (with the
/// objectives on it), then its use of each provider's limits and where its calls' time went
/// ([`usage`](super::usage)).
pub fn point_charts(
    rec: &Recording,
    s: &Scenario,
    slo: &[Threshold],
) -> Vec<(&'static str, Chart)> {
    let mut dist = Chart::new(
        "Recommended point: query latency distribution",
        "percentile",
        "query latency",
        XAxis::Percentile,
    );
    dist.series.push(Series::new(
        "query latency",
        super::usage::quantiles(&rec.query),
    ));
    dist.references = objectives(slo, &PERCENTILES);
    dist.y_time = Some(TimeUnit::Ms);
    dist.y_from_zero = true;
    let mut out = vec![(POINT_CHARTS[0], dist)];
    out.extend(super::usage::charts(rec, s));
    out
}

#[cfg(test)]
mod tests;
