//! What one query asks of each provider, and which limit binds.
//!
//! An agent is a model plus tools, often behind different providers: its tool calls go to one
//! API, its model turns to another, some tools to none. Each provider's limits are set against
//! what a query asks of *that* provider: its requests (RPM), the tokens charged (TPM), the
//! prompt tokens (ITPM) and the output tokens (OTPM). Each pair is a query ceiling; the lowest
//! binds. The concurrency is one more: `max_concurrency` slots each hold one request for its
//! service time, so the slots serve at most `max_concurrency / (requests × latency)` queries.
//!
//! Every figure is a mean per query, exact from the scenario's numbers but for two estimates
//! drawn from fixed-seed samples (deterministic): a generating provider's output tokens under
//! a `max_tokens` cap, and E[max of n] over the several latencies of a round of mixed tools.

use capsize_mock::{Latency, ProviderConfig, Tokens};
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use serde::Serialize;

use super::maxima::expected_max_ms;
use crate::engine::routes::{self, Routes};
use crate::engine::scenario::{Arrivals, Count, Scenario, Stop};
use crate::scheduler::CapPolicy;

/// The share of a split limit (ITPM, OTPM) advice plans to use. No client bucket holds the
/// client under it, so bursts over it draw 429s, and retries that give up fail queries: on
/// tests/advice.rs's OTPM-bound workload (Poisson arrivals), 34 of 600 queries failed at 90 %
/// of the OTPM, 10 at 80 %.
pub const UNGATED_SPARE: f64 = 0.8;

/// Draws of the fixed-seed estimates.
const DRAWS: usize = 20_000;

/// One limit of a provider, or the client's concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Requests per minute.
    Rpm,
    /// Tokens per minute.
    Tpm,
    /// Input (prompt) tokens per minute.
    Itpm,
    /// Output tokens per minute.
    Otpm,
    /// The scheduler's `max_concurrency`: requests in flight at once.
    Concurrency,
}

impl LimitKind {
    /// `RPM`, `TPM`, `ITPM`, `OTPM`, `max_concurrency`.
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::Rpm => "RPM",
            LimitKind::Tpm => "TPM",
            LimitKind::Itpm => "ITPM",
            LimitKind::Otpm => "OTPM",
            LimitKind::Concurrency => "max_concurrency",
        }
    }

    /// The scenario key that sets it, under its provider's table (`rpm`), or the scheduler's.
    pub fn key(self) -> &'static str {
        match self {
            LimitKind::Rpm => "rpm",
            LimitKind::Tpm => "tpm",
            LimitKind::Itpm => "itpm",
            LimitKind::Otpm => "otpm",
            LimitKind::Concurrency => "max_concurrency",
        }
    }

    /// What a query asks of it: `requests`, `tokens`, ...
    pub fn unit(self) -> &'static str {
        match self {
            LimitKind::Rpm => "requests",
            LimitKind::Tpm => "tokens",
            LimitKind::Itpm => "input tokens",
            LimitKind::Otpm => "output tokens",
            LimitKind::Concurrency => "slot-seconds",
        }
    }
}

/// What one query asks of one endpoint (a provider, or `none`), on average.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// The provider's name (`provider` in the one-provider form, `none` for local tools).
    pub name: String,
    /// The scenario's provider it is (`None`: the tools sent to none).
    pub provider: Option<usize>,
    /// Requests per query: tool calls and model turns.
    pub requests: f64,
    /// Of them, model turns (and syntheses).
    pub model_turns: f64,
    /// Tokens charged to its TPM (a model turn's prompt and `max_tokens`).
    pub tokens: f64,
    /// Prompt tokens (its ITPM).
    pub input_tokens: f64,
    /// Output tokens it settles at (its OTPM): a generating provider's answers, else each
    /// model turn's `max_tokens`.
    pub output_tokens: f64,
    /// Seconds of service its requests take per query (Σ requests × mean latency).
    pub busy_s: f64,
}

impl Load {
    /// What a query asks of `kind` (0 for the concurrency: see [`Demand::busy_s`]).
    pub fn asked(&self, kind: LimitKind) -> f64 {
        match kind {
            LimitKind::Rpm => self.requests,
            LimitKind::Tpm => self.tokens,
            LimitKind::Itpm => self.input_tokens,
            LimitKind::Otpm => self.output_tokens,
            LimitKind::Concurrency => 0.0,
        }
    }
}

