//! The workload: what each query asks for (rounds of tool calls, their tokens, read or write),
//! when queries arrive, and how long users think between them. Drawn from seeded RNG streams,
//! one per concern, so a scenario and seed always produce the same traffic.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp1};

use crate::engine::routes;
use crate::engine::scenario::bounds::{clamped_millis, clamped_secs};
use crate::engine::scenario::{Arrivals, Workload};
use crate::scheduler::dispatch::{Access, ToolCall};

/// The seed of RNG stream `stream` of a run seeded with `seed` (SplitMix64 of the pair).
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// RNG streams of a run.
pub mod streams {
    /// The provider model.
    pub const PROVIDER: u64 = 1;
    /// Query shapes.
    pub const QUERIES: u64 = 2;
    /// Retry jitter.
    pub const JITTER: u64 = 3;
    /// Arrival gaps and think times.
    pub const ARRIVALS: u64 = 4;
    /// The client's own time (`[scheduler.client]`): replica `i`'s is drawn from this
    /// stream's `i`-th.
    pub const CLIENT: u64 = 5;
    /// The model of a scenario's provider `k > 0` (the first is [`PROVIDER`]'s) is
    /// `PROVIDERS + k`.
    pub const PROVIDERS: u64 = 16;
}

/// One tool call of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedCall {
    /// Tokens it costs.
    pub tokens: u64,
    /// Read or write.
    pub access: Access,
    /// Where it goes (a route of [`crate::engine::routes`]).
    pub route: u16,
}

impl ToolCall for PlannedCall {
    fn access(&self) -> Access {
        self.access
    }
}

/// One agent's work: rounds of tool calls (a model turn runs between rounds).
pub type AgentPlan = Vec<Vec<PlannedCall>>;

/// One query: a single agent's rounds, or one plan per subagent when the query fans out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryPlan {
    /// One entry per agent (one, unless the workload has subagents).
    pub agents: Vec<AgentPlan>,
}

/// Draws query shapes, arrival gaps and think times.
#[derive(Debug, Clone)]
pub struct Planner {
    workload: Workload,
    /// The tool classes' cumulative weights (empty without tool classes).
    weights: Vec<f64>,
    queries: Xoshiro256PlusPlus,
    arrivals: Xoshiro256PlusPlus,
}

impl Planner {
    /// A planner for `workload`, its streams derived from `seed`.
    pub fn new(workload: &Workload, seed: u64) -> Self {
        let weights = workload
            .tools
            .iter()
            .scan(0.0, |sum, t| {
                *sum += t.weight;
                Some(*sum)
            })
            .collect();
        Planner {
            workload: workload.clone(),
            weights,
            queries: Xoshiro256PlusPlus::seed_from_u64(stream_seed(seed, streams::QUERIES)),
            arrivals: Xoshiro256PlusPlus::seed_from_u64(stream_seed(seed, streams::ARRIVALS)),
        }
    }

    /// The next query's shape, written over `plan` (its vectors are reused, so a driver that
    /// keeps one plan per session allocates nothing per query).
    pub fn fill(&mut self, plan: &mut QueryPlan) {
        let agents = self.workload.subagents.map_or(1, |s| s.count) as usize;
        // Checked first: a reused plan is already the right shape, and a resize that changes
        // nothing is a function call.
        if plan.agents.len() != agents {
            plan.agents.resize_with(agents, Vec::new);
        }
        for agent in &mut plan.agents {
            self.fill_agent(agent);
        }
    }

    fn fill_agent(&mut self, rounds: &mut AgentPlan) {
        let w = &self.workload;
        let rng = &mut self.queries;
        let weights = &self.weights;
        if rounds.len() != w.rounds as usize {
            rounds.resize_with(w.rounds as usize, Vec::new);
        }
        for calls in rounds {
            calls.clear();
            let n = w.calls_per_query.sample(rng);
            // A loop of pushes: a reused vector has the room, and extending from an iterator
            // costs more than the call or two most rounds have.
            for _ in 0..n {
                // A workload with tool classes draws one first (by weight), then its tokens.
                let (route, tokens) = match weights.last() {
                    None => (routes::TOOL, &w.tokens_per_call),
                    Some(total) => {
                        let u = rng.random::<f64>() * total;
                        let i = weights.partition_point(|&c| c <= u);
                        let i = i.min(w.tools.len() - 1);
                        let tokens = w.tools[i].tokens.as_ref().unwrap_or(&w.tokens_per_call);
                        (routes::tool_class(i), tokens)
                    }
                };
                let tokens = tokens.sample(rng);
                let write = w.write_fraction > 0.0 && rng.random::<f64>() < w.write_fraction;
                let access = if write { Access::Write } else { Access::Read };
                calls.push(PlannedCall {
                    tokens,
                    access,
                    route,
                });
            }
        }
    }

    /// Model time from one open-mode arrival to the next (`None` in closed mode).
    pub fn gap(&mut self) -> Option<Duration> {
        match self.workload.arrivals {
            Arrivals::Closed { .. } => None,
            Arrivals::Open { rate, poisson } => {
                let mean = 1.0 / rate;
                let e: f64 = if poisson {
                    Exp1.sample(&mut self.arrivals)
                } else {
                    1.0
                };
                Some(clamped_secs(mean * e))
            }
        }
    }

    /// A user's think time before their next query (zero if none is set).
    pub fn think(&mut self) -> Duration {
        match &self.workload.think_time {
            Some(l) => clamped_millis(l.sample(&mut self.arrivals)),
            None => Duration::ZERO,
        }
    }
}
