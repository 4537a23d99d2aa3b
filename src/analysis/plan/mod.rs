//! The closed-form rate-limit arithmetic: ceilings, headroom, Little's law, fan-out latency and
//! TPM exhaustion, computed instantly from a scenario's numbers with no simulation.
//!
//! `capsize plan` prints these rows, and the capacity report sets each one beside the value the
//! simulation measured. Each [`Row`] has a stable `key`, a label, the exact `f64` value (rounded
//! only by [`render`]) and the formula with the numbers filled in. A row whose inputs are missing,
//! or whose value would not be finite (an unlimited provider, a Pareto tail with no mean, …), is
//! left out rather than shown as garbage.

mod demand;
mod maxima;
mod numeric;

use capsize_mock::Latency;
use serde::Serialize;

use crate::engine::scenario::{Arrivals, Scenario};
use crate::fmt::fmt_num;
pub use demand::{Advice, Ceiling, Demand, LimitKind, UNGATED_SPARE};
pub use maxima::expected_max_ms;
use maxima::{expected_max, strict_waves};
pub use named::{multi_step, plan_scenario};

/// Inputs of the arithmetic, all in model units.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    /// Provider requests per minute (`None`: unlimited).
    pub rpm: Option<f64>,
    /// Provider tokens per minute (`None`: unlimited).
    pub tpm: Option<f64>,
    /// Share of the limits the client allows itself, in (0, 1].
    pub headroom: f64,
    /// Mean tool calls a query runs in parallel (one turn's fan-out).
    pub calls_per_query: f64,
    /// Mean tokens per call.
    pub tokens_per_call: f64,
    /// Mean latency of one call in ms (0 or not finite: the rows that need it are left out).
    pub latency_mean_ms: f64,
    /// `Some((min, max))` when the latency is U[min, max]: E[max of n] in closed form.
    pub latency_uniform_ms: Option<(f64, f64)>,
    /// The whole latency distribution, for E[max of n] when it is not uniform.
    pub latency: Option<Latency>,
    /// Calls in flight at once (`None` or 0: unbounded).
    pub max_concurrency: Option<u32>,
    /// An arrival rate of calls per second, for the TPM-exhaustion rows.
    pub burst_calls_per_s: Option<f64>,
    /// Requests and tokens one whole query sends when it is more than one turn of tool calls
    /// (rounds, model turns, subagents, a synthesis); `None`: one turn, `calls_per_query`
    /// requests of `tokens_per_call` each.
    pub per_query: Option<PerQuery>,
}

/// What one whole query asks of the provider.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerQuery {
    /// Requests (tool calls and model turns) per query.
    pub requests: f64,
    /// Tokens per query.
    pub tokens: f64,
}

impl Default for PlanInput {
    /// No limits, headroom 1, no calls, no latency: every field to be set by the caller.
    fn default() -> Self {
        PlanInput {
            rpm: None,
            tpm: None,
            headroom: 1.0,
            calls_per_query: 0.0,
            tokens_per_call: 0.0,
            latency_mean_ms: 0.0,
            latency_uniform_ms: None,
            latency: None,
            max_concurrency: None,
            burst_calls_per_s: None,
            per_query: None,
        }
    }
}

impl PlanInput {
    /// The inputs a validated scenario implies.
    ///
    /// `calls_per_query` is the mean fan-out of one turn (tool calls per round), after a
    /// `max_parallel_tools` cap with `over_cap = "truncate"`: the fan-out rows use it. The
    /// query ceilings use the whole query: every round of every agent, the model turns between
    /// rounds and the synthesis. An open-loop scenario's burst is its offered tool-call rate
    /// (arrival rate × calls per round × rounds × agents); a closed one has none.
    pub fn from_scenario(s: &Scenario) -> PlanInput {
        let w = &s.workload;
        let calls = demand::calls_per_round(s);
        let agents = w.subagents.map_or(1, |a| a.count) as f64;
        let k = w.tokens_per_call.mean();
        let rounds = f64::from(w.rounds);
        let (mut requests, mut tokens) = (calls * rounds * agents, calls * k * rounds * agents);
        if let Some(m) = &w.model_turn {
            let turns = f64::from(m.turns(w.rounds));
            requests += agents * turns;
            tokens += agents * turns * m.tokens as f64;
        }
        if let Some(sub) = w.subagents.filter(|s| s.synthesis_tokens > 0) {
            requests += 1.0;
            tokens += sub.synthesis_tokens as f64;
        }
        let per_query =
            (requests != calls || tokens != calls * k).then_some(PerQuery { requests, tokens });
        let burst = match w.arrivals {
            Arrivals::Open { rate, .. } => Some(rate * calls * f64::from(w.rounds) * agents),
            Arrivals::Closed { .. } => None,
        };
        let latency = &s.provider().latency;
        PlanInput {
            rpm: s.provider().rpm,
            tpm: s.provider().tpm,
            headroom: s.scheduler.headroom,
            calls_per_query: calls,
            tokens_per_call: k,
            latency_mean_ms: latency.mean(),
            latency_uniform_ms: match *latency {
                Latency::Uniform(a, b) => Some((a, b)),
                _ => None,
            },
            latency: Some(latency.clone()),
            max_concurrency: match s.scheduler.max_concurrency {
                0 => None,
                c => Some(u32::try_from(c).unwrap_or(u32::MAX)),
            },
            burst_calls_per_s: burst,
            per_query,
        }
    }
}

