//! `summary.json`: one run's results, in model time, the record every later layer reads. The
//! schema is versioned (`schema_version`) and documented in docs/reference.md; fields are
//! added, never renamed. [`metrics`] names the paths code reads; [`slo`] holds a run to
//! objectives on them; paths.rs says which paths the file can hold, and gives it as JSON.

pub mod cost;
pub mod metrics;
mod paths;
mod sections;
pub mod slo;
mod valid;

use std::collections::BTreeMap;

use capsize_mock::Counters;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::engine::provider::transport::TransportErrors;
use crate::engine::recorder::EndpointLoad;
use crate::engine::routes::Routes;
use crate::engine::scenario::Scenario;
use crate::engine::sim::SimOutcome;
use cost::{Billed, Cost};
pub use paths::json_value;
pub use sections::{FleetSummary, GenerationSummary, LimitSummary, SynthesisSummary};
pub use valid::counters_add_up;

/// The schema version of `summary.json`.
pub const SCHEMA_VERSION: u32 = 1;

/// Percentiles of one latency histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

impl Percentiles {
    /// From a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Self {
        let ms = |us: u64| round3(us as f64 / 1000.0);
        if h.is_empty() {
            return Percentiles {
                count: 0,
                mean: 0.0,
                p50: 0.0,
                p90: 0.0,
                p95: 0.0,
                p99: 0.0,
                max: 0.0,
            };
        }
        Percentiles {
            count: h.len(),
            mean: round3(h.mean() / 1000.0),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        }
    }
}

/// Latency of queries and calls, and the calls' phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    /// End to end per query whose calls all succeeded, from its intended start.
    pub query: Percentiles,
    /// Per successful call, from submission.
    pub call: Percentiles,
    /// Per successful call: waiting for a permit.
    pub call_queue: Percentiles,
    /// Per successful call: waiting for the client-side rate limiter.
    pub call_limiter: Percentiles,
    /// Per successful call: backing off before retries.
    pub call_backoff: Percentiles,
    /// Per successful call: at the provider.
    pub call_service: Percentiles,
    /// Per charged request: queued at the provider for a free server (part of service).
    pub provider_queue: Percentiles,
    /// Per attempt, with a client model (`[scheduler.client]`): the client's own time, waiting
    /// for one of its threads and working, before the attempt left and after its answer came
    /// (part of service). Absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Percentiles>,
    /// Per query: how late it started after its intended start. Zero in virtual time; in real
    /// time the client's own lag (for a query whose first call does not wait, its send lateness).
    pub query_start_lateness: Percentiles,
}

/// Completed work per second of model time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Queries finished per second.
    pub queries_per_s: f64,
    /// Calls completed per second.
    pub calls_per_s: f64,
}

/// What the provider saw during one of its phases (`[[provider.phases]]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseCounts {
    /// When the phase starts, in seconds of model time.
    pub from_s: f64,
    /// When it ends (`null`: when the next phase starts, or never).
    pub to_s: Option<f64>,
    /// received, served, ... of the requests that arrived during it.
    #[serde(flatten)]
    pub counters: Counters,
}

impl PhaseCounts {
    /// Each phase of `config` with what `counts` says it saw.
    pub fn of(config: &capsize_mock::ProviderConfig, counts: &[Counters]) -> Vec<PhaseCounts> {
        config
            .phases
            .iter()
            .zip(counts.iter().chain(std::iter::repeat(&Counters::default())))
            .map(|(p, c)| PhaseCounts {
                from_s: p.from.as_secs_f64(),
                to_s: p.to.map(|t| t.as_secs_f64()),
                counters: *c,
            })
            .collect()
    }
}

/// The provider's own counters, and its busiest minute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderCounts {
    /// received, served, rate_limited, errored, timed_out, tokens_charged.
    #[serde(flatten)]
    pub counters: Counters,
    /// The most requests charged in any 60 s window (whole seconds).
    pub peak_requests_per_60s: u64,
    /// The most tokens charged in any 60 s window (whole seconds).
    pub peak_tokens_per_60s: u64,
    /// What it saw in each of its phases, if it has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseCounts>,
}

/// One provider of several: its counters, busiest minute and utilizations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedProviderSummary {
    /// Its counters and busiest minute.
    #[serde(flatten)]
    pub counts: ProviderCounts,
    /// Its charged requests per minute over its RPM (`null` if unlimited).
    pub rpm_utilization: Option<f64>,
    /// Its charged tokens per minute over its TPM (`null` if unlimited).
    pub tpm_utilization: Option<f64>,
    /// Its busiest 60 s window's requests over its RPM.
    pub peak_rpm_utilization: Option<f64>,
}

