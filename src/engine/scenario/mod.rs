//! Scenario files: read the TOML, apply `--set` overrides, and validate into a [`Scenario`].
//!
//! Two phases, as in ripgrep: the raw form ([`raw`]) is what serde reads, unknown keys refused;
//! [`Scenario`] is the resolved, checked configuration the simulator is built from. Every error
//! is one line naming the file, the key, and line:column where known.

pub mod bounds;
pub mod check;
pub mod client;
mod concurrency;
pub mod fleet;
pub mod identity;
mod locate;
mod overrides;
pub mod providers;
pub mod raw;
mod retry;
pub mod sanity;
pub mod sweep_slo;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capsize_mock::{Latency, ProviderConfig};
use rand::{Rng, RngExt};
use thiserror::Error;

use crate::engine::summary::slo::{Threshold, Tolerance};
use crate::scheduler::{Adaptive, RetryPolicy, TurnPolicy};
pub use client::ClientModel;
pub use fleet::{Fleet, FleetLimiter};
pub use identity::Identity;
use locate::{key_of, line_col, locate, table_at};
use overrides::Refused;
pub use overrides::{key_within, parse_override, set_key, toml_value};
use raw::RawScenario;
pub use sweep_slo::{Axis, AxisValue};
pub use validate::name as check_name;

/// A scenario that cannot be used: one line naming the file, where, the key, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ScenarioError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column, where known.
    pub at: Option<(usize, usize)>,
    /// The dotted key at fault, where known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.at {
            write!(f, ":{line}:{col}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// An integer that is fixed or drawn per use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Always this.
    Fixed(u64),
    /// Uniform over `min..=max`.
    Uniform(u64, u64),
}

impl Count {
    /// Draws one value.
    pub fn sample(&self, rng: &mut (impl Rng + ?Sized)) -> u64 {
        match *self {
            Count::Fixed(n) => n,
            Count::Uniform(lo, hi) => rng.random_range(lo..=hi),
        }
    }

    /// The mean.
    pub fn mean(&self) -> f64 {
        match *self {
            Count::Fixed(n) => n as f64,
            Count::Uniform(lo, hi) => (lo + hi) as f64 / 2.0,
        }
    }
}

/// How queries arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// `sessions` users, each sending its next query when the last is done (after think time).
    Closed {
        /// Concurrent sessions.
        sessions: u64,
    },
    /// Queries arrive at `rate` per second, whatever happens to earlier ones.
    Open {
        /// Queries per second.
        rate: f64,
        /// Exponential gaps (true) or even ones.
        poisson: bool,
    },
}

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this many queries have started (and then finished).
    Queries(u64),
    /// No query starts after this much model time.
    Duration(Duration),
}

/// Where a query's model turns go among its rounds of tool calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnPlacement {
    /// Between each two rounds: `rounds - 1` turns (a turn that reads the tools' answers and
    /// asks for the next round).
    #[default]
    Between,
    /// Before each round and once after the last: `rounds + 1` turns, the loop an agent is
    /// built as (the model asks for tools, reads their answers, and finally answers).
    Around,
    /// Before each round and not after the last: `rounds` turns (the model asks for tools,
    /// and the query ends with their answers: a workflow step that only acts).
    Before,
}

/// A model turn among rounds of tool calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTurn {
    /// Tokens of the LLM call: its prompt, and `max_tokens` on top (what the provider and the
    /// client's buckets are charged).
    pub tokens: u64,
    /// The most output tokens it asks for (`None`: no cap).
    pub max_tokens: Option<u64>,
    /// Whether its answer is streamed.
    pub stream: bool,
    /// Its latency; `None`: the provider's.
    pub latency: Option<Latency>,
    /// Where the turns go among the rounds.
    pub at: TurnPlacement,
}