/// Which line of the arithmetic a [`Row`] is: what other code looks a row up by, written as
/// its snake_case name (`rps_ceiling`) in `capsize plan --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    /// `rps_ceiling`.
    RpsCeiling,
    /// `tpm_calls_per_min`.
    TpmCallsPerMin,
    /// `tpm_calls_per_s`.
    TpmCallsPerS,
    /// `call_ceiling_per_s`.
    CallCeilingPerS,
    /// `queries_per_s_ceiling`.
    QueriesPerSCeiling,
    /// `queries_per_min_ceiling`.
    QueriesPerMinCeiling,
    /// `headroom_slots_per_min`.
    HeadroomSlotsPerMin,
    /// `spare_rpm`.
    SpareRpm,
    /// `queries_per_min_at_headroom`.
    QueriesPerMinAtHeadroom,
    /// `littles_law_concurrency_at_ceiling`.
    LittlesLawConcurrencyAtCeiling,
    /// `littles_law_concurrency_at_headroom`.
    LittlesLawConcurrencyAtHeadroom,
    /// `littles_law_throughput`.
    LittlesLawThroughput,
    /// `littles_law_share_of_ceiling`.
    LittlesLawShareOfCeiling,
    /// `fanout_expected_max_ms`.
    FanoutExpectedMaxMs,
    /// `strict_waves_ms`.
    StrictWavesMs,
    /// `sequential_ms`.
    SequentialMs,
    /// `tpm_exhaustion_s`.
    TpmExhaustionS,
    /// `tpm_blocked_s`.
    TpmBlockedS,
    /// `requests_per_query`: what a query asks of one provider.
    RequestsPerQuery,
    /// `tokens_per_query`: the tokens a query charges one provider.
    TokensPerQuery,
    /// `limit_queries_per_min`: the queries one limit of one provider lets through.
    LimitQueriesPerMin,
    /// `limit_queries_per_min_at_headroom`: the same at the client's headroom.
    LimitQueriesPerMinAtHeadroom,
    /// `query_floor_ms`: a query's least time, with no wait.
    QueryFloorMs,
    /// `requests_in_flight_at_ceiling`: Little's law at the query ceiling.
    RequestsInFlightAtCeiling,
    /// `phase_queries_per_min`: the query ceiling while a provider's phase holds.
    PhaseQueriesPerMin,
}

impl Key {
    /// The name `capsize plan --json` writes.
    pub fn name(self) -> &'static str {
        match self {
            Key::RpsCeiling => "rps_ceiling",
            Key::TpmCallsPerMin => "tpm_calls_per_min",
            Key::TpmCallsPerS => "tpm_calls_per_s",
            Key::CallCeilingPerS => "call_ceiling_per_s",
            Key::QueriesPerSCeiling => "queries_per_s_ceiling",
            Key::QueriesPerMinCeiling => "queries_per_min_ceiling",
            Key::HeadroomSlotsPerMin => "headroom_slots_per_min",
            Key::SpareRpm => "spare_rpm",
            Key::QueriesPerMinAtHeadroom => "queries_per_min_at_headroom",
            Key::LittlesLawConcurrencyAtCeiling => "littles_law_concurrency_at_ceiling",
            Key::LittlesLawConcurrencyAtHeadroom => "littles_law_concurrency_at_headroom",
            Key::LittlesLawThroughput => "littles_law_throughput",
            Key::LittlesLawShareOfCeiling => "littles_law_share_of_ceiling",
            Key::FanoutExpectedMaxMs => "fanout_expected_max_ms",
            Key::StrictWavesMs => "strict_waves_ms",
            Key::SequentialMs => "sequential_ms",
            Key::TpmExhaustionS => "tpm_exhaustion_s",
            Key::TpmBlockedS => "tpm_blocked_s",
            Key::RequestsPerQuery => "requests_per_query",
            Key::TokensPerQuery => "tokens_per_query",
            Key::LimitQueriesPerMin => "limit_queries_per_min",
            Key::LimitQueriesPerMinAtHeadroom => "limit_queries_per_min_at_headroom",
            Key::QueryFloorMs => "query_floor_ms",
            Key::RequestsInFlightAtCeiling => "requests_in_flight_at_ceiling",
            Key::PhaseQueriesPerMin => "phase_queries_per_min",
        }
    }
}

