//! `[check]`: how `capsize check` holds a run against a baseline.
//!
//! `metrics = ["latency_ms.query", "provider.rate_limited"]` chooses the metrics compared with
//! the baseline: summary.json paths, each a metric or a prefix of metrics. Whether each names
//! something summary.json has is checked by the gate (it knows the providers' fields); here,
//! only that the list is a list of dotted paths.

use serde::Deserialize;

use super::bounds::{bad, Invalid};

/// `[check]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    /// The metrics (or prefixes) compared with a baseline; absent: every gated metric.
    pub metrics: Option<Vec<String>>,
}

/// The validated `[check]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckSettings {
    /// The metrics (or prefixes) compared with a baseline, as written; `None`: every metric
    /// the gate compares by default.
    pub metrics: Option<Vec<String>>,
}

/// Validates `[check]` (absent: the defaults).
pub fn check(raw: Option<&RawCheck>) -> Result<CheckSettings, Invalid> {
    let Some(metrics) = raw.and_then(|r| r.metrics.as_ref()) else {
        return Ok(CheckSettings::default());
    };
    if metrics.is_empty() {
        return Err(bad(
            "check.metrics",
            "is empty: list the metrics to compare with a baseline, or leave it out to compare every one",
        ));
    }
    for m in metrics {
        if m.is_empty() || m.split('.').any(str::is_empty) {
            return Err(bad(
                "check.metrics",
                format!("{m:?} is not a dotted summary.json path such as \"latency_ms.query\""),
            ));
        }
    }
    Ok(CheckSettings {
        metrics: Some(metrics.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_dotted_paths() {
        assert_eq!(check(None), Ok(CheckSettings::default()));
        let raw = |m: &[&str]| RawCheck {
            metrics: Some(m.iter().map(|s| s.to_string()).collect()),
        };
        let ok = check(Some(&raw(&["latency_ms.query", "provider.rate_limited"]))).unwrap();
        assert_eq!(ok.metrics.unwrap().len(), 2);
        assert!(check(Some(&raw(&[]))).is_err());
        assert!(check(Some(&raw(&["latency_ms..p95"]))).is_err());
        assert!(check(Some(&raw(&[""]))).is_err());
    }
}