/// One limit against what a query asks of it: the queries per minute it lets through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ceiling {
    /// The provider (empty for the concurrency, the client's own).
    pub provider: String,
    /// Which limit.
    pub kind: LimitKind,
    /// The limit: per minute, or slots.
    pub limit: f64,
    /// Whether the client's bucket holds the provider to limit × headroom (RPM and TPM when
    /// `rate_limit` is on); the split limits are the provider's alone.
    pub gated: bool,
    /// What one query asks of it: requests, tokens, or slot-seconds.
    pub per_query: f64,
    /// Queries per minute at the whole limit.
    pub queries_per_min: f64,
    /// Queries per minute at the client's headroom (the whole limit where it is not gated).
    pub at_headroom: f64,
}

impl Ceiling {
    /// `llm TPM`, `the provider's RPM` (one provider), or `max_concurrency`.
    pub fn name(&self) -> String {
        match self.kind {
            LimitKind::Concurrency => "max_concurrency".to_string(),
            k if self.provider.is_empty() => format!("the provider's {}", k.name()),
            k => format!("{} {}", self.provider, k.name()),
        }
    }

    /// The scenario key that sets it: `providers.llm.tpm`, `provider.rpm`,
    /// `scheduler.max_concurrency`.
    pub fn key(&self, named: bool) -> String {
        match (self.kind, named) {
            (LimitKind::Concurrency, _) => "scheduler.max_concurrency".to_string(),
            (k, true) => format!("providers.{}.{}", self.provider, k.key()),
            (k, false) => format!("provider.{}", k.key()),
        }
    }
}

/// What a query asks of every endpoint, and every ceiling, lowest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    /// One per endpoint a query reaches, in the routes' order (providers, then `none`).
    pub loads: Vec<Load>,
    /// Every limit a query meets, the lowest `at_headroom` first (ties: the providers' order,
    /// RPM before TPM before ITPM before OTPM, the concurrency last).
    pub ceilings: Vec<Ceiling>,
    /// The query ceiling during each phase that changes a provider's limits, in the
    /// providers' and their phases' order.
    pub phases: Vec<PhaseCeiling>,
    /// Whether the scenario names its providers.
    pub named: bool,
    /// A query's least time in ms: its rounds' E\[max\] and its model turns, with no wait.
    pub floor_ms: f64,
    /// One round's E\[max\] in ms: its tool calls in parallel, each at its own latency (0
    /// without tool calls).
    pub round_ms: f64,
}

impl Demand {
    /// The ceiling that binds: the lowest.
    pub fn binding(&self) -> Option<&Ceiling> {
        self.ceilings.first()
    }

    /// The lowest ceiling other than `c`'s limit: what binds once `c` is lifted.
    pub fn next_after(&self, c: &Ceiling) -> Option<&Ceiling> {
        self.ceilings
            .iter()
            .find(|o| !(o.provider == c.provider && o.kind == c.kind))
    }

    /// The queries per minute `s`'s workload asks for at most: an open workload's arrival
    /// rate, or a closed one's sessions each sending a query per mean think time plus the
    /// query's least time ([`Demand::floor_ms`]). `None` if that is not finite.
    pub fn asked_per_min(&self, s: &Scenario) -> Option<f64> {
        let w = &s.workload;
        let q = match w.arrivals {
            Arrivals::Open { rate, .. } => rate * 60.0,
            Arrivals::Closed { sessions } => {
                let think_s = w.think_time.as_ref().map_or(0.0, |t| t.mean() / 1000.0);
                sessions as f64 * 60.0 / (think_s + self.floor_ms / 1000.0)
            }
        };
        (q.is_finite() && q > 0.0).then_some(q)
    }

    /// The change that lifts the binding limit toward `asked` queries per minute, if it binds
    /// below it: the limit raised until it serves `asked` or the next limit binds.
    pub fn advise(&self, asked: f64) -> Option<Advice> {
        let b = self.binding()?;
        if b.at_headroom <= 0.0 || asked <= b.at_headroom {
            return None;
        }
        let next = self
            .next_after(b)
            .filter(|n| n.at_headroom < asked)
            .cloned();
        let promised = next.as_ref().map_or(asked, |n| n.at_headroom);
        let factor = promised / b.at_headroom;
        // No client bucket holds a split limit back: the advice leaves it spare.
        let spare = match b.kind {
            LimitKind::Itpm | LimitKind::Otpm => UNGATED_SPARE,
            _ => 1.0,
        };
        Some(Advice {
            key: b.key(self.named),
            value: (b.limit * factor / spare).ceil(),
            factor,
            binding: b.clone(),
            next,
            promised,
        })
    }