impl ModelTurn {
    /// The model turns one agent takes over `rounds` rounds.
    pub fn turns(&self, rounds: u32) -> u32 {
        match self.at {
            TurnPlacement::Between => rounds.saturating_sub(1),
            TurnPlacement::Around => rounds + 1,
            TurnPlacement::Before => rounds,
        }
    }

    /// Whether a turn goes before round `round` (0-based).
    pub fn before(&self, round: usize) -> bool {
        round > 0 || self.at != TurnPlacement::Between
    }
}

/// One provider of a scenario: its name and its model.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedProvider {
    /// `[providers.NAME]`'s name (`"provider"` in the one-provider form).
    pub name: String,
    /// The validated table.
    pub config: ProviderConfig,
}

/// Where a kind of call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// To the scenario's provider of this index.
    Provider(usize),
    /// To nothing rate-limited (`provider = "none"`): a local tool, served at its own latency.
    Unlimited,
}

/// One kind of tool call (`workload.tools`), drawn by weight.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolClass {
    /// Its name.
    pub name: String,
    /// Its relative weight.
    pub weight: f64,
    /// Where it goes.
    pub target: Target,
    /// Its latency instead of the provider's.
    pub latency: Option<Latency>,
    /// Its error rate instead of the provider's.
    pub error_rate: Option<f64>,
    /// Its tokens per call instead of `tokens_per_call`.
    pub tokens: Option<Count>,
}

/// The validated `[workload]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Stop condition.
    pub stop: Stop,
    /// Tool calls per round.
    pub calls_per_query: Count,
    /// Tokens per tool call.
    pub tokens_per_call: Count,
    /// Where tool calls go when `tools` is empty (and the default of each tool).
    pub tool_target: Target,
    /// The kinds of tool call, drawn by weight; empty: one kind, sent to `tool_target`.
    pub tools: Vec<ToolClass>,
    /// Where model turns (and an orchestrator's synthesis) go.
    pub model_target: Target,
    /// Rounds of tool calls per query.
    pub rounds: u32,
    /// The model turn between rounds.
    pub model_turn: Option<ModelTurn>,
    /// Think time between a session's queries.
    pub think_time: Option<Latency>,
    /// Share of tool calls that write.
    pub write_fraction: f64,
    /// The caller abandons a query after this long.
    pub parent_timeout: Option<Duration>,
    /// The user stops everything at this time.
    pub stop_at: Option<Duration>,
    /// Each closed-loop session runs at most this many queries (`queries_per_session`: the
    /// stop is then every session's share, so each runs exactly this many).
    pub per_session: Option<u64>,
    /// Orchestrator and budgeted subagents, if the query fans out to them.
    pub subagents: Option<Subagents>,
}

/// The validated `[workload.subagents]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subagents {
    /// Subagents per query.
    pub count: u64,
    /// Each one's token budget.
    pub budget_tokens: u64,
    /// The query's token budget.
    pub orchestrator_budget: u64,
    /// Iteration cap per subagent.
    pub max_iterations: Option<u32>,
    /// Tokens of the synthesis turn (0: none).
    pub synthesis_tokens: u64,
}

/// The validated `[scheduler]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerSettings {
    /// Calls in flight at once (0 unbounded); an adaptive limit's highest.
    pub max_concurrency: usize,
    /// An adaptive limit on calls in flight, instead of a fixed `max_concurrency`.
    pub adaptive: Option<Adaptive>,
    /// Share of the provider's limits the client-side buckets allow.
    pub headroom: f64,
    /// Whether the client-side RPM/TPM buckets are on.
    pub rate_limit: bool,
    /// Bucket capacity in seconds of refill.
    pub burst_s: f64,
    /// Retry policy (durations in model time).
    pub retry: RetryPolicy,
    /// The client model the retry policy starts from: `scheduler.retry.preset`'s name, or
    /// `capsize` (the default), whatever keys beside it override.
    pub retry_preset: &'static str,
    /// The client's timeout per attempt.
    pub timeout: Duration,
    /// Cap on tool calls per turn.
    pub turn: TurnPolicy,
    /// Cancelled work is dropped (true) or left running (false).
    pub transport_cancel: bool,
    /// The client's own time per attempt (`None`: it costs nothing).
    pub client: Option<ClientModel>,
}

