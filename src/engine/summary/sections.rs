//! The sections of summary.json that only some runs have: a fleet's replicas, an adaptive
//! limit, a generating provider's answers, the orchestrators' synthesis turns.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{rate, round3, Percentiles};
use crate::engine::recorder::{Generation, Syntheses};
use crate::engine::scenario::Scenario;
use crate::scheduler::{Adaptive, LimitStats};

/// A fleet's replicas: how many, how they kept the limit, and the spread of their throughput.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetSummary {
    /// Replicas of the client.
    pub replicas: u64,
    /// `local`, `split` or `shared`.
    pub limiter: String,
    /// The fewest queries one replica finished.
    pub queries_min: u64,
    /// The most queries one replica finished.
    pub queries_max: u64,
    /// The slowest replica's queries per second (over the run's model seconds).
    pub queries_per_s_min: f64,
    /// The fastest replica's queries per second.
    pub queries_per_s_max: f64,
}

impl FleetSummary {
    pub(super) fn of(scenario: &Scenario, per_replica: &[u64], secs: f64) -> Option<Self> {
        if scenario.fleet.replicas < 2 {
            return None;
        }
        let min = per_replica.iter().copied().min().unwrap_or(0);
        let max = per_replica.iter().copied().max().unwrap_or(0);
        Some(FleetSummary {
            replicas: per_replica.len() as u64,
            limiter: scenario.fleet.limiter.name().into(),
            queries_min: min,
            queries_max: max,
            queries_per_s_min: rate(min, secs),
            queries_per_s_max: rate(max, secs),
        })
    }
}

/// An adaptive concurrency limit over the run, per replica: its mean over time (the
/// replicas' average), the lowest and highest any replica's reached, and the cuts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitSummary {
    /// `aimd` or `gradient`.
    pub policy: String,
    /// Its average over the run's time.
    pub mean: f64,
    /// The lowest it reached.
    pub min: u64,
    /// The highest it reached.
    pub max: u64,
    /// Times it was cut (every replica's).
    pub cuts: u64,
}

impl LimitSummary {
    pub(super) fn of(scenario: &Scenario, limits: &[LimitStats]) -> Option<Self> {
        let policy = match scenario.scheduler.adaptive? {
            Adaptive::Aimd(_) => "aimd",
            Adaptive::Gradient(_) => "gradient",
        };
        let n = limits.len().max(1) as f64;
        Some(LimitSummary {
            policy: policy.into(),
            mean: round3(limits.iter().map(|l| l.mean).sum::<f64>() / n),
            min: limits.iter().map(|l| l.min as u64).min().unwrap_or(0),
            max: limits.iter().map(|l| l.max as u64).max().unwrap_or(0),
            cuts: limits.iter().map(|l| l.decreases).sum(),
        })
    }
}

/// The answers of a generating provider's model calls (`output_tokens`, `ttft`, `tpot`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationSummary {
    /// Answers received.
    pub calls: u64,
    /// Output tokens they carried.
    pub output_tokens: u64,
    /// Output tokens per second, over the whole run.
    pub output_tokens_per_s: f64,
    /// Per answer, from sending the request to its last token.
    pub end_to_end_ms: Percentiles,
    /// Per answer, from sending the request to its first token. Absent when no first token
    /// was seen (a real-time run whose answers were not streamed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Percentiles>,
    /// Per answer of two tokens or more: the time between tokens after the first. Absent
    /// with `ttft_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Percentiles>,
}

impl GenerationSummary {
    pub(super) fn of(g: &Generation, span_s: f64) -> Self {
        let seen = |h: &Histogram<u64>| (!h.is_empty()).then(|| Percentiles::of(h));
        GenerationSummary {
            calls: g.calls,
            output_tokens: g.output_tokens,
            output_tokens_per_s: if span_s > 0.0 {
                round3(g.output_tokens as f64 / span_s)
            } else {
                0.0
            },
            end_to_end_ms: Percentiles::of(&g.end_to_end),
            ttft_ms: seen(&g.first_token),
            tpot_ms: seen(&g.per_token),
        }
    }
}

/// What the orchestrators had left for their synthesis turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SynthesisSummary {
    /// Synthesis turns attempted.
    pub attempted: u64,
    /// Of those, refused because the query's budget had too little left.
    pub refused: u64,
    /// Mean tokens left in the query's budget when a synthesis started.
    pub left_tokens_mean: f64,
    /// The fewest tokens left when a synthesis started.
    pub left_tokens_min: u64,
}

impl SynthesisSummary {
    pub(super) fn of(s: &Syntheses) -> Option<Self> {
        (s.attempted > 0).then(|| SynthesisSummary {
            attempted: s.attempted,
            refused: s.refused,
            left_tokens_mean: round3(s.left_sum as f64 / s.attempted as f64),
            left_tokens_min: s.left_min,
        })
    }
}
