//! What `capsize calibrate` writes: the calibrated scenario ([`scenario`]: `scenario.toml`,
//! commented, and its empirical files; [`doc`] the writer it goes through, [`values`] each
//! value within its bound, [`names`] the input's names as a scenario's, [`verify`] the text
//! read back before anything is written), and `calibration.md` / `.html` ([`report`]: the fit
//! table with each quantity's observed and fitted CDFs drawn ([`charts`]), the structure and
//! arrivals found, the check, what was assumed and skipped), and
//! `calibration.json` ([`json`]: the same as data).

pub mod charts;
pub mod client;
pub mod doc;
pub mod json;
pub mod names;
pub mod report;
pub mod scenario;
pub mod values;
pub mod verify;
mod workload;

use crate::analysis::calibrate::{Calibration, FitCheck};
use crate::output::report::html::{page, Page};

/// `calibration.md` and `calibration.html`.
/// `charts` are each chart's file stem and its SVG, drawn in place in the HTML.
pub fn reports(
    name: &str,
    cal: &Calibration,
    check: Option<&FitCheck>,
    assumed: &[String],
    charts: &[(String, String)],
) -> (String, String) {
    let md = report::markdown(name, cal, check, assumed);
    let charts: Vec<(&str, String)> = charts
        .iter()
        .map(|(s, v)| (s.as_str(), v.clone()))
        .collect();
    let html = page(
        &md,
        &Page {
            title: &format!("Calibration: {name}"),
            boxed: Some("The check: observed against predicted"),
            charts: &charts,
        },
    );
    (md, html)
}