impl SchedulerSettings {
    /// The capacity of a client bucket that refills `per_minute` × headroom: `burst_s` of its
    /// refill, at least one unit (a call must fit).
    pub fn bucket_capacity(&self, per_minute: f64) -> f64 {
        (per_minute * self.headroom / 60.0 * self.burst_s).max(1.0)
    }
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name (the default output folder is `capsize-out/<name>/`).
    pub name: String,
    /// What it shows.
    pub description: Option<String>,
    /// Seed of every random stream.
    pub seed: u64,
    /// The providers, in name order (one, named `provider`, in the one-provider form).
    pub providers: Vec<NamedProvider>,
    /// Whether the scenario names its providers (`[providers.NAME]`): summary.json then
    /// reports each one.
    pub named_providers: bool,
    /// The traffic.
    pub workload: Workload,
    /// The scheduler.
    pub scheduler: SchedulerSettings,
    /// Replicas of the client on one key (one unless `[fleet]` says otherwise).
    pub fleet: Fleet,
    /// What `capsize sweep` varies (empty: nothing).
    pub sweep: Vec<Axis>,
    /// Which passing point the sweep recommends (`None`: the smallest value of the first key).
    pub prefer: Option<sweep_slo::Prefer>,
    /// Objectives on summary.json fields.
    pub slo: Vec<Threshold>,
    /// Per-metric tolerances for baseline comparisons.
    pub slo_tolerance: Vec<(String, Tolerance)>,
    /// How `capsize check` compares a run with a baseline (`[check]`).
    pub check: check::CheckSettings,
}

impl Scenario {
    /// The names summary.json reports providers by (`providers.NAME`): each of
    /// `[providers.NAME]`, and `none` if some tool goes to none. Empty in the one-provider
    /// form, whose `provider` is the one.
    pub fn provider_names(&self) -> Vec<String> {
        if !self.named_providers {
            return Vec::new();
        }
        crate::engine::routes::Routes::of(self)
            .endpoints
            .into_iter()
            .map(|e| e.name)
            .collect()
    }

    /// Whether a provider has a `price` (its own or a phase's): its runs have a cost.
    pub fn priced(&self) -> bool {
        self.providers.iter().any(|p| p.config.priced())
    }

    /// The provider the closed-form arithmetic is about: where tool calls go (where model
    /// turns go, when tool calls go to no provider).
    pub fn provider(&self) -> &ProviderConfig {
        let w = &self.workload;
        let first_tool = w.tools.first().map(|t| t.target);
        let i = [Some(w.tool_target), first_tool, Some(w.model_target)]
            .into_iter()
            .flatten()
            .find_map(|t| match t {
                Target::Provider(i) => Some(i),
                Target::Unlimited => None,
            })
            .unwrap_or(0);
        &self.providers[i.min(self.providers.len() - 1)].config
    }
}

/// A scenario file's text (an error names the file). Only a regular file of at most
/// [`bounds::MAX_SCENARIO_BYTES`] is read: `/dev/zero` is refused, not read without end.
pub fn read(path: &Path) -> Result<String, ScenarioError> {
    let fail = |message: String| ScenarioError {
        file: path.to_path_buf(),
        at: None,
        key: None,
        message,
    };
    let bytes = capsize_files::read_regular_file(path, bounds::MAX_SCENARIO_BYTES)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|_| fail("cannot read: not UTF-8 text".into()))
}

/// Reads and validates a scenario file, with `sets` (`key.path=value`) applied first.
pub fn load(path: &Path, sets: &[String]) -> Result<Scenario, ScenarioError> {
    parse(&read(path)?, path, sets)
}

