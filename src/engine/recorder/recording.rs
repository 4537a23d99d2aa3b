//! What a run recorded, as the recorder hands it over: [`Recording`] and the figures it holds
//! (histograms in model time, counters, what the answers billed), serialisable so a replica's
//! record can be merged into a fleet's.

use capsize_mock::Bill;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::series::Series;
use super::wire;
use crate::engine::provider::transport::TransportErrors;

/// What an orchestrator had left for its synthesis turn, over the queries that reached it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Syntheses {
    /// Synthesis turns attempted (the subagents done, the query not abandoned).
    pub attempted: u64,
    /// Of those, refused by the query's budget.
    pub refused: u64,
    /// Sum of the tokens left in the query's budget when each synthesis started.
    pub left_sum: u64,
    /// The fewest tokens left when a synthesis started (`u64::MAX` before the first).
    pub left_min: u64,
}

/// Tokens and picodollars: what a query's used answers were billed, in all (`u128`, as
/// [`Bill`]'s sums are).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    /// Tokens billed.
    pub tokens: u128,
    /// Their price, in picodollars.
    pub picodollars: u128,
}

impl Spent {
    /// Both added.
    pub fn plus(self, o: Spent) -> Spent {
        Spent {
            tokens: self.tokens.saturating_add(o.tokens),
            picodollars: self.picodollars.saturating_add(o.picodollars),
        }
    }
}

/// Counts of what happened to calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCounts {
    /// Calls submitted to the scheduler (not counting "not run").
    pub calls: u64,
    /// Calls that succeeded.
    pub completed: u64,
    /// Calls that failed for good.
    pub failed: u64,
    /// Calls stopped by a cancel, deadline or budget.
    pub cancelled: u64,
    /// Calls answered "not run" (over the per-turn cap).
    pub not_run: u64,
    /// Attempts sent.
    pub attempts: u64,
    /// Attempts that timed out at the client.
    pub timed_out: u64,
    /// 429s the client saw.
    pub rate_limited: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Calls stopped because the budget they drew on was spent.
    pub budget_exhausted: u64,
}

/// Everything recorded, in model time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recording {
    /// Latency of queries whose calls all succeeded, from the query's intended start (µs).
    #[serde(with = "wire")]
    pub query: Histogram<u64>,
    /// Call latency of successful calls, from submission (µs).
    #[serde(with = "wire")]
    pub call: Histogram<u64>,
    /// Per successful call: waiting for a permit (µs).
    #[serde(with = "wire")]
    pub queue: Histogram<u64>,
    /// Per successful call: waiting for the rate limiter (µs).
    #[serde(with = "wire")]
    pub limiter: Histogram<u64>,
    /// Per successful call: backing off before retries (µs).
    #[serde(with = "wire")]
    pub backoff: Histogram<u64>,
    /// Per successful call: sent and waiting for answers (µs).
    #[serde(with = "wire")]
    pub service: Histogram<u64>,
    /// Per charged request: time queued at the provider for a free server (µs).
    #[serde(with = "wire")]
    pub provider_queue: Histogram<u64>,
    /// Per attempt of a client with its own time (`[scheduler.client]`): that time, waiting
    /// for one of its threads and working, before the attempt left and after its answer came
    /// (µs; part of service). `None` for a client that costs nothing.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "wire::option"
    )]
    pub client: Option<Histogram<u64>>,
    /// Per query: how late it started after its intended start (µs; zero in virtual time).
    #[serde(with = "wire")]
    pub start_lateness: Histogram<u64>,
    /// Call counters.
    pub calls: CallCounts,
    /// Queries that finished (all calls answered, whatever the answers).
    pub queries_completed: u64,
    /// Queries with at least one failed or cancelled call.
    pub queries_failed: u64,
    /// Queries abandoned by their caller (parent timeout or user stop).
    pub queries_abandoned: u64,
    /// Requests the provider charged whose answer was thrown away.
    pub orphaned_requests: u64,
    /// Orchestrators' synthesis turns and the budget left for them.
    pub syntheses: Syntheses,
    /// Provider arrivals over time.
    pub series: Series,
    /// Requests the provider charged.
    pub charged_requests: u64,
    /// The most requests charged in any 60 s window (whole seconds).
    pub peak_requests_60s: u64,
    /// The most tokens charged in any 60 s window (whole seconds).
    pub peak_tokens_60s: u64,
    /// The same three counts per endpoint, when a run has more than one (empty otherwise:
    /// the run's own are its one endpoint's).
    pub endpoints: Vec<EndpointLoad>,
    /// Each endpoint's arrivals over time, when a run has more than one (empty otherwise:
    /// `series` is its one endpoint's). No call bins: those are the run's.
    pub endpoint_series: Vec<Series>,
    /// Each answered model turn's time, from its submission to its answer (µs; a turn of no
    /// time counts as 1 µs), when the run was asked to keep them (`Recorder::with_model_turns`).
    #[serde(with = "wire::option")]
    pub model_turns: Option<Histogram<u64>>,
    /// Model calls a generating provider answered (`None`: there were none).
    pub generation: Option<Generation>,
    /// Model µs from the start up to which `series` holds adaptive limits (`None`: the run
    /// had none): the last bin holding them may be only partly covered.
    pub limits_until_us: Option<u64>,
    /// What the answers the queries used were billed, per endpoint (a priced provider's; all
    /// empty otherwise). An answer is used when its call received it and its query had not
    /// been abandoned.
    #[serde(default)]
    pub used: Vec<Bill>,
    /// Of those, what queries that failed or were abandoned used: paid for, and wasted.
    #[serde(default)]
    pub used_by_failed: Spent,
    /// Attempts whose connection failed, by why (real time only).
    #[serde(default)]
    pub transport_errors: TransportErrors,
}

/// What the answers of a generating provider's model calls took, in model time (µs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Generation {
    /// Answers received.
    pub calls: u64,
    /// Output tokens they carried.
    pub output_tokens: u64,
    /// From sending to the last token, per answer.
    #[serde(with = "wire")]
    pub end_to_end: Histogram<u64>,
    /// From sending to the first token, per answer whose first token was seen (in real time
    /// only a streamed answer shows it).
    #[serde(with = "wire")]
    pub first_token: Histogram<u64>,
    /// Per answer of at least two tokens whose first was seen: the time between tokens after
    /// the first, (end to end - first token) / (output tokens - 1).
    #[serde(with = "wire")]
    pub per_token: Histogram<u64>,
}

/// What one endpoint (a provider of several) was charged, and its busiest minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointLoad {
    /// Requests it charged.
    pub charged_requests: u64,
    /// The most requests it charged in any 60 s window (whole seconds).
    pub peak_requests_60s: u64,
    /// The most tokens it charged in any 60 s window (whole seconds).
    pub peak_tokens_60s: u64,
}
