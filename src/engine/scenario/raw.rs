//! A scenario file as written: serde structs that refuse unknown keys. The key names are a
//! contract that scripts and CI pipelines rely on: add keys freely, rename none.

use std::collections::BTreeMap;

use capsize_mock::{RawLatency, RawProvider};
use serde::Deserialize;

use super::TurnPlacement;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    /// Names the run and its default output folder (`capsize-out/<name>/`).
    pub name: String,
    /// What the scenario shows, for people reading reports.
    #[serde(default)]
    pub description: Option<String>,
    /// Seeds every random stream of the run.
    #[serde(default)]
    pub seed: u64,
    /// The provider (the one-provider form)...
    #[serde(default)]
    pub provider: Option<RawProvider>,
    /// ... or several, by name: `[providers.NAME]`, each a `[provider]` table.
    #[serde(default)]
    pub providers: Option<BTreeMap<String, RawProvider>>,
    /// The traffic.
    pub workload: RawWorkload,
    /// The client-side scheduler.
    #[serde(default)]
    pub scheduler: RawScheduler,
    /// Replicas of the client on one key.
    #[serde(default)]
    pub fleet: Option<super::fleet::RawFleet>,
    /// What `capsize sweep` varies: dotted key path → values.
    #[serde(default)]
    pub sweep: Option<toml::Table>,
    /// Objectives: summary.json field → comparison (and `[slo.tolerance]`).
    #[serde(default)]
    pub slo: Option<toml::Table>,
    /// How `capsize check` compares a run with a baseline (`[check] metrics = [...]`).
    #[serde(default)]
    pub check: Option<super::check::RawCheck>,
}

/// An integer that is fixed or drawn: `8` or `{ dist = "uniform_int", min = 1, max = 30 }`.
pub type RawCount = capsize_mock::FixedOr<RawCountDist>;

/// A drawn integer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum RawCountDist {
    /// Uniform over `min..=max`.
    UniformInt {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
}

/// How queries arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawMode {
    /// `sessions` users, each sending its next query when the last one is done (after think time).
    #[default]
    Closed,
    /// Queries arrive at `arrival_rate` per second whatever happens to earlier ones.
    Open,
}

/// Arrival process of the open mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawArrival {
    /// Exponential gaps.
    #[default]
    Poisson,
    /// Evenly spaced.
    Constant,
}

/// A model turn: an LLM call with its own latency and tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModelTurn {
    /// Tokens of the call (its prompt, when `max_tokens` is given).
    pub tokens: u64,
    /// The most output tokens it asks for: charged on top of `tokens` and capping the answer
    /// of a generating provider.
    pub max_tokens: Option<u64>,
    /// Whether it asks for its answer streamed (then the client sees its first token).
    #[serde(default)]
    pub stream: bool,
    /// Its latency (absent: the provider's).
    pub latency: Option<RawLatency>,
    /// The provider it goes to (absent: `workload.provider`'s).
    pub provider: Option<String>,
    /// Where the turns go: `"between"` rounds (the default: `rounds - 1` turns),
    /// `"around"` them (before each round and a final answer: `rounds + 1`), or `"before"`
    /// each round with no answer after the last (`rounds`).
    #[serde(default)]
    pub at: TurnPlacement,
}

/// One kind of tool call in `workload.tools`: drawn by weight for each call of a round.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTool {
    /// Its name (in reports and on the wire: `POST /tools/NAME`).
    pub name: String,
    /// Its relative weight among the tools (default 1).
    pub weight: Option<f64>,
    /// The provider it goes to, or `"none"` (no rate limit); absent: `workload.provider`.
    pub provider: Option<String>,
    /// Its latency (absent: the provider's; required with `provider = "none"`).
    pub latency: Option<RawLatency>,
    /// Its share of failing calls (absent: the provider's `error_rate`).
    pub error_rate: Option<f64>,
    /// Its tokens per call (absent: `workload.tokens_per_call`).
    pub tokens: Option<RawCount>,
}

