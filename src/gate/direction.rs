//! Which way is worse, for every metric of summary.json: what a baseline comparison needs to
//! tell a regression from an improvement.

/// How a metric is held against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// More is worse: latencies, 429s, retries, failures, time taken.
    HigherIsWorse,
    /// Less is worse: throughput, queries finished, calls answered.
    LowerIsWorse,
    /// Not a regression either way (a seed, a utilization that rises with throughput and with
    /// waste alike): shown nowhere, compared never.
    NotGated,
}

/// The direction of the metric at dotted `path`, or `None` for a path summary.json does not
/// have.
pub fn direction(path: &str) -> Option<Direction> {
    use Direction::*;
    if let Some(rest) = path.strip_prefix("latency_ms.") {
        let (_, stat) = rest.split_once('.')?;
        return match stat {
            "count" => Some(LowerIsWorse),
            "mean" | "p50" | "p90" | "p95" | "p99" | "max" => Some(HigherIsWorse),
            _ => None,
        };
    }
    Some(match path {
        "schema_version" | "seed" | "rpm_utilization" | "tpm_utilization" => NotGated,
        "queries" | "queries_started" | "calls" => LowerIsWorse,
        "throughput.queries_per_s" | "throughput.calls_per_s" => LowerIsWorse,
        "provider.served" => LowerIsWorse,
        "synthesis.attempted" | "synthesis.left_tokens_mean" | "synthesis.left_tokens_min" => {
            LowerIsWorse
        }
        "queries_failed" | "queries_abandoned" | "virtual_seconds" => HigherIsWorse,
        "provider.received" | "provider.rate_limited" | "provider.errored" => HigherIsWorse,
        "provider.timed_out" | "provider.tokens_charged" => HigherIsWorse,
        "provider.peak_requests_per_60s" | "provider.peak_tokens_per_60s" => HigherIsWorse,
        "attempts" | "retries" | "errors" | "cancelled" | "not_run" => HigherIsWorse,
        "budget_exhausted" | "orphaned_requests" | "peak_rpm_utilization" => HigherIsWorse,
        "synthesis.refused" => HigherIsWorse,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::Summary;

    #[test]
    fn every_metric_of_summary_json_has_a_direction() {
        let paths = Summary::metric_paths();
        assert!(paths.len() > 60, "{}", paths.len());
        for p in &paths {
            assert!(direction(p).is_some(), "{p} has no direction");
        }
        assert_eq!(
            direction("latency_ms.query.p95"),
            Some(Direction::HigherIsWorse)
        );
        assert_eq!(
            direction("latency_ms.query.count"),
            Some(Direction::LowerIsWorse)
        );
        assert_eq!(
            direction("throughput.queries_per_s"),
            Some(Direction::LowerIsWorse)
        );
        assert_eq!(direction("seed"), Some(Direction::NotGated));
        assert_eq!(direction("latency_ms.query.p42"), None);
        assert_eq!(direction("provider.nonsense"), None);
    }
}
