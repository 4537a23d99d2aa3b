//! Which way is worse, for every metric of summary.json: what a baseline comparison needs to
//! tell a regression from an improvement.

/// How a metric is held against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// More is worse: latencies, 429s, retries, failures, time taken, quota spent.
    HigherIsWorse,
    /// Less is worse: queries finished and their rate, the budget left for a synthesis.
    LowerIsWorse,
    /// Not a regression either way: the seed; counts and rates of calls and peaks of the
    /// provider's load, which rise with useful work and with waste alike (orphaned requests,
    /// retries); the workload's own size. What is wasted is gated by its own metrics.
    NotGated,
}

/// The direction of the metric at dotted `path`, or `None` for a path summary.json does not
/// have.
pub fn direction(path: &str) -> Option<Direction> {
    use Direction::*;
    if let Some(rest) = path.strip_prefix("latency_ms.") {
        let (hist, stat) = rest.split_once('.')?;
        return match (hist, stat) {
            // Queries answered in full: fewer is worse. Call counts include calls whose
            // answer nobody read.
            ("query", "count") => Some(LowerIsWorse),
            (_, "count") => Some(NotGated),
            (_, "mean" | "p50" | "p90" | "p95" | "p99" | "max") => Some(HigherIsWorse),
            _ => None,
        };
    }
    Some(match path {
        "schema_version" | "seed" | "calls" => NotGated,
        "rpm_utilization" | "tpm_utilization" | "peak_rpm_utilization" => NotGated,
        "provider.served" | "throughput.calls_per_s" => NotGated,
        "provider.peak_requests_per_60s" | "provider.peak_tokens_per_60s" => NotGated,
        "queries" | "queries_started" | "throughput.queries_per_s" => LowerIsWorse,
        "synthesis.attempted" | "synthesis.left_tokens_mean" | "synthesis.left_tokens_min" => {
            LowerIsWorse
        }
        "queries_failed" | "queries_abandoned" | "virtual_seconds" => HigherIsWorse,
        "provider.received" | "provider.rate_limited" | "provider.errored" => HigherIsWorse,
        "provider.timed_out" | "provider.tokens_charged" => HigherIsWorse,
        "attempts" | "retries" | "errors" | "cancelled" | "not_run" => HigherIsWorse,
        "budget_exhausted" | "orphaned_requests" | "synthesis.refused" => HigherIsWorse,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::report::summary::Summary;

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
