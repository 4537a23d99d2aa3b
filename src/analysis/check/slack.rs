//! What each metric measures, and the absolute slack a baseline comparison gives it: the
//! least a metric may get worse by, whatever its tolerance, so that a baseline of 0 (no queue
//! time) is not broken by a trivial 1 ms.
//!
//! | kind  | metrics                                                              | absolute slack |
//! |-------|----------------------------------------------------------------------|----------------|
//! | ms    | latencies: `latency_ms.H.S`, `generation.H_ms.S` (but their `count`)  | 5 ms           |
//! | s     | `virtual_seconds`                                                    | 0.005 s        |
//! | /s    | rates: `throughput.*`, `*_per_s`, `fleet.queries_per_s_*`            | 0.001 /s       |
//! | ratio | `*_utilization`                                                      | 0.001          |
//! | count | everything counted: queries, 429s, failures, retries, tokens, calls  | 0              |
//!
//! A metric may get worse by its tolerance × its baseline value or by its absolute slack,
//! whichever is more. A count has none: one 429 where the baseline had none fails. The time
//! slack is what a run's clock and its rounding can move by; the rate and ratio slacks are
//! summary.json's rounding (3 and 4 decimals).

use crate::engine::summary::metrics;

/// What a metric measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A time in milliseconds: a latency statistic.
    Millis,
    /// A time in seconds.
    Seconds,
    /// A rate per second.
    PerSecond,
    /// A share of a limit.
    Ratio,
    /// A count (queries, requests, tokens, calls).
    Count,
}

impl Unit {
    /// The absolute slack of the table above.
    pub fn slack(self) -> f64 {
        match self {
            Unit::Millis => 5.0,
            Unit::Seconds => 0.005,
            Unit::PerSecond | Unit::Ratio => 0.001,
            Unit::Count => 0.0,
        }
    }

    /// `ms`, ` s`, `/s` or nothing: what follows a number of this unit.
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Millis => " ms",
            Unit::Seconds => " s",
            Unit::PerSecond => "/s",
            Unit::Ratio | Unit::Count => "",
        }
    }
}

/// The unit of the metric at dotted `path` (a count for a path it does not know).
pub fn unit(path: &str) -> Unit {
    // A provider of several, `providers.NAME.FIELD`: as `provider.FIELD`.
    if let Some((_, field)) = path
        .strip_prefix("providers.")
        .and_then(|rest| rest.split_once('.'))
    {
        return unit(&format!("provider.{field}"));
    }
    if metrics::is_latency(path) {
        return if path.ends_with(".count") {
            Unit::Count
        } else {
            Unit::Millis
        };
    }
    if path == metrics::VIRTUAL_SECONDS.path() {
        Unit::Seconds
    } else if path.starts_with("throughput.") || path.contains("_per_s") {
        Unit::PerSecond
    } else if path.ends_with("utilization") {
        Unit::Ratio
    } else {
        Unit::Count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::summary::Summary;

    #[test]
    fn units_from_the_path() {
        assert_eq!(unit("latency_ms.call_queue.p95"), Unit::Millis);
        assert_eq!(unit("latency_ms.query.max"), Unit::Millis);
        assert_eq!(unit("latency_ms.query.count"), Unit::Count);
        assert_eq!(unit("generation.ttft_ms.p50"), Unit::Millis);
        assert_eq!(unit("virtual_seconds"), Unit::Seconds);
        assert_eq!(unit("throughput.queries_per_s"), Unit::PerSecond);
        assert_eq!(unit("generation.output_tokens_per_s"), Unit::PerSecond);
        assert_eq!(unit("fleet.queries_per_s_min"), Unit::PerSecond);
        assert_eq!(unit("rpm_utilization"), Unit::Ratio);
        assert_eq!(unit("provider.rate_limited"), Unit::Count);
        assert_eq!(unit("providers.openai.rate_limited"), Unit::Count);
        assert_eq!(unit("provider.peak_requests_per_60s"), Unit::Count);
        assert_eq!(unit("queries_failed"), Unit::Count);
        // Every metric of summary.json is of one of them; only times and rates get slack.
        for p in Summary::metric_paths() {
            let u = unit(&p);
            assert!(u == Unit::Count || u.slack() > 0.0, "{p}");
        }
        assert_eq!(Unit::Count.slack(), 0.0);
        assert_eq!(Unit::Millis.slack(), 5.0);
    }
}
