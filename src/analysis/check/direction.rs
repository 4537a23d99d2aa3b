//! Which way is worse, for every metric of summary.json: what a baseline comparison needs to
//! tell a regression from an improvement.

use crate::engine::summary::metrics::{self, Metric};

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

/// The direction of every metric of summary.json but the latencies, in the file's order.
const DIRECTIONS: &[(Metric, Direction)] = {
    use metrics::*;
    use Direction::*;
    &[
        (SCHEMA_VERSION, NotGated),
        (SEED, NotGated),
        (QUERIES, LowerIsWorse),
        (QUERIES_STARTED, LowerIsWorse),
        (QUERIES_FAILED, HigherIsWorse),
        (QUERIES_ABANDONED, HigherIsWorse),
        (CALLS, NotGated),
        (VIRTUAL_SECONDS, HigherIsWorse),
        (QUERIES_PER_S, LowerIsWorse),
        (CALLS_PER_S, NotGated),
        (PROVIDER_RECEIVED, HigherIsWorse),
        (PROVIDER_SERVED, NotGated),
        (PROVIDER_RATE_LIMITED, HigherIsWorse),
        (PROVIDER_ERRORED, HigherIsWorse),
        (PROVIDER_TIMED_OUT, HigherIsWorse),
        (PROVIDER_TOKENS_CHARGED, HigherIsWorse),
        (PEAK_REQUESTS_PER_60S, NotGated),
        (PEAK_TOKENS_PER_60S, NotGated),
        (ATTEMPTS, HigherIsWorse),
        (ATTEMPTS_TIMED_OUT, HigherIsWorse),
        (RETRIES, HigherIsWorse),
        (ERRORS, HigherIsWorse),
        (TRANSPORT_CONNECTION_REFUSED, HigherIsWorse),
        (TRANSPORT_CONNECTION_RESET, HigherIsWorse),
        (TRANSPORT_TOO_MANY_OPEN_FILES, HigherIsWorse),
        (TRANSPORT_TIMED_OUT, HigherIsWorse),
        (TRANSPORT_OTHER, HigherIsWorse),
        (CANCELLED, HigherIsWorse),
        (NOT_RUN, HigherIsWorse),
        (BUDGET_EXHAUSTED, HigherIsWorse),
        (ORPHANED_REQUESTS, HigherIsWorse),
        (SYNTHESIS_ATTEMPTED, LowerIsWorse),
        (SYNTHESIS_REFUSED, HigherIsWorse),
        (SYNTHESIS_LEFT_TOKENS_MEAN, LowerIsWorse),
        (SYNTHESIS_LEFT_TOKENS_MIN, LowerIsWorse),
        (GENERATION_CALLS, NotGated),
        (GENERATION_OUTPUT_TOKENS, NotGated),
        (GENERATION_OUTPUT_TOKENS_PER_S, LowerIsWorse),
        (FLEET_REPLICAS, NotGated),
        (FLEET_QUERIES_MIN, LowerIsWorse),
        (FLEET_QUERIES_MAX, NotGated),
        (FLEET_QUERIES_PER_S_MIN, LowerIsWorse),
        (FLEET_QUERIES_PER_S_MAX, NotGated),
        (CONCURRENCY_LIMIT_MEAN, NotGated),
        (CONCURRENCY_LIMIT_MIN, NotGated),
        (CONCURRENCY_LIMIT_MAX, NotGated),
        (CONCURRENCY_LIMIT_CUTS, HigherIsWorse),
        (RPM_UTILIZATION, NotGated),
        (TPM_UTILIZATION, NotGated),
        (PEAK_RPM_UTILIZATION, NotGated),
        // The bill and its parts by kind rise with the work done; per query, per good query
        // and what is wasted are the gates.
        (COST_TOTAL_USD, HigherIsWorse),
        (COST_PER_QUERY_USD, HigherIsWorse),
        (COST_PER_GOOD_QUERY_USD, HigherIsWorse),
        (COST_GOOD_QUERIES, LowerIsWorse),
        (COST_WASTED_USD, HigherIsWorse),
        (COST_WASTED_SHARE, HigherIsWorse),
        (COST_UNUSED_ANSWERS_USD, HigherIsWorse),
        (COST_UNUSED_ANSWERS_TOKENS, HigherIsWorse),
        (COST_FAILED_QUERIES_USD, HigherIsWorse),
        (COST_FAILED_QUERIES_TOKENS, HigherIsWorse),
        (COST_INPUT_TOKENS, NotGated),
        (COST_CACHED_INPUT_TOKENS, NotGated),
        (COST_OUTPUT_TOKENS, NotGated),
        (COST_INPUT_USD, NotGated),
        (COST_CACHED_INPUT_USD, NotGated),
        (COST_OUTPUT_USD, NotGated),
    ]
};

