//! Which metrics a baseline comparison gates: by default every metric with a way that is worse
//! but the maxima (`*.max`, one unlucky sample: too noisy to gate); or the metrics a list
//! names (`--metrics`, `[check] metrics`), each a full path or a prefix of paths.

use super::direction::{direction, Direction};
use super::GateError;
use crate::engine::scenario::key_within;
use crate::engine::summary::Summary;

/// The metrics compared with a baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every metric with a direction, but the maxima.
    #[default]
    Default,
    /// The metrics these name: a full path (`latency_ms.query.p95`, and `latency_ms.query.max`
    /// too) or a prefix of paths (`latency_ms.query`: its count, mean and percentiles, not its
    /// maximum, which is gated only when named in full).
    Only(Vec<String>),
}

/// Whether the maximum of a statistic: not gated unless named in full.
fn is_max(path: &str) -> bool {
    path.ends_with(".max")
}

/// Whether a baseline comparison can gate `path`: it has a way that is worse.
fn comparable(path: &str) -> bool {
    direction(path).is_some_and(|d| d != Direction::NotGated)
}

/// Whether `entry` picks `path`: it is the path, or a prefix of it (but for a maximum).
fn picks(entry: &str, path: &str) -> bool {
    key_within(path, entry) && (path == entry || !is_max(path))
}

impl Selection {
    /// The selection of a list (`None`: the default).
    pub fn of(list: Option<&[String]>) -> Selection {
        list.map_or(Selection::Default, |l| Selection::Only(l.to_vec()))
    }

    /// Whether the metric at `path` is compared with the baseline.
    pub fn gates(&self, path: &str) -> bool {
        comparable(path)
            && match self {
                Selection::Default => !is_max(path),
                Selection::Only(list) => list.iter().any(|e| picks(e, path)),
            }
    }

    /// Checks that every entry names a summary.json metric, or a prefix of some, that a
    /// baseline comparison gates; `providers` are the per-provider fields' names (empty for a
    /// scenario of one `[provider]`), `at` where the list is written (`--metrics`).
    pub fn validate(&self, providers: &[String], at: &str) -> Result<(), GateError> {
        let Selection::Only(list) = self else {
            return Ok(());
        };
        let mut known = Summary::metric_paths();
        known.extend(Summary::provider_paths(providers));
        for entry in list {
            let picked: Vec<&String> = known.iter().filter(|k| picks(entry, k)).collect();
            if picked.is_empty() {
                return Err(GateError::UnknownPath {
                    at: at.to_string(),
                    metric: entry.clone(),
                });
            }
            if !picked.iter().any(|k| comparable(k)) {
                return Err(GateError::NotCompared {
                    at: at.to_string(),
                    metric: entry.clone(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(list: &[&str]) -> Selection {
        Selection::Only(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn maxima_are_gated_only_when_named_in_full() {
        let all = Selection::Default;
        assert!(all.gates("latency_ms.query.p95"));
        assert!(!all.gates("latency_ms.query.max"));
        assert!(!all.gates("latency_ms.call_queue.max"));
        assert!(!all.gates("seed"));
        let query = only(&["latency_ms.query"]);
        assert!(query.gates("latency_ms.query.p95"));
        assert!(query.gates("latency_ms.query.count"));
        assert!(!query.gates("latency_ms.query.max"));
        assert!(!query.gates("latency_ms.query_start_lateness.p95"));
        assert!(!query.gates("provider.rate_limited"));
        let max = only(&["latency_ms.query.max"]);
        assert!(max.gates("latency_ms.query.max"));
        assert!(!max.gates("latency_ms.query.p95"));
    }

    #[test]
    fn every_entry_names_a_compared_metric() {
        let ok = only(&[
            "latency_ms.query",
            "provider.rate_limited",
            "providers.a.errored",
        ]);
        assert_eq!(ok.validate(&["a".into()], "--metrics"), Ok(()));
        assert_eq!(Selection::Default.validate(&[], "--metrics"), Ok(()));
        let typo = only(&["latency_ms.querry"]);
        let e = typo.validate(&[], "--metrics").unwrap_err().to_string();
        assert!(
            e.starts_with("--metrics: \"latency_ms.querry\" is not a summary.json metric"),
            "{e}"
        );
        // A part of a name is not a prefix.
        assert!(only(&["latency_ms.que"]).validate(&[], "x").is_err());
        let seed = only(&["seed"]).validate(&[], "[check] metrics");
        assert!(
            matches!(seed, Err(GateError::NotCompared { .. })),
            "{seed:?}"
        );
    }
}