/// One line of the arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Which line it is.
    pub key: Key,
    /// What the value is, for people.
    pub label: String,
    /// The exact value (rounded only when rendered).
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// How it is computed, with the numbers filled in.
    pub formula: String,
    /// The provider it is about, in a scenario that names its providers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The limit it is about, where it is one limit's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitKind>,
}

/// Pushes a row if its value is finite. Reads as a table line:
/// `row!(rows; key => value, unit; label format args; formula format args)`.
macro_rules! row {
    ($rows:ident; $key:ident => $value:expr, $unit:literal; $($label:expr),+; $($formula:expr),+) => {{
        let value: f64 = $value;
        if value.is_finite() {
            $rows.push(Row {
                key: Key::$key,
                label: format!($($label),+),
                value,
                unit: $unit,
                formula: format!($($formula),+),
                provider: None,
                limit: None,
            });
        }
    }};
}

// After `row!`, which it uses.
mod named;

/// `v` if it is finite and positive.
fn positive(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite() && *x > 0.0)
}

/// Every row that the inputs allow, in a fixed order: one section after another.
pub fn plan(input: &PlanInput) -> Vec<Row> {
    let given = Given::of(input);
    let per_query = per_query(input, given.n);
    let mut rows = Vec::new();
    let ceiling = ceilings(&given, &mut rows);
    query_ceilings(input, &given, ceiling, per_query, &mut rows);
    headroom(&given, per_query, &mut rows);
    littles_law(&given, ceiling, &mut rows);
    fanout_latency(input, &given, &mut rows);
    tpm_exhaustion(&given, &mut rows);
    rows
}

/// The inputs the rows may use, each `None` where it is missing, out of range or not finite.
struct Given {
    rpm: Option<f64>,
    /// The RPM per second.
    rps: Option<f64>,
    tpm: Option<f64>,
    /// Tokens per call.
    tokens: Option<f64>,
    /// Calls per query (one turn's fan-out).
    n: Option<f64>,
    /// In (0, 1].
    headroom: Option<f64>,
    /// Mean latency, ms.
    w_ms: Option<f64>,
    /// Calls in flight at once.
    conc: Option<f64>,
    /// Calls per second of a burst.
    burst: Option<f64>,
}

impl Given {
    fn of(input: &PlanInput) -> Given {
        let rpm = positive(input.rpm);
        Given {
            rpm,
            rps: rpm.map(|r| r / 60.0),
            tpm: positive(input.tpm),
            tokens: positive(Some(input.tokens_per_call)),
            n: positive(Some(input.calls_per_query)),
            headroom: Some(input.headroom).filter(|h| *h > 0.0 && *h <= 1.0),
            w_ms: positive(Some(input.latency_mean_ms)),
            conc: input.max_concurrency.filter(|c| *c > 0).map(f64::from),
            burst: positive(input.burst_calls_per_s),
        }
    }
}

/// What one query asks of the provider: the whole query's requests and tokens when the input
/// gives them, else one turn's `n` calls.
fn per_query(input: &PlanInput, n: Option<f64>) -> Option<PerQuery> {
    match (input.per_query, n) {
        (Some(q), _) => Some(q),
        (None, Some(n)) => Some(PerQuery {
            requests: n,
            tokens: n * input.tokens_per_call,
        }),
        (None, None) => None,
    }
}

