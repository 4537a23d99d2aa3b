//! The metrics of `summary.json` that code reads by their dotted paths, as typed constants, so
//! a path is spelled once. A path a user gives (an `[slo]` objective, a tolerance, a baseline's
//! keys) stays a string, checked against
//! [`Summary::metric_paths`](super::Summary::metric_paths).
//!
//! The latencies (`latency_ms.<histogram>.<statistic>`, in ms) are named here only where code
//! reads them; every other metric of summary.json has its constant.

use std::fmt;

use serde_json::Value;

/// A number in summary.json, by its dotted path (`latency_ms.query.p95`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric(&'static str);

impl Metric {
    /// The dotted path.
    pub const fn path(self) -> &'static str {
        self.0
    }

    /// Its value in `summary` (a summary.json, or a sweep point's mean of several): `None` if
    /// absent, `null` or not a number.
    pub fn read(self, summary: &Value) -> Option<f64> {
        crate::engine::summary::slo::number(summary, self.0)
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The version of summary.json's schema (not a measurement).
pub const SCHEMA_VERSION: Metric = Metric("schema_version");
/// The run's seed.
pub const SEED: Metric = Metric("seed");
/// Queries finished (count).
pub const QUERIES: Metric = Metric("queries");
/// Queries started (count).
pub const QUERIES_STARTED: Metric = Metric("queries_started");
/// Finished queries with a failed or stopped call (count).
pub const QUERIES_FAILED: Metric = Metric("queries_failed");
/// Queries abandoned by their caller: parent timeout, user stop (count).
pub const QUERIES_ABANDONED: Metric = Metric("queries_abandoned");
/// Tool calls submitted to the scheduler: the workload's size (count).
pub const CALLS: Metric = Metric("calls");
/// Model time from the start to the last query's end (s).
pub const VIRTUAL_SECONDS: Metric = Metric("virtual_seconds");

/// Mean end-to-end latency of the queries whose calls all succeeded (ms).
pub const QUERY_MEAN: Metric = Metric("latency_ms.query.mean");
/// Median query latency (ms).
pub const QUERY_P50: Metric = Metric("latency_ms.query.p50");
/// 95th percentile of query latency (ms).
pub const QUERY_P95: Metric = Metric("latency_ms.query.p95");
/// 99th percentile of query latency (ms).
pub const QUERY_P99: Metric = Metric("latency_ms.query.p99");
/// Median latency of a successful call, from submission (ms).
pub const CALL_P50: Metric = Metric("latency_ms.call.p50");
/// 95th percentile of call latency (ms).
pub const CALL_P95: Metric = Metric("latency_ms.call.p95");
/// 99th percentile of call latency (ms).
pub const CALL_P99: Metric = Metric("latency_ms.call.p99");

/// Queries finished per second of model time (queries/s).
pub const QUERIES_PER_S: Metric = Metric("throughput.queries_per_s");
/// Calls completed per second of model time (calls/s).
pub const CALLS_PER_S: Metric = Metric("throughput.calls_per_s");

/// Requests the provider received (count).
pub const PROVIDER_RECEIVED: Metric = Metric("provider.received");
/// Requests the provider served (count).
pub const PROVIDER_SERVED: Metric = Metric("provider.served");
/// Requests the provider refused with 429, over quota or too large ever to fit (count).
pub const PROVIDER_RATE_LIMITED: Metric = Metric("provider.rate_limited");
/// Requests the provider failed with 500/503/529 (count).
pub const PROVIDER_ERRORED: Metric = Metric("provider.errored");
/// Requests the provider never answered (count).
pub const PROVIDER_TIMED_OUT: Metric = Metric("provider.timed_out");
/// Tokens the provider charged against its quota (tokens).
pub const PROVIDER_TOKENS_CHARGED: Metric = Metric("provider.tokens_charged");
/// The most requests charged in any 60 s window (requests).
pub const PEAK_REQUESTS_PER_60S: Metric = Metric("provider.peak_requests_per_60s");
/// The most tokens charged in any 60 s window (tokens).
pub const PEAK_TOKENS_PER_60S: Metric = Metric("provider.peak_tokens_per_60s");

/// Attempts sent (count).
pub const ATTEMPTS: Metric = Metric("attempts");
/// Attempts that timed out at the client (count).
pub const ATTEMPTS_TIMED_OUT: Metric = Metric("attempts_timed_out");
/// Retries scheduled (count).
pub const RETRIES: Metric = Metric("retries");
/// Calls that failed for good (count).
pub const ERRORS: Metric = Metric("errors");
/// Attempts whose connection was refused (count; only in a real-time run with transport
/// errors).
pub const TRANSPORT_CONNECTION_REFUSED: Metric = Metric("transport_errors.connection_refused");
/// Attempts whose connection the peer reset or closed before the answer (count).
pub const TRANSPORT_CONNECTION_RESET: Metric = Metric("transport_errors.connection_reset");
/// Attempts that found no file descriptor to spare (count).
pub const TRANSPORT_TOO_MANY_OPEN_FILES: Metric = Metric("transport_errors.too_many_open_files");
/// Attempts whose connection the operating system gave up on (count).
pub const TRANSPORT_TIMED_OUT: Metric = Metric("transport_errors.timed_out");
/// Attempts whose connection failed otherwise (count).
pub const TRANSPORT_OTHER: Metric = Metric("transport_errors.other");
/// Calls stopped by a cancel, deadline or budget (count).
pub const CANCELLED: Metric = Metric("cancelled");
/// Calls answered "not run" (count).
pub const NOT_RUN: Metric = Metric("not_run");
/// Calls stopped because the budget they drew on was spent (count).
pub const BUDGET_EXHAUSTED: Metric = Metric("budget_exhausted");
/// Requests the provider charged whose answer was thrown away (count).
pub const ORPHANED_REQUESTS: Metric = Metric("orphaned_requests");

/// Synthesis turns attempted (count; only in workloads with a synthesis turn).
pub const SYNTHESIS_ATTEMPTED: Metric = Metric("synthesis.attempted");
/// Synthesis turns refused for want of budget (count; only with a synthesis turn).
pub const SYNTHESIS_REFUSED: Metric = Metric("synthesis.refused");
/// Mean tokens left in the query's budget when a synthesis started (tokens).
pub const SYNTHESIS_LEFT_TOKENS_MEAN: Metric = Metric("synthesis.left_tokens_mean");
/// The fewest tokens left when a synthesis started (tokens).
pub const SYNTHESIS_LEFT_TOKENS_MIN: Metric = Metric("synthesis.left_tokens_min");

/// Answers of a generating provider's model calls (count; only with a generating provider;
/// its latencies, `generation.{end_to_end,ttft,tpot}_ms.*`, are named like `latency_ms.*`).
pub const GENERATION_CALLS: Metric = Metric("generation.calls");
/// Output tokens those answers carried (tokens).
pub const GENERATION_OUTPUT_TOKENS: Metric = Metric("generation.output_tokens");
/// Output tokens per second over the run (tokens/s).
pub const GENERATION_OUTPUT_TOKENS_PER_S: Metric = Metric("generation.output_tokens_per_s");

/// Replicas of a fleet (count; only with `[fleet]` of two or more).
pub const FLEET_REPLICAS: Metric = Metric("fleet.replicas");
/// The fewest queries one replica finished (count).
pub const FLEET_QUERIES_MIN: Metric = Metric("fleet.queries_min");
/// The most queries one replica finished (count).
pub const FLEET_QUERIES_MAX: Metric = Metric("fleet.queries_max");
/// The slowest replica's queries per second (queries/s).
pub const FLEET_QUERIES_PER_S_MIN: Metric = Metric("fleet.queries_per_s_min");
/// The fastest replica's queries per second (queries/s).
pub const FLEET_QUERIES_PER_S_MAX: Metric = Metric("fleet.queries_per_s_max");

/// An adaptive concurrency limit's mean over time (calls; only with an adaptive
/// `max_concurrency`; a fleet's replicas averaged).
pub const CONCURRENCY_LIMIT_MEAN: Metric = Metric("concurrency_limit.mean");
/// The lowest the adaptive limit reached (calls).
pub const CONCURRENCY_LIMIT_MIN: Metric = Metric("concurrency_limit.min");
/// The highest the adaptive limit reached (calls).
pub const CONCURRENCY_LIMIT_MAX: Metric = Metric("concurrency_limit.max");
/// Times the adaptive limit was cut by a 429 or a timeout (count).
pub const CONCURRENCY_LIMIT_CUTS: Metric = Metric("concurrency_limit.cuts");

/// Charged requests per minute over the provider's RPM (a ratio; `null` without an RPM).
pub const RPM_UTILIZATION: Metric = Metric("rpm_utilization");
/// Charged tokens per minute over the provider's TPM (a ratio; `null` without a TPM).
pub const TPM_UTILIZATION: Metric = Metric("tpm_utilization");
/// The busiest 60 s window's requests over the provider's RPM (a ratio; `null` without an RPM).
pub const PEAK_RPM_UTILIZATION: Metric = Metric("peak_rpm_utilization");

/// Everything the priced providers billed (dollars; only with a `price`).
pub const COST_TOTAL_USD: Metric = Metric("cost.total_usd");
/// The bill over the queries started (dollars).
pub const COST_PER_QUERY_USD: Metric = Metric("cost.per_query_usd");
/// The bill over the good queries: finished, no call failed (dollars; `null` with none).
pub const COST_PER_GOOD_QUERY_USD: Metric = Metric("cost.per_good_query_usd");
/// Queries that finished with none of their calls failed (count).
pub const COST_GOOD_QUERIES: Metric = Metric("cost.good_queries");
/// Billed and of no use: unused answers and failed queries' answers (dollars).
pub const COST_WASTED_USD: Metric = Metric("cost.wasted_usd");
/// The wasted dollars over the bill (a share).
pub const COST_WASTED_SHARE: Metric = Metric("cost.wasted_share");
/// Billed answers no query used: client timeouts, orphans (dollars).
pub const COST_UNUSED_ANSWERS_USD: Metric = Metric("cost.unused_answers_usd");
/// Their tokens (count).
pub const COST_UNUSED_ANSWERS_TOKENS: Metric = Metric("cost.unused_answers_tokens");
/// Answers used by queries that failed or were abandoned (dollars).
pub const COST_FAILED_QUERIES_USD: Metric = Metric("cost.failed_queries_usd");
/// Their tokens (count).
pub const COST_FAILED_QUERIES_TOKENS: Metric = Metric("cost.failed_queries_tokens");
/// Prompt tokens billed at the input rate (count).
pub const COST_INPUT_TOKENS: Metric = Metric("cost.input_tokens");
/// Prompt tokens billed at the cached rate (count).
pub const COST_CACHED_INPUT_TOKENS: Metric = Metric("cost.cached_input_tokens");
/// Answer tokens billed (count).
pub const COST_OUTPUT_TOKENS: Metric = Metric("cost.output_tokens");
/// The prompt tokens' price at the input rate (dollars).
pub const COST_INPUT_USD: Metric = Metric("cost.input_usd");
/// The cached prompt tokens' price (dollars).
pub const COST_CACHED_INPUT_USD: Metric = Metric("cost.cached_input_usd");
/// The answer tokens' price (dollars).
pub const COST_OUTPUT_USD: Metric = Metric("cost.output_usd");

/// Whether `path` is a latency statistic (`latency_ms.H.S`, `generation.H_ms.S`): those are
/// named by their histogram and statistic, not by a constant each.
pub fn is_latency(path: &str) -> bool {
    path.starts_with("latency_ms.")
        || path.strip_prefix("generation.").is_some_and(|rest| {
            rest.split_once('.')
                .is_some_and(|(h, _)| h.ends_with("_ms"))
        })
}

/// Every constant of this module, in the order summary.json writes them.
#[cfg(test)]
const ALL: &[Metric] = &[
    SCHEMA_VERSION,
    SEED,
    QUERIES,
    QUERIES_STARTED,
    QUERIES_FAILED,
    QUERIES_ABANDONED,
    CALLS,
    VIRTUAL_SECONDS,
    QUERY_MEAN,
    QUERY_P50,
    QUERY_P95,
    QUERY_P99,
    CALL_P50,
    CALL_P95,
    CALL_P99,
    QUERIES_PER_S,
    CALLS_PER_S,
    PROVIDER_RECEIVED,
    PROVIDER_SERVED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_ERRORED,
    PROVIDER_TIMED_OUT,
    PROVIDER_TOKENS_CHARGED,
    PEAK_REQUESTS_PER_60S,
    PEAK_TOKENS_PER_60S,
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
    SYNTHESIS_ATTEMPTED,
    SYNTHESIS_REFUSED,
    SYNTHESIS_LEFT_TOKENS_MEAN,
    SYNTHESIS_LEFT_TOKENS_MIN,
    GENERATION_CALLS,
    GENERATION_OUTPUT_TOKENS,
    GENERATION_OUTPUT_TOKENS_PER_S,
    FLEET_REPLICAS,
    FLEET_QUERIES_MIN,
    FLEET_QUERIES_MAX,
    FLEET_QUERIES_PER_S_MIN,
    FLEET_QUERIES_PER_S_MAX,
    CONCURRENCY_LIMIT_MEAN,
    CONCURRENCY_LIMIT_MIN,
    CONCURRENCY_LIMIT_MAX,
    CONCURRENCY_LIMIT_CUTS,
    RPM_UTILIZATION,
    TPM_UTILIZATION,
    PEAK_RPM_UTILIZATION,
    COST_TOTAL_USD,
    COST_PER_QUERY_USD,
    COST_PER_GOOD_QUERY_USD,
    COST_GOOD_QUERIES,
    COST_WASTED_USD,
    COST_WASTED_SHARE,
    COST_UNUSED_ANSWERS_USD,
    COST_UNUSED_ANSWERS_TOKENS,
    COST_FAILED_QUERIES_USD,
    COST_FAILED_QUERIES_TOKENS,
    COST_INPUT_TOKENS,
    COST_CACHED_INPUT_TOKENS,
    COST_OUTPUT_TOKENS,
    COST_INPUT_USD,
    COST_CACHED_INPUT_USD,
    COST_OUTPUT_USD,
];

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::engine::summary::Summary;

    /// A small run with both limits, a synthesis turn, a generating provider, an adaptive
    /// limit and a fleet of two: every metric of summary.json is a number in it.
    fn summary_json() -> Value {
        let scenario = crate::engine::scenario::parse(
            r#"
            name = "metrics"
            [provider]
            rpm = 600
            tpm = 1_000_000
            latency = { dist = "uniform", min_ms = 100, max_ms = 300 }
            output_tokens = 50
            ttft = { dist = "constant", ms = 200 }
            tpot = { dist = "constant", ms = 5 }
            price = { input_per_mtok = 3.0, output_per_mtok = 15.0 }
            [workload]
            queries = 4
            calls_per_query = 3
            tokens_per_call = 100
            rounds = 2
            [workload.subagents]
            count = 2
            budget_tokens = 1000
            orchestrator_budget = 5000
            synthesis_tokens = 500
            [scheduler]
            max_concurrency = { adaptive = "aimd", max = 4 }
            rate_limit = true
            [fleet]
            replicas = 2
            "#,
            Path::new("metrics.toml"),
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let outcome = crate::engine::sim::run(&scenario).unwrap_or_else(|e| panic!("{e}"));
        let mut summary = Summary::new(&scenario, &outcome);
        // Transport errors are a real-time run's: none in virtual time.
        assert_eq!(summary.transport_errors, None);
        summary.transport_errors = Some(Default::default());
        let json = summary.to_json();
        serde_json::from_str(&json).expect("summary.json is JSON")
    }

    #[test]
    fn every_metric_is_a_number_in_summary_json() {
        let json = summary_json();
        for m in ALL {
            assert!(m.read(&json).is_some(), "{m} is not a number in {json}");
        }
    }

    #[test]
    fn every_metric_but_the_latencies_has_a_constant() {
        let named: Vec<&str> = ALL.iter().map(|m| m.path()).collect();
        let unnamed: Vec<String> = Summary::metric_paths()
            .into_iter()
            .filter(|p| !is_latency(p) && !named.contains(&p.as_str()))
            .collect();
        assert!(unnamed.is_empty(), "no constant for {unnamed:?}");
    }
}
