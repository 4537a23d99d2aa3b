//! The charts of a sweep with adaptive concurrency limits: each point's mean limit against
//! the sweep's x key (a fixed point's limit is its `max_concurrency`; a panel per value of a
//! third key), and the recommended point's limit over time.

use crate::engine::recorder::Recording;
use crate::engine::scenario::Scenario;
use crate::engine::summary::metrics;
use crate::output::report::charts::{Chart, Series, TimeUnit, XAxis};

use super::charts::{fill, layout, lines_of, panel_keys, short};
use crate::analysis::sweep::PointResult;

/// Stems of the two charts.
pub const CHARTS: [&str; 2] = ["concurrency_limit", "limit_over_time"];

/// Whether some point of the sweep has an adaptive limit.
pub fn any_adaptive<'a>(scenarios: impl IntoIterator<Item = &'a Scenario>) -> bool {
    scenarios
        .into_iter()
        .any(|s| s.scheduler.adaptive.is_some())
}

/// Each point's limit, its mean over the run for an adaptive one, against the x key.
pub fn sweep_chart(points: &[PointResult]) -> (&'static str, Chart) {
    let (x, group) = layout(points);
    let more = panel_keys(points, &x, group.as_deref());
    let mut chart = Chart::new(
        "Concurrency limit by point (an adaptive limit's mean over the run)",
        short(&x),
        "calls in flight allowed",
        XAxis::Linear,
    );
    // An unbounded point (max_concurrency 0) has no limit to draw.
    fill(&mut chart, points, &more, |ps| {
        lines_of(ps.iter().copied(), &x, group.as_deref(), "limit", |p| {
            let fixed = p.scenario.scheduler.max_concurrency;
            metrics::CONCURRENCY_LIMIT_MEAN
                .read(&p.mean)
                .or((fixed > 0).then_some(fixed as f64))
        })
    });
    chart.y_from_zero = true;
    (CHARTS[0], chart)
}

/// The recommended point's limit over time (per replica, the fleet's mean): an adaptive
/// limit as it moved, a fixed one flat.
pub fn point_chart(rec: &Recording, s: &Scenario) -> (&'static str, Chart) {
    let mut chart = Chart::new(
        "Recommended point: concurrency limit over time",
        "time",
        "calls in flight allowed (per replica)",
        XAxis::Linear,
    );
    chart.x_time = Some(TimeUnit::S);
    let width = rec.series.bin_s.max(1);
    let width_us = width * 1_000_000;
    let replicas = s.fleet.replicas.max(1) as f64;
    let until = rec.limits_until_us.unwrap_or(0);
    let fixed = s.scheduler.max_concurrency;
    let points: Vec<(f64, f64)> = rec
        .series
        .bins
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let start = i as u64 * width_us;
            let y = match s.scheduler.adaptive {
                // Over the part of the bin the limits were held (the last is partial).
                Some(_) if until > start => {
                    let covered = (until - start).min(width_us);
                    b.limit_us as f64 / covered as f64 / replicas
                }
                Some(_) => return None,
                None if fixed > 0 => fixed as f64,
                None => return None,
            };
            Some((((i as u64 + 1) * width) as f64, y))
        })
        .collect();
    let label = match (s.scheduler.adaptive, fixed) {
        (Some(_), _) => "limit (mean over each bin)",
        (None, 0) => "no limit (unbounded)",
        (None, _) => "fixed limit",
    };
    chart.series.push(Series::new(label, points));
    chart.y_from_zero = true;
    (CHARTS[1], chart)
}