    /// Model seconds `s`'s run lasts, about: a duration-bound run's duration, or a
    /// query-bound run's queries at the rate it can go (what the workload asks, held to the
    /// binding ceiling), plus a query's least time for the last to finish. `None` if no rate
    /// is known.
    pub fn model_seconds(&self, s: &Scenario) -> Option<f64> {
        let tail = self.floor_ms / 1000.0;
        let secs = match s.workload.stop {
            Stop::Duration(d) => d.as_secs_f64() + tail,
            Stop::Queries(n) => {
                let asked = self.asked_per_min(s)?;
                let rate = self.binding().map_or(asked, |b| asked.min(b.at_headroom));
                (rate > 0.0).then(|| n as f64 / rate * 60.0 + tail)?
            }
        };
        secs.is_finite().then_some(secs)
    }

    /// Slot-seconds per query: the service time of all its requests.
    pub fn busy_s(&self) -> f64 {
        self.loads.iter().map(|l| l.busy_s).sum()
    }

    /// What `s` asks of its providers.
    pub fn of(s: &Scenario) -> Demand {
        let routes = Routes::of(s);
        let per_route = per_route(s);
        let mut loads: Vec<Load> = routes
            .endpoints
            .iter()
            .map(|e| Load {
                name: e.name.clone(),
                provider: e.provider,
                requests: 0.0,
                model_turns: 0.0,
                tokens: 0.0,
                input_tokens: 0.0,
                output_tokens: 0.0,
                busy_s: 0.0,
            })
            .collect();
        for (id, ask) in per_route.iter().enumerate() {
            if ask.requests <= 0.0 {
                continue;
            }
            let route = &routes.routes[id];
            let held = (route.max_tokens.unwrap_or(0) as f64).min(ask.tokens);
            let (latency, generated) = service(&routes, id);
            let output = generated.unwrap_or(held);
            let service_ms = latency.mean();
            let load = &mut loads[route.endpoint];
            load.requests += ask.requests;
            load.model_turns += if route.model_turn { ask.requests } else { 0.0 };
            load.tokens += ask.requests * ask.tokens;
            load.input_tokens += ask.requests * (ask.tokens - held);
            load.output_tokens += ask.requests * output;
            load.busy_s += ask.requests * service_ms / 1000.0;
        }
        loads.retain(|l| l.requests > 0.0);
        let mut ceilings = Vec::new();
        for load in &loads {
            let Some(i) = load.provider else { continue };
            ceilings.extend(limit_ceilings(s, load, &s.providers[i].config));
        }
        let busy = loads.iter().map(|l| l.busy_s).sum::<f64>();
        let slots = s.scheduler.max_concurrency as f64;
        if slots > 0.0 && busy > 0.0 {
            let q = slots / busy * 60.0;
            ceilings.push(Ceiling {
                provider: String::new(),
                kind: LimitKind::Concurrency,
                limit: slots,
                gated: false,
                per_query: busy,
                queries_per_min: q,
                at_headroom: q,
            });
        }
        // A stable sort keeps the fixed order among equal ceilings.
        ceilings.sort_by(|a, b| a.at_headroom.total_cmp(&b.at_headroom));
        let phases = phase_ceilings(s, &loads, &ceilings);
        let (floor_ms, round_ms) = floor_ms(s, &routes, &per_route);
        Demand {
            loads,
            ceilings,
            phases,
            named: s.named_providers,
            floor_ms,
            round_ms,
        }
    }
}

/// The ceilings of `cfg`'s limits (a provider's table, or one of its phases') against what a
/// query asks of it (`load`), unsorted: RPM, TPM, ITPM, OTPM.
fn limit_ceilings(s: &Scenario, load: &Load, cfg: &ProviderConfig) -> Vec<Ceiling> {
    let limits = [
        (LimitKind::Rpm, cfg.rpm, true),
        (LimitKind::Tpm, cfg.tpm, true),
        (LimitKind::Itpm, cfg.itpm, false),
        (LimitKind::Otpm, cfg.otpm, false),
    ];
    let h = s.scheduler.headroom;
    let mut out = Vec::new();
    for (kind, limit, bucket) in limits {
        let (Some(limit), asked) = (limit, load.asked(kind)) else {
            continue;
        };
        if asked <= 0.0 || limit <= 0.0 {
            continue;
        }
        let gated = bucket && s.scheduler.rate_limit;
        let q = limit / asked;
        out.push(Ceiling {
            provider: if s.named_providers {
                load.name.clone()
            } else {
                String::new()
            },
            kind,
            limit,
            gated,
            per_query: asked,
            queries_per_min: q,
            at_headroom: if gated { q * h } else { q },
        });
    }
    out
}