/// `[workload]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    /// Closed or open.
    #[serde(default)]
    pub mode: RawMode,
    /// Concurrent sessions (closed mode).
    pub sessions: Option<u64>,
    /// Queries per second (open mode).
    pub arrival_rate: Option<f64>,
    /// Arrival process (open mode).
    #[serde(default)]
    pub arrival: RawArrival,
    /// Stop after this many queries...
    pub queries: Option<u64>,
    /// ... or after this many seconds of model time ...
    pub duration_s: Option<f64>,
    /// ... or, in closed mode, after each session has run exactly this many.
    pub queries_per_session: Option<u64>,
    /// Tool calls per round.
    pub calls_per_query: RawCount,
    /// Tokens per tool call.
    pub tokens_per_call: RawCount,
    /// Where tool calls go: a provider's name, or `"none"` (absent: the only provider).
    pub provider: Option<String>,
    /// The kinds of tool call, drawn by weight (absent: one kind, the provider's).
    pub tools: Option<Vec<RawTool>>,
    /// Rounds of tool calls per query, with a model turn between rounds.
    #[serde(default = "one")]
    pub rounds: u32,
    /// The model turn between rounds (absent: none).
    pub model_turn: Option<RawModelTurn>,
    /// Think time between a session's queries (closed mode).
    pub think_time: Option<RawLatency>,
    /// Share of tool calls that write (run one at a time, in order).
    #[serde(default)]
    pub write_fraction: f64,
    /// A query that takes longer than this is abandoned by its caller.
    pub parent_timeout_ms: Option<f64>,
    /// The user presses stop at this time (seconds): every query in flight is cancelled.
    pub stop_at_s: Option<f64>,
    /// Each query is an orchestrator fanning out to budgeted subagents.
    pub subagents: Option<RawSubagents>,
}

/// `[workload.subagents]`: each query fans out to `count` subagents; each runs `rounds` turns
/// (a model turn between rounds of tool calls) on a token budget drawn from the query's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSubagents {
    /// Subagents per query, run in parallel.
    pub count: u64,
    /// Each subagent's token budget (clamped to what the orchestrator has left).
    pub budget_tokens: u64,
    /// The whole query's token budget.
    pub orchestrator_budget: u64,
    /// Iteration cap per subagent (absent: none).
    pub max_iterations: Option<u32>,
    /// Tokens of the orchestrator's synthesis turn after the subagents return (0: none).
    #[serde(default)]
    pub synthesis_tokens: u64,
}

fn one() -> u32 {
    1
}

/// `retry = { ... }` in `[scheduler]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    /// A client's rules to start from: `capsize`, `openai-python` or `anthropic-python`.
    pub preset: Option<String>,
    /// Retries after the first attempt.
    pub max_retries: Option<u32>,
    /// Backoff base.
    pub base_ms: Option<f64>,
    /// Backoff cap.
    pub cap_ms: Option<f64>,
    /// `full`, `equal`, `none` or `reduce`.
    pub jitter: Option<String>,
    /// Take the Retry-After into account.
    pub honor_retry_after: Option<bool>,
    /// `at_least` (a minimum wait) or `instead` (of the backoff).
    pub retry_after: Option<String>,
    /// Longer Retry-Afters are cut to this.
    pub retry_after_cap_ms: Option<f64>,
    /// Longer Retry-Afters are not retried.
    pub retry_after_max_ms: Option<f64>,
    /// A Retry-After pauses the whole limiter.
    pub pause_limiter: Option<bool>,
    /// Retries go through the client limiter (or around it).
    pub retries_through_limiter: Option<bool>,
    /// Retries join the client limiter's line at the front.
    pub retries_jump_queue: Option<bool>,
    /// Statuses retried besides 429.
    pub retry_on: Option<Vec<u16>>,
    /// Whether timeouts are retried.
    pub retry_timeouts: Option<bool>,
    /// A Retry-After is read in whole seconds, rounded up.
    pub retry_after_whole_seconds: Option<bool>,
}

/// `[scheduler]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScheduler {
    /// Calls in flight at once (0 unbounded), or an adaptive limit's table (see
    /// `concurrency.rs`).
    pub max_concurrency: Option<super::concurrency::RawConcurrency>,
    /// Share of the provider's limits to use.
    pub headroom: Option<f64>,
    /// Client-side RPM/TPM buckets at the provider's limits × headroom.
    pub rate_limit: Option<bool>,
    /// Bucket capacity, in seconds of refill (default 1).
    pub burst_s: Option<f64>,
    /// The retry policy.
    pub retry: Option<RawRetry>,
    /// The client's timeout per attempt.
    pub timeout_ms: Option<f64>,
    /// Most tool calls run in one turn; 0 no cap.
    pub max_parallel_tools: Option<u64>,
    /// Beyond the cap: `truncate` or `batch`.
    pub over_cap: Option<String>,
    /// Cancelled work is dropped (true) or left running (false).
    pub transport_cancel: Option<bool>,
    /// The client's own time per attempt (absent: none).
    pub client: Option<super::client::RawClient>,
}