/// Reads a scenario for `capsize exec`, which serves its providers and never runs its
/// workload: the workload keys only a run needs (`calls_per_query`, `tokens_per_call`, and a
/// stop, `queries`) get placeholders where the file leaves them out, `[workload]` itself too,
/// so `[provider]` (and `[slo]`) is a whole scenario for it. Then as [`load`].
pub fn load_for_exec(path: &Path, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let text = read(path)?;
    let mut all: Vec<String> = Vec::new();
    // A file that is not TOML is refused by `parse`, with its position.
    if let Ok(table) = text.parse::<toml::Table>() {
        let workload = table.get("workload").and_then(toml::Value::as_table);
        let has = |k: &str| workload.is_some_and(|w| w.contains_key(k));
        if !has("calls_per_query") {
            all.push("workload.calls_per_query=1".into());
        }
        if !has("tokens_per_call") {
            all.push("workload.tokens_per_call=0".into());
        }
        if !["queries", "duration_s", "queries_per_session"]
            .iter()
            .any(|k| has(k))
        {
            all.push("workload.queries=1".into());
        }
    }
    all.extend(sets.iter().cloned());
    parse(&text, path, &all)
}

/// Validates scenario `text` as if read from `path` (named in errors; relative files are read
/// from its folder), with `sets` applied first.
pub fn parse(text: &str, path: &Path, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let fail = |at, key: Option<String>, message: String| ScenarioError {
        file: path.to_path_buf(),
        at,
        key,
        message,
    };
    let de_error = |e: toml::de::Error| {
        let mut message = e.message().trim().replace('\n', " ");
        if message.starts_with("invalid type") && message.ends_with("expected struct RawProvider") {
            // A key written straight under [providers]: the table has no provider's name.
            message = "is not a provider: each provider is a table of its own, [providers.NAME] (a key under [providers] needs a provider's name)".into();
        }
        let span = e.span();
        if message.starts_with("missing field") {
            // A missing key has no place in the file; the parser points into the table that
            // lacks it: name the table and its header's line.
            // (An inline table is named by its key, as before.)
            if let Some(key) = span.clone().and_then(|s| key_of(text, s)) {
                return fail(None, Some(key), message);
            }
            let table = span.and_then(|s| table_at(text, s.start));
            let at = table.as_ref().map(|(line, _)| (*line, 1));
            return fail(at, table.map(|(_, name)| name), message);
        }
        let key = span.clone().and_then(|s| key_of(text, s));
        let at = span.map(|s| line_col(text, s.start));
        fail(at, key, message)
    };
    // A key the file leaves out may come from a --set.
    let (raw, set_keys) = match toml::from_str::<RawScenario>(text) {
        Ok(r) if sets.is_empty() => (r, Vec::new()),
        Err(e) if sets.is_empty() || !overrides::is_missing(e.message()) => {
            return Err(de_error(e))
        }
        file => {
            let file = file.err();
            let table: toml::Table = toml::from_str(text).map_err(de_error)?;
            overrides::apply(table, sets, file.is_some()).map_err(|r| match (r, file) {
                // Missing from the file and from every --set: the key still missing, at the
                // table the file leaves it out of.
                (Refused::StillMissing(now), Some(e)) => ScenarioError {
                    message: now,
                    ..de_error(e)
                },
                (Refused::StillMissing(message), None) => fail(None, None, message),
                (Refused::Set(key, message), _) => fail(None, key, message),
            })?
        }
    };
    let base = path.parent().unwrap_or(Path::new("."));
    validate::validate(raw, base).map_err(|bounds::Invalid { key, message }| {
        // A value a --set gave (the key, or a table holding it) is named by its argument.
        let from_set = set_keys.iter().rev().find(|(k, _)| key_within(&key, k));
        if let Some((_, set)) = from_set {
            fail(None, Some(key), format!("{message} (from --set {set})"))
        } else {
            fail(locate(text, &key), Some(key), message)
        }
    })
}