/// Ceilings: what the provider serves at most, in calls per second. Returns the call ceiling.
fn ceilings(g: &Given, rows: &mut Vec<Row>) -> Option<f64> {
    let f = fmt_num;
    if let Some(r) = g.rpm {
        row!(rows; RpsCeiling => r / 60.0, "requests/s"; "Request ceiling (RPM)"; "{} / 60", f(r));
    }
    let tpm_per_s = g.tpm.zip(g.tokens).map(|(t, k)| t / k / 60.0);
    if let (Some(t), Some(k)) = (g.tpm, g.tokens) {
        row!(rows; TpmCallsPerMin => t / k, "calls/min";
            "Calls the TPM allows at {} tokens each", f(k); "{} / {}", f(t), f(k));
        row!(rows; TpmCallsPerS => t / k / 60.0, "calls/s";
            "Calls the TPM allows at {} tokens each, per second", f(k); "{} / 60", f(t / k));
    }
    let ceiling = match (g.rps, tpm_per_s) {
        (Some(r), Some(t)) if r <= t => Some((r, "RPM", format!("min({}, {})", f(r), f(t)))),
        (Some(r), Some(t)) => Some((t, "TPM", format!("min({}, {})", f(r), f(t)))),
        (Some(r), None) => Some((r, "RPM", format!("{} (RPM only)", f(r)))),
        (None, Some(t)) => Some((t, "TPM", format!("{} (TPM only)", f(t)))),
        (None, None) => None,
    };
    if let Some((c, binds, formula)) = &ceiling {
        row!(rows; CallCeilingPerS => *c, "calls/s"; "Call ceiling ({} binds)", binds; "{}", formula);
    }
    ceiling.map(|(c, _, _)| c)
}

/// Queries: the call `ceiling` over one turn's calls, or over the whole query's requests and
/// tokens, per second and per minute.
fn query_ceilings(
    input: &PlanInput,
    g: &Given,
    ceiling: Option<f64>,
    per_query: Option<PerQuery>,
    rows: &mut Vec<Row>,
) {
    let f = fmt_num;
    let what = |q: &PerQuery| match input.per_query {
        Some(_) => format!("{} requests/query", f(q.requests)),
        None => format!("{} calls/query", f(q.requests)),
    };
    let (Some(c), Some(q)) = (ceiling, per_query.filter(|q| q.requests > 0.0)) else {
        return;
    };
    let (qps, formula) = match (g.rps, g.tpm.filter(|_| q.tokens > 0.0)) {
        (_, _) if input.per_query.is_none() => {
            (c / q.requests, format!("{} / {}", f(c), f(q.requests)))
        }
        (Some(r), Some(t)) => {
            let (by_r, by_t) = (r / q.requests, t / 60.0 / q.tokens);
            (
                by_r.min(by_t),
                format!(
                    "min({} / {}, {} / 60 / {})",
                    f(r),
                    f(q.requests),
                    f(t),
                    f(q.tokens)
                ),
            )
        }
        (Some(r), None) => (r / q.requests, format!("{} / {}", f(r), f(q.requests))),
        (None, Some(t)) => (
            t / 60.0 / q.tokens,
            format!("{} / 60 / {}", f(t), f(q.tokens)),
        ),
        (None, None) => (c / q.requests, format!("{} / {}", f(c), f(q.requests))),
    };
    row!(rows; QueriesPerSCeiling => qps, "queries/s";
        "Query ceiling at {}", what(&q); "{}", formula);
    row!(rows; QueriesPerMinCeiling => qps * 60.0, "queries/min";
        "Query ceiling at {}, per minute", what(&q); "{} × 60", f(qps));
}

/// Headroom: the share of the RPM the client allows itself, what is left over, and the
/// queries per minute it admits.
fn headroom(g: &Given, per_query: Option<PerQuery>, rows: &mut Vec<Row>) {
    let f = fmt_num;
    let (Some(r), Some(h)) = (g.rpm, g.headroom) else {
        return;
    };
    let (pct, slots) = (f(h * 100.0), h * r);
    row!(rows; HeadroomSlotsPerMin => slots, "requests/min";
        "Request slots at {} % headroom", pct; "{} × {}", f(h), f(r));
    row!(rows; SpareRpm => r - slots, "requests/min";
        "Spare RPM (retries, other traffic)"; "{} − {}", f(r), f(slots));
    let Some(q) = per_query.filter(|q| q.requests > 0.0) else {
        return;
    };
    // The TPM at the same headroom may bind first; the row shows what binds.
    let by_rpm = slots / q.requests;
    match g
        .tpm
        .filter(|_| q.tokens > 0.0)
        .map(|t| (t, h * t / q.tokens))
    {
        Some((t, by_tpm)) if by_tpm < by_rpm => {
            row!(rows; QueriesPerMinAtHeadroom => by_tpm, "queries/min";
                "Queries at {} % headroom (TPM binds)", pct;
                "{} × {} / {}", f(h), f(t), f(q.tokens));
        }
        _ => {
            row!(rows; QueriesPerMinAtHeadroom => by_rpm, "queries/min";
                "Queries at {} % headroom", pct; "{} / {}", f(slots), f(q.requests));
        }
    }
}

