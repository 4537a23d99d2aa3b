//! The fit drawn: for each fitted quantity, the observed values' CDF beside the fitted
//! distribution's, on one chart (`fit-<quantity>.svg` and `.png`), so a reader sees where they
//! part (the KS distance is the largest vertical gap between the two).

use crate::analysis::calibrate::model::CURVE;
use crate::analysis::calibrate::Calibration;
use crate::output::report::charts::{Chart, Series, XAxis};
use crate::output::report::html::slug;

use super::report::fitted;

/// The file stem of the chart of the quantity `what` names (names as the scenario writes
/// them: see [`super::report::fitted`]).
pub fn stem(what: &str) -> String {
    format!("fit-{}", slug(what))
}

/// Each fitted quantity's chart, with its file stem and the quantity.
pub fn charts(cal: &Calibration) -> Vec<(String, String, Chart)> {
    fitted(cal)
        .into_iter()
        .map(|q| {
            let (what, f) = (q.what, q.fit);
            let p = |k: usize| (k as f64 + 0.5) / CURVE as f64;
            let observed = f
                .curve
                .iter()
                .enumerate()
                .map(|(k, x)| (*x, p(k)))
                .collect();
            let family = &f.fit.family;
            let fitted = (0..CURVE).map(|k| (family.quantile(p(k)), p(k))).collect();
            let mut chart = Chart::new(
                format!("{what}: observed and fitted"),
                what.rsplit(": ").next().unwrap_or(&what).to_string(),
                "share of values at most x",
                XAxis::Linear,
            );
            chart.y_from_zero = true;
            chart.series = vec![
                Series::new(format!("observed ({} values)", f.observed.n), observed),
                Series::new(
                    format!("fitted: {}, KS {:.3}", family.name(), f.fit.distance),
                    fitted,
                ),
            ];
            (q.stem, what, chart)
        })
        .collect()
}