/// Counts that grow with the work a run does as well as with waste: in a run bound by a
/// duration, where a better client does more work in the same time, they are gated per query
/// started ([`is_count`]).
const COUNTS: &[Metric] = {
    use metrics::*;
    &[
        QUERIES_FAILED,
        QUERIES_ABANDONED,
        PROVIDER_RECEIVED,
        PROVIDER_RATE_LIMITED,
        PROVIDER_ERRORED,
        PROVIDER_TIMED_OUT,
        PROVIDER_TOKENS_CHARGED,
        ATTEMPTS,
        ATTEMPTS_TIMED_OUT,
        RETRIES,
        ERRORS,
        TRANSPORT_CONNECTION_REFUSED,
        TRANSPORT_CONNECTION_RESET,
        TRANSPORT_TOO_MANY_OPEN_FILES,
        TRANSPORT_TIMED_OUT,
        TRANSPORT_OTHER,
        CANCELLED,
        NOT_RUN,
        BUDGET_EXHAUSTED,
        ORPHANED_REQUESTS,
        SYNTHESIS_REFUSED,
        CONCURRENCY_LIMIT_CUTS,
        COST_TOTAL_USD,
        COST_WASTED_USD,
        COST_UNUSED_ANSWERS_USD,
        COST_UNUSED_ANSWERS_TOKENS,
        COST_FAILED_QUERIES_USD,
        COST_FAILED_QUERIES_TOKENS,
    ]
};

/// Whether the metric at dotted `path` is a count where more is worse that also grows with the
/// work done (requests, tokens, 429s, retries, failures; a provider's of several too).
pub fn is_count(path: &str) -> bool {
    if let Some(rest) = path.strip_prefix("providers.") {
        return rest
            .split_once('.')
            .is_some_and(|(_, field)| is_count(&format!("provider.{field}")));
    }
    COUNTS.iter().any(|m| m.path() == path)
}

/// The direction of the metric at dotted `path`, or `None` for a path summary.json does not
/// have.
pub fn direction(path: &str) -> Option<Direction> {
    use Direction::*;
    // The latencies, `latency_ms.<histogram>.<statistic>`, by their statistic.
    let latency = path.strip_prefix("latency_ms.").or_else(|| {
        path.strip_prefix("generation.")
            .filter(|_| metrics::is_latency(path))
    });
    if let Some(rest) = latency {
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
    // The provider's own bill, counted as it served: it rises with the work done; `cost.*`
    // holds the gates.
    if crate::engine::summary::cost::is_provider_bill(path) {
        return Some(NotGated);
    }
    // A provider of several, `providers.NAME.FIELD`: as the field of all of them together.
    if let Some(rest) = path.strip_prefix("providers.") {
        let (_, field) = rest.split_once('.')?;
        return direction(&format!("provider.{field}")).or_else(|| direction(field));
    }
    DIRECTIONS
        .iter()
        .find(|(m, _)| m.path() == path)
        .map(|(_, d)| *d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::summary::Summary;

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
        assert_eq!(
            direction("provider.billed.input_picodollars"),
            Some(Direction::NotGated)
        );
        assert_eq!(
            direction("providers.llm.billed.requests"),
            Some(Direction::NotGated)
        );
        assert_eq!(direction("provider.billed.nonsense"), None);
        assert_eq!(direction("latency_ms.query.p42"), None);
        assert_eq!(direction("provider.nonsense"), None);
    }

    #[test]
    fn counts_that_grow_with_work_are_known() {
        assert!(is_count("provider.received"));
        assert!(is_count("providers.llm.rate_limited"));
        assert!(is_count("retries"));
        assert!(!is_count("latency_ms.query.p95"));
        assert!(!is_count("queries"));
        assert!(!is_count("virtual_seconds"));
        for m in COUNTS {
            assert_eq!(direction(m.path()), Some(Direction::HigherIsWorse), "{m}");
        }
    }
}