/// `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Schema version.
    pub schema_version: u32,
    /// The capsize version that wrote it.
    pub capsize_version: String,
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// `virtual` or `realtime`.
    pub mode: String,
    /// The client model the run's retries followed (`scheduler.retry.preset`, `capsize` by
    /// default).
    pub retry_preset: String,
    /// Queries finished.
    pub queries: u64,
    /// Queries started.
    pub queries_started: u64,
    /// Finished queries with a failed or stopped call.
    pub queries_failed: u64,
    /// Queries abandoned by their caller (parent timeout, user stop).
    pub queries_abandoned: u64,
    /// Calls submitted to the scheduler.
    pub calls: u64,
    /// Model seconds from the start to the last query's end.
    pub virtual_seconds: f64,
    /// Latencies, in milliseconds.
    pub latency_ms: Latencies,
    /// Throughput.
    pub throughput: Throughput,
    /// Provider counters (every provider's, added up, when there are several).
    pub provider: ProviderCounts,
    /// Each provider, by name, when the scenario names them (`[providers.NAME]`; `none`:
    /// the tools sent to no provider).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, NamedProviderSummary>,
    /// Attempts sent.
    pub attempts: u64,
    /// Attempts that timed out at the client (its timeout per attempt: the provider was slow
    /// or never answered).
    pub attempts_timed_out: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Calls that failed for good.
    pub errors: u64,
    /// Attempts whose connection failed, by why (only in a real-time run that had any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_errors: Option<TransportErrors>,
    /// Calls stopped by a cancel, deadline or budget.
    pub cancelled: u64,
    /// Calls answered "not run".
    pub not_run: u64,
    /// Calls stopped because the budget they drew on was spent.
    pub budget_exhausted: u64,
    /// Requests the provider charged whose answer was thrown away.
    pub orphaned_requests: u64,
    /// The orchestrators' synthesis turns (only for workloads with a synthesis turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthesis: Option<SynthesisSummary>,
    /// Model calls a generating provider answered (only for runs that had any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenerationSummary>,
    /// The replicas of a fleet and how evenly they were served (only with `[fleet]` of two
    /// or more; the fields above are the fleet's totals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetSummary>,
    /// The adaptive concurrency limit over the run (only with an adaptive
    /// `max_concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_limit: Option<LimitSummary>,
    /// Charged requests per minute over the provider's RPM (`null` if unlimited; with
    /// several providers, the highest of theirs).
    pub rpm_utilization: Option<f64>,
    /// Charged tokens per minute over the provider's TPM (`null` if unlimited; the highest).
    pub tpm_utilization: Option<f64>,
    /// The busiest 60 s window's requests over the provider's RPM (the highest).
    pub peak_rpm_utilization: Option<f64>,
    /// What the run cost, when a provider has a `price`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

fn ratio(v: f64, limit: Option<f64>) -> Option<f64> {
    limit.map(|l| (v / l * 10_000.0).round() / 10_000.0)
}

/// Each endpoint of `s`'s run, by name: its counters, busiest minute and utilizations.
fn per_provider(
    s: &Scenario,
    out: &SimOutcome,
    per_min: &dyn Fn(u64) -> f64,
) -> BTreeMap<String, NamedProviderSummary> {
    let routes = Routes::of(s);
    let r = &out.recording;
    routes
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let counters = out.endpoints.get(i).copied().unwrap_or_default();
            // A run of one endpoint keeps its load in the run's own counts.
            let load = r.endpoints.get(i).copied().unwrap_or(EndpointLoad {
                charged_requests: r.charged_requests,
                peak_requests_60s: r.peak_requests_60s,
                peak_tokens_60s: r.peak_tokens_60s,
            });
            let summary = NamedProviderSummary {
                counts: ProviderCounts {
                    counters,
                    peak_requests_per_60s: load.peak_requests_60s,
                    peak_tokens_per_60s: load.peak_tokens_60s,
                    phases: PhaseCounts::of(&e.config, out.phases.get(i).map_or(&[], |v| v)),
                },
                rpm_utilization: ratio(per_min(load.charged_requests), e.config.rpm),
                tpm_utilization: ratio(per_min(counters.tokens_charged), e.config.tpm),
                peak_rpm_utilization: ratio(load.peak_requests_60s as f64, e.config.rpm),
            };
            (e.name.clone(), summary)
        })
        .collect()
}