/// Little's law, L = λ·W: concurrency and throughput at the mean latency W.
fn littles_law(g: &Given, ceiling: Option<f64>, rows: &mut Vec<Row>) {
    let f = fmt_num;
    let Some(w) = g.w_ms.map(|ms| ms / 1000.0) else {
        return;
    };
    if let Some(c) = ceiling {
        row!(rows; LittlesLawConcurrencyAtCeiling => c * w, "calls";
            "Calls in flight that saturate the ceiling (L = λ·W)"; "{} × {}", f(c), f(w));
        if let Some(h) = g.headroom.filter(|h| *h < 1.0) {
            row!(rows; LittlesLawConcurrencyAtHeadroom => h * c * w, "calls";
                "Calls in flight at {} % headroom (L = λ·W)", f(h * 100.0);
                "{} × {} × {}", f(h), f(c), f(w));
        }
    }
    if let Some(k) = g.conc {
        row!(rows; LittlesLawThroughput => k / w, "calls/s";
            "Throughput of {} calls in flight (λ = L/W)", f(k); "{} / {}", f(k), f(w));
        if let Some(c) = ceiling {
            row!(rows; LittlesLawShareOfCeiling => 100.0 * k / w / c, "%";
                "{} calls in flight, share of the ceiling", f(k); "{} / {}", f(k / w), f(c));
        }
    }
}

/// Fan-out latency: n calls in parallel, in strict waves of the concurrency, or in sequence.
fn fanout_latency(input: &PlanInput, g: &Given, rows: &mut Vec<Row>) {
    let f = fmt_num;
    let dist = match (input.latency_uniform_ms, &input.latency) {
        (Some((a, b)), _) => Some(Latency::Uniform(a, b)),
        (None, Some(l)) => Some(l.clone()),
        (None, None) => None,
    };
    if let (Some(n), Some(d)) = (g.n, &dist) {
        if let Some((v, formula)) = expected_max(d, n) {
            row!(rows; FanoutExpectedMaxMs => v, "ms";
                "{} calls in parallel: E[max of {}]", f(n), f(n); "{}", formula);
        }
        if let Some(c) = g.conc.filter(|c| *c < n) {
            if let Some((v, formula)) = strict_waves(d, n, c) {
                row!(rows; StrictWavesMs => v, "ms";
                    "{} calls in strict waves of {}", f(n), f(c); "{}", formula);
            }
        }
    }
    if let (Some(n), Some(w_ms)) = (g.n, g.w_ms) {
        row!(rows; SequentialMs => n * w_ms, "ms";
            "{} calls one after another", f(n); "{} × {}", f(n), f(w_ms));
    }
}

/// TPM exhaustion: a burst faster than the TPM spends the minute's budget early.
fn tpm_exhaustion(g: &Given, rows: &mut Vec<Row>) {
    let f = fmt_num;
    let (Some(t), Some(b), Some(k)) = (g.tpm, g.burst, g.tokens) else {
        return;
    };
    let secs = t / (b * k);
    row!(rows; TpmExhaustionS => secs, "s";
        "A {} calls/s burst spends the minute's TPM in", f(b); "{} / ({} × {})", f(t), f(b), f(k));
    if secs < 60.0 {
        row!(rows; TpmBlockedS => 60.0 - secs, "s";
            "… then every call is refused (429) for"; "60 − {}", f(secs));
    }
}

/// A readable table of the rows: label, value with unit, formula, in fixed-width columns.
pub fn render(rows: &[Row]) -> String {
    let width = |s: &str| s.chars().count();
    let values: Vec<String> = rows.iter().map(|r| fmt_num(r.value)).collect();
    let label_w = rows.iter().map(|r| width(&r.label)).max().unwrap_or(0);
    let value_w = values.iter().map(|v| width(v)).max().unwrap_or(0);
    let unit_w = rows.iter().map(|r| width(r.unit)).max().unwrap_or(0);
    let mut out = String::new();
    for (row, value) in rows.iter().zip(&values) {
        let line = format!(
            "{:<label_w$}  {:>value_w$} {:<unit_w$}  {}",
            row.label, value, row.unit, row.formula
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