/// The query ceiling while a phase of a provider is in force.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseCeiling {
    /// The provider whose phase it is.
    pub provider: String,
    /// When the phase starts and ends (`None`: at the next phase, or never), model seconds.
    pub from_s: f64,
    /// See `from_s`.
    pub to_s: Option<f64>,
    /// The lowest ceiling while it holds, its limits in place of the provider's (`None`: an
    /// outage, through which no query gets).
    pub binding: Option<Ceiling>,
}

/// For each phase that changes a provider's limits (or takes it out), the query ceiling while
/// it holds: the other providers' ceilings and the concurrency's as they are.
fn phase_ceilings(s: &Scenario, loads: &[Load], ceilings: &[Ceiling]) -> Vec<PhaseCeiling> {
    let mut out = Vec::new();
    for load in loads {
        let Some(i) = load.provider else { continue };
        let p = &s.providers[i];
        let own = |c: &Ceiling| {
            c.kind != LimitKind::Concurrency
                && (c.provider == load.name || (!s.named_providers && c.provider.is_empty()))
        };
        for ph in &p.config.phases {
            let limits = |c: &ProviderConfig| (c.rpm, c.tpm, c.itpm, c.otpm);
            if ph.outage.is_none() && limits(&ph.config) == limits(&p.config) {
                continue;
            }
            let binding = match ph.outage {
                Some(_) => None,
                None => ceilings
                    .iter()
                    .filter(|c| !own(c))
                    .cloned()
                    .chain(limit_ceilings(s, load, &ph.config))
                    .min_by(|a, b| a.at_headroom.total_cmp(&b.at_headroom)),
            };
            out.push(PhaseCeiling {
                provider: p.name.clone(),
                from_s: ph.from.as_secs_f64(),
                to_s: ph.to.map(|t| t.as_secs_f64()),
                binding,
            });
        }
    }
    out
}

/// A change that lifts a binding limit, and what it promises.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// The limit that binds.
    pub binding: Ceiling,
    /// The scenario key to change (`providers.llm.tpm`).
    pub key: String,
    /// Its new value: the limit × `factor` (over `UNGATED_SPARE` for a split limit),
    /// rounded up.
    pub value: f64,
    /// How much the limit is raised.
    pub factor: f64,
    /// The limit that binds next, before the workload is served (`None`: it is served).
    pub next: Option<Ceiling>,
    /// The queries per minute the ceiling rises to: the workload's ask, or the next limit's.
    pub promised: f64,
}

/// What a query sends on one route: requests, and tokens each.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Ask {
    requests: f64,
    tokens: f64,
}

/// The mean of `count`, capped at `cap` per draw (a round truncated to `cap` calls).
pub(super) fn capped_count(count: Count, cap: Option<u64>) -> f64 {
    let Some(cap) = cap else {
        return count.mean();
    };
    match count {
        Count::Fixed(n) => n.min(cap) as f64,
        Count::Uniform(lo, hi) if cap >= hi => (lo as f64 + hi as f64) / 2.0,
        Count::Uniform(lo, _) if cap <= lo => cap as f64,
        Count::Uniform(lo, hi) => {
            let (lo, hi, cap) = (lo as f64, hi as f64, cap as f64);
            let below = (lo + cap) * (cap - lo + 1.0) / 2.0;
            (below + (hi - cap) * cap) / (hi - lo + 1.0)
        }
    }
}

/// Tool calls per round: the mean fan-out after a `max_parallel_tools` cap that truncates.
pub(super) fn calls_per_round(s: &Scenario) -> f64 {
    let turn = &s.scheduler.turn;
    let cap = (turn.max_parallel > 0 && turn.over_cap == CapPolicy::Truncate)
        .then_some(turn.max_parallel as u64);
    capped_count(s.workload.calls_per_query, cap)
}

/// What a query sends on each route, indexed by route id.
fn per_route(s: &Scenario) -> Vec<Ask> {
    let w = &s.workload;
    let agents = w.subagents.map_or(1, |a| a.count) as f64;
    let calls = calls_per_round(s) * f64::from(w.rounds) * agents;
    let mut asks = vec![Ask::default(); 2 + w.tools.len()];
    let k = w.tokens_per_call.mean();
    if w.tools.is_empty() {
        asks[usize::from(routes::TOOL)] = Ask {
            requests: calls,
            tokens: k,
        };
    } else {
        let total: f64 = w.tools.iter().map(|t| t.weight).sum();
        for (i, t) in w.tools.iter().enumerate() {
            asks[usize::from(routes::tool_class(i))] = Ask {
                requests: calls * t.weight / total,
                tokens: t.tokens.map_or(k, |c| c.mean()),
            };
        }
    }
    let turns = w
        .model_turn
        .as_ref()
        .map_or(0.0, |t| agents * f64::from(t.turns(w.rounds)));
    let turn_tokens = w.model_turn.as_ref().map_or(0.0, |t| t.tokens as f64);
    let synthesis = w
        .subagents
        .map_or(0.0, |a| a.synthesis_tokens as f64)
        .max(0.0);
    let model = &mut asks[usize::from(routes::MODEL)];
    model.requests = turns + if synthesis > 0.0 { 1.0 } else { 0.0 };
    if model.requests > 0.0 {
        model.tokens = (turns * turn_tokens + synthesis) / model.requests;
    }
    asks
}