/// What `out`, a run of `scenario`, cost (`None`: no provider has a price).
fn cost_of(scenario: &Scenario, out: &SimOutcome) -> Option<Cost> {
    let routes = Routes::of(scenario);
    let r = &out.recording;
    let priced: Vec<Billed> = routes
        .endpoints
        .iter()
        .enumerate()
        .filter(|(_, e)| e.config.priced())
        .map(|(i, e)| Billed {
            name: &e.name,
            billed: out.endpoints.get(i).map(|c| c.billed).unwrap_or_default(),
            used: r.used.get(i).copied().unwrap_or_default(),
        })
        .collect();
    let good = r.queries_completed.saturating_sub(r.queries_failed);
    Cost::of(&priced, r.used_by_failed, out.queries_started, good)
}

/// `n` per second over `over` seconds, to three decimals (0 over no time).
fn rate(n: u64, over: f64) -> f64 {
    if over > 0.0 {
        round3(n as f64 / over)
    } else {
        0.0
    }
}

impl Summary {
    /// The summary of a virtual run of `scenario`.
    pub fn new(scenario: &Scenario, out: &SimOutcome) -> Self {
        let r = &out.recording;
        let secs = out.elapsed.as_secs_f64();
        // Utilization is over the whole time the provider was sent traffic.
        let minutes = out.span.as_secs_f64() / 60.0;
        let (peak_req, peak_tok) = (r.peak_requests_60s, r.peak_tokens_60s);
        let charged = r.charged_requests;
        let p = &out.provider;
        let per_min = |n: u64| {
            if minutes > 0.0 {
                n as f64 / minutes
            } else {
                0.0
            }
        };
        let providers = if scenario.named_providers {
            per_provider(scenario, out, &per_min)
        } else {
            BTreeMap::new()
        };
        // The highest of the providers' (the one that binds), or the one provider's.
        let highest = |f: fn(&NamedProviderSummary) -> Option<f64>, one: Option<f64>| {
            if providers.is_empty() {
                return one;
            }
            providers.values().filter_map(f).reduce(f64::max)
        };
        let one = scenario.provider();
        Summary {
            schema_version: SCHEMA_VERSION,
            capsize_version: crate::engine::VERSION.into(),
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            mode: out.mode.name().into(),
            retry_preset: scenario.scheduler.retry_preset.into(),
            queries: r.queries_completed,
            queries_started: out.queries_started,
            queries_failed: r.queries_failed,
            queries_abandoned: r.queries_abandoned,
            calls: r.calls.calls,
            virtual_seconds: round3(secs),
            latency_ms: Latencies {
                query: Percentiles::of(&r.query),
                call: Percentiles::of(&r.call),
                call_queue: Percentiles::of(&r.queue),
                call_limiter: Percentiles::of(&r.limiter),
                call_backoff: Percentiles::of(&r.backoff),
                call_service: Percentiles::of(&r.service),
                provider_queue: Percentiles::of(&r.provider_queue),
                client: r.client.as_ref().map(Percentiles::of),
                query_start_lateness: Percentiles::of(&r.start_lateness),
            },
            throughput: Throughput {
                queries_per_s: rate(r.queries_completed, secs),
                // Calls left running after their query was abandoned end after the last
                // query: count them over the whole run.
                calls_per_s: rate(r.calls.completed, out.span.as_secs_f64()),
            },
            provider: ProviderCounts {
                counters: *p,
                peak_requests_per_60s: peak_req,
                peak_tokens_per_60s: peak_tok,
                // With several providers, each has its phases in `providers`.
                phases: match scenario.named_providers {
                    true => Vec::new(),
                    false => PhaseCounts::of(one, out.phases.first().map_or(&[], |v| v)),
                },
            },
            attempts: r.calls.attempts,
            attempts_timed_out: r.calls.timed_out,
            retries: r.calls.retries,
            errors: r.calls.failed,
            transport_errors: Some(r.transport_errors).filter(|t| t.total() > 0),
            cancelled: r.calls.cancelled,
            not_run: r.calls.not_run,
            budget_exhausted: r.calls.budget_exhausted,
            orphaned_requests: r.orphaned_requests,
            synthesis: SynthesisSummary::of(&r.syntheses),
            generation: r
                .generation
                .as_ref()
                .map(|g| GenerationSummary::of(g, out.span.as_secs_f64())),
            fleet: FleetSummary::of(scenario, &out.replica_queries, secs),
            concurrency_limit: LimitSummary::of(scenario, &out.limits),
            rpm_utilization: highest(|p| p.rpm_utilization, ratio(per_min(charged), one.rpm)),
            tpm_utilization: highest(
                |p| p.tpm_utilization,
                ratio(per_min(p.tokens_charged), one.tpm),
            ),
            peak_rpm_utilization: highest(
                |p| p.peak_rpm_utilization,
                ratio(peak_req as f64, one.rpm),
            ),
            providers,
            cost: cost_of(scenario, out),
        }
    }
}