/// E[min(X, cap)] of a token distribution, from [`DRAWS`] fixed-seed draws.
fn capped_mean(tokens: &Tokens, cap: u64) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x70_4B);
    let sum: f64 = (0..DRAWS)
        .map(|_| tokens.sample(&mut rng).min(cap) as f64)
        .sum();
    sum / DRAWS as f64
}

/// The service time of route `id`'s requests, and the output tokens a generating provider
/// answers them with (`None`: it does not generate). A generating provider's answer lasts
/// ttft + (n − 1) × tpot at the mean n, capped by the route's `max_tokens` and the provider's
/// `max_output_tokens`.
fn service(routes: &Routes, id: usize) -> (Latency, Option<f64>) {
    let r = &routes.routes[id];
    let e = &routes.endpoints[r.endpoint];
    match e.config.generation.as_ref().filter(|_| r.model_turn) {
        Some(g) => {
            let most = e.config.max_output_tokens.max(1);
            let cap = r.max_tokens.map_or(most, |m| m.clamp(1, most));
            let n = capped_mean(&g.output_tokens, cap);
            let ms = g.ttft.mean() + g.tpot.mean() * (n - 1.0).max(0.0);
            (Latency::Constant(ms), Some(n))
        }
        None => {
            let own = r.service.as_ref().and_then(|n| e.latencies.get(n));
            (own.unwrap_or(&e.config.latency).clone(), None)
        }
    }
}

/// A query's least time: each agent's rounds (E\[max\] of a round's calls) and model turns, with
/// no wait, and the synthesis after the agents (the agents taken as one: a lower bound); and
/// one round's E\[max\].
fn floor_ms(s: &Scenario, routes: &Routes, asks: &[Ask]) -> (f64, f64) {
    let w = &s.workload;
    let latency_of = |id: usize| service(routes, id).0;
    let n = calls_per_round(s);
    let tool_ids: Vec<(usize, f64)> = (0..asks.len())
        .filter(|&id| id != usize::from(routes::MODEL) && asks[id].requests > 0.0)
        .map(|id| (id, asks[id].requests))
        .collect();
    let round_ms = match tool_ids.as_slice() {
        [] => 0.0,
        [(id, _)] => expected_max_ms(&latency_of(*id), n).unwrap_or(0.0),
        mixed => mixed_max_ms(
            &mixed
                .iter()
                .map(|(id, weight)| (latency_of(*id), *weight))
                .collect::<Vec<_>>(),
            n,
        ),
    };
    let model_ms = latency_of(usize::from(routes::MODEL)).mean();
    let turns = w.model_turn.as_ref().map_or(0, |t| t.turns(w.rounds));
    let synthesis = w.subagents.is_some_and(|a| a.synthesis_tokens > 0);
    let floor = f64::from(w.rounds) * round_ms
        + f64::from(turns) * model_ms
        + if synthesis { model_ms } else { 0.0 };
    (floor, round_ms)
}

/// E[max of `n`] calls each drawn from one of `classes` by weight, from fixed-seed draws
/// (`n` rounded to whole calls).
fn mixed_max_ms(classes: &[(Latency, f64)], n: f64) -> f64 {
    use rand::RngExt;
    let calls = n.round().max(1.0) as usize;
    let total: f64 = classes.iter().map(|(_, w)| w).sum();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x3A_11);
    let rounds = DRAWS / calls.max(1) + 1;
    let mut sum = 0.0;
    for _ in 0..rounds {
        let mut most = 0.0_f64;
        for _ in 0..calls {
            let mut u = rng.random::<f64>() * total;
            let class = classes
                .iter()
                .find(|(_, w)| {
                    u -= w;
                    u < 0.0
                })
                .unwrap_or(&classes[classes.len() - 1]);
            most = most.max(class.0.sample(&mut rng));
        }
        sum += most;
    }
    sum / rounds as f64
}
