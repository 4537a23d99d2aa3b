//! From what was gathered to what a scenario says: each quantity fitted, the query's shape
//! chosen by majority, the arrival process (open, or closed by session) measured.

use std::collections::BTreeMap;

use crate::engine::observed::{FileRead, Tally};

use super::collect::{Collector, Shape};
use super::fit::{self, Fit, Kind};
use super::fold::{tools, MAX_OTHERS};
use super::sample::{Quantiles, Sample};
use super::seen::ModelSeen;

/// One quantity: what was observed and the distribution fitted to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The observed values' summary.
    pub observed: Quantiles,
    /// Whether every value was kept (else the quantiles are a uniform sample's of 20,000).
    pub exact: bool,
    /// The fit.
    pub fit: Fit,
    /// The observed values' quantiles at (k + ½)/[`CURVE`], k = 0, 1, ...: their CDF, to draw.
    pub curve: Vec<f64>,
}

/// How many points of an observed CDF are kept to draw.
pub const CURVE: usize = 100;

impl Fitted {
    pub(super) fn of(s: &Sample, kind: Kind) -> Option<Fitted> {
        let sorted = s.sorted();
        let curve = if sorted.is_empty() {
            Vec::new()
        } else {
            (0..CURVE)
                .map(|k| fit::quantile_sorted(&sorted, (k as f64 + 0.5) / CURVE as f64))
                .collect()
        };
        // One sort of the kept values serves the quantiles, the fit and the curve.
        Some(Fitted {
            observed: s.quantiles_of(&sorted)?,
            exact: s.exact(),
            fit: fit::fit(&sorted, kind),
            curve,
        })
    }
}

/// The provider whose model the queries call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderFit {
    /// Its name in the scenario.
    pub name: String,
    /// As the spans named it (`""`: not said).
    pub said: String,
    /// The model.
    pub model: String,
    /// Calls (or attempts) seen.
    pub calls: u64,
    /// Answered.
    pub answered: u64,
    /// Answered 429.
    pub rate_limited: u64,
    /// Timed out.
    pub timeouts: u64,
    /// Failed otherwise.
    pub errors: u64,
    /// Answered after retries (time not fitted).
    pub retried: u64,
    /// Answered attempts' time, ms.
    pub latency: Option<Fitted>,
    /// Time to first chunk, ms (streamed answers).
    pub ttft: Option<Fitted>,
    /// Time per output token after the first, ms.
    pub tpot: Option<Fitted>,
    /// Output tokens.
    pub output: Option<Fitted>,
    /// Input tokens.
    pub input: Option<Fitted>,
    /// The `max_tokens` asked for most often.
    pub max_tokens: Option<u64>,
    /// Answered calls without token counts.
    pub untokened: u64,
    /// The requests- and tokens-per-minute limits the provider's headers gave, where recorded.
    pub limits: (Option<f64>, Option<f64>),
}

/// A model the scenario does not call: its queries' turns go to one model.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherModel {
    /// The provider, as said.
    pub provider: String,
    /// The model.
    pub model: String,
    /// Its calls.
    pub calls: u64,
}

/// One tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFit {
    /// Its name.
    pub name: String,
    /// The provider that served it, if a provider saw it.
    pub provider: Option<String>,
    /// Calls.
    pub calls: u64,
    /// Failed.
    pub errors: u64,
    /// Its time, ms.
    pub latency: Option<Fitted>,
    /// Where this entry is the tools past [`MAX_TOOLS`] folded into one: what it holds.
    pub folded: Option<super::fold::Folded>,
}

/// Tool calls per round.
#[derive(Debug, Clone, PartialEq)]
pub struct CountFit {
    /// Fewest.
    pub min: u64,
    /// Most.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// KS distance of a uniform draw over `min..=max` to what was seen (0 when fixed).
    pub distance: f64,
}

/// The queries' structure.
#[derive(Debug, Clone, PartialEq)]
pub struct Structure {
    /// The shape most queries have.
    pub shape: Shape,
    /// Queries by shape.
    pub shapes: BTreeMap<Shape, u64>,
    /// Rounds per query, the most common count (1 without rounds).
    pub rounds: u32,
    /// Rounds per query, by count.
    pub rounds_seen: BTreeMap<u32, u64>,
    /// Tool calls per round (`None`: no rounds).
    pub per_round: Option<CountFit>,
    /// Tool calls per round, by count.
    pub per_round_seen: BTreeMap<u64, u64>,
    /// Rounds of two or more calls, and the share of them run one call after another.
    pub sequential: Option<(u64, f64)>,
    /// The agent's own time per query (not inside any call), ms.
    pub own: Option<Quantiles>,
    /// Model calls made inside a tool.
    pub nested: u64,
}

/// How queries arrived.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// Whatever happened to earlier ones, at this rate.
    Open {
        /// Queries per second.
        rate_per_s: f64,
        /// The gaps' coefficient of variation (1 for Poisson arrivals).
        cv: f64,
        /// KS distance of the gaps to an exponential of their mean.
        poisson_distance: f64,
        /// The largest distance that still fits ([`fit::accept`]).
        accept: f64,
    },
    /// Users (sessions), each asking again after its last answer and a think time.
    Closed {
        /// Sessions seen.
        seen: u64,
        /// How many were alive at once (between their first query's start and their last one's
        /// end), on average over the middle half of the input.
        active: f64,
        /// Queries per session, on average.
        per_session: f64,
        /// Think time, ms.
        think: Option<Fitted>,
    },
}

/// Everything calibrated.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// What each input gave.
    pub reads: Vec<FileRead>,
    /// Skipped or read by assumption, every input's and the assembly's.
    pub skipped: Tally,
    /// The model provider the queries' turns go to (`None`: no model calls).
    pub provider: Option<ProviderFit>,
    /// Models not in the scenario.
    pub others: Vec<OtherModel>,
    /// The tools.
    pub tools: Vec<ToolFit>,
    /// The queries' structure.
    pub structure: Structure,
    /// How they arrived (`None`: fewer than two queries started).
    pub arrival: Option<Arrival>,
    /// Queries seen.
    pub queries: u64,
    /// Query time, ms (queries with a boundary).
    pub query_latency: Option<Quantiles>,
    /// Model calls' time as the client saw them (retries and waits included), ms: from traces.
    pub model_calls: Option<Quantiles>,
    /// From the first query's start to the last one's, s.
    pub window_s: f64,
    /// HTTP attempts under calls, and how many were answered 429.
    pub http: (u64, u64),
    /// The client's own time, where it was fitted ([`super::client::fit`]: after the
    /// scenario is written, by replaying it).
    pub client: Option<super::client::ClientFit>,
}

/// Fits everything `c` gathered.
pub fn calibrate(c: Collector, reads: Vec<FileRead>) -> Calibration {
    let mut skipped = Tally::default();
    for r in &reads {
        skipped.merge(r.skipped.clone());
    }
    skipped.merge(c.skipped.clone());
    let (provider, others) = provider(&c.calls.models, c.calls.models_beyond);
    let tools = tools(&c.calls.tools, c.calls.tools_beyond.as_ref(), &mut skipped);
    let q = &c.queries;
    let mut starts = q.starts.clone();
    starts.sort_unstable();
    let window_s = match (starts.first(), starts.last()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => 0.0,
    };
    Calibration {
        reads,
        skipped,
        provider,
        others,
        tools,
        structure: structure(&c),
        arrival: arrival(&c, &starts),
        queries: q.count,
        query_latency: q.latency.quantiles(),
        model_calls: c.client_calls.quantiles(),
        window_s,
        http: c.http,
        client: None,
    }
}

/// The provider (and model) with the most calls, and the rest (with `beyond`, the calls to
/// models past the names told apart): [`MAX_OTHERS`] of them, then the others as one.
fn provider(models: &[ModelSeen], beyond: u64) -> (Option<ProviderFit>, Vec<OtherModel>) {
    let mut order: Vec<&ModelSeen> = models.iter().collect();
    order.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)))
    });
    let Some((main, rest)) = order.split_first() else {
        return (None, Vec::new());
    };
    let listed = rest.len().min(MAX_OTHERS);
    let mut others: Vec<OtherModel> = rest[..listed]
        .iter()
        .map(|m| OtherModel {
            provider: m.provider.clone(),
            model: m.model.clone(),
            calls: m.calls,
        })
        .collect();
    let unlisted = &rest[listed..];
    if !unlisted.is_empty() || beyond > 0 {
        let more = if beyond > 0 { " and more" } else { "" };
        others.push(OtherModel {
            provider: String::new(),
            model: format!("({} other models{more})", unlisted.len()),
            calls: unlisted.iter().map(|m| m.calls).sum::<u64>() + beyond,
        });
    }
    let fit = ProviderFit {
        name: scenario_name(&main.provider),
        said: main.provider.clone(),
        model: main.model.clone(),
        calls: main.calls,
        answered: main.answered,
        rate_limited: main.rate_limited,
        timeouts: main.timeouts,
        errors: main.errors,
        retried: main.retried,
        latency: Fitted::of(&main.latency, Kind::Duration),
        ttft: Fitted::of(&main.ttft, Kind::Duration),
        tpot: Fitted::of(&main.tpot, Kind::Duration),
        output: Fitted::of(&main.output, Kind::Tokens),
        input: Fitted::of(&main.input, Kind::Tokens),
        max_tokens: main
            .max_tokens
            .iter()
            .max_by_key(|(v, n)| (**n, std::cmp::Reverse(**v)))
            .map(|(v, _)| *v),
        untokened: main.untokened,
        limits: main.limits,
    };
    (Some(fit), others)
}

/// A provider's name as a scenario may write it: letters, digits, `_` and `-` (`llm` when the
/// spans do not say).
pub fn scenario_name(said: &str) -> String {
    let name: String = said
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name == "none" {
        "llm".into()
    } else {
        name
    }
}

fn structure(c: &Collector) -> Structure {
    let q = &c.queries;
    let shape = q
        .shapes
        .iter()
        .max_by_key(|(s, n)| (**n, std::cmp::Reverse(**s)))
        .map(|(s, _)| *s)
        .unwrap_or(Shape::Single);
    let rounds = q
        .rounds
        .iter()
        .max_by_key(|(r, n)| (**n, std::cmp::Reverse(**r)))
        .map(|(r, _)| *r)
        .unwrap_or(1)
        .max(1);
    let per_round = count_fit(&q.per_round);
    let sequential = (q.multi_rounds.0 > 0).then(|| {
        (
            q.multi_rounds.0,
            q.multi_rounds.1 as f64 / q.multi_rounds.0 as f64,
        )
    });
    Structure {
        shape,
        shapes: q.shapes.clone(),
        rounds,
        rounds_seen: q.rounds.clone(),
        per_round,
        per_round_seen: q.per_round.clone(),
        sequential,
        own: q.own.quantiles(),
        nested: q.nested,
    }
}

/// A uniform count over the values seen, and how far it is from them.
fn count_fit(seen: &BTreeMap<u64, u64>) -> Option<CountFit> {
    let (min, max) = (*seen.keys().next()?, *seen.keys().next_back()?);
    let n: u64 = seen.values().sum();
    let mean = seen.iter().map(|(v, c)| (*v * *c) as f64).sum::<f64>() / n as f64;
    let width = (max - min + 1) as f64;
    let mut cum = 0u64;
    let mut distance: f64 = 0.0;
    for (v, c) in seen {
        let before = cum as f64 / n as f64;
        cum += c;
        let model_before = (*v - min) as f64 / width;
        let model_at = (*v - min + 1) as f64 / width;
        distance = distance
            .max((cum as f64 / n as f64 - model_at).abs())
            .max((before - model_before).abs());
    }
    Some(CountFit {
        min,
        max,
        mean,
        distance,
    })
}

fn arrival(c: &Collector, starts: &[i64]) -> Option<Arrival> {
    let q = &c.queries;
    if starts.len() < 2 {
        return None;
    }
    let in_sessions = q.count - q.sessionless;
    let repeat = q.sessions.values().any(|s| s.queries >= 2);
    if in_sessions * 10 >= q.count * 9 && repeat {
        let first = q.sessions.values().map(|s| s.first).min()?;
        let last = q.sessions.values().map(|s| s.last_end).max()?;
        // Sessions alive (from their first query's start to their last one's end), on average
        // over the middle half of the input: its edges, where users are still arriving or
        // already done, would count too few.
        let (from, to) = (first + (last - first) / 4, last - (last - first) / 4);
        let lived: f64 = q
            .sessions
            .values()
            .map(|s| (s.last_end.min(to) - s.first.max(from)).max(0) as f64)
            .sum();
        let seen = q.sessions.len() as u64;
        return Some(Arrival::Closed {
            seen,
            active: if to > from {
                lived / (to - from) as f64
            } else {
                1.0
            },
            per_session: in_sessions as f64 / seen as f64,
            think: Fitted::of(&c.think, Kind::Duration),
        });
    }
    let mut gaps: Vec<f64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
    Some(Arrival::Open {
        rate_per_s: 1e3 / mean,
        cv: sd / mean,
        poisson_distance: fit::distance(&gaps, &fit::Family::Exponential(mean)),
        accept: fit::accept(gaps.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_seen_evenly_over_its_range_is_a_uniform_count() {
        let even: BTreeMap<u64, u64> = (1..=4).map(|v| (v, 25)).collect();
        let f = count_fit(&even).unwrap();
        assert_eq!((f.min, f.max, f.mean), (1, 4, 2.5));
        assert!(f.distance < 1e-12);
        let skewed: BTreeMap<u64, u64> = [(1, 90), (4, 10)].into_iter().collect();
        // A uniform draw puts 25 % at 1; 90 % were seen there.
        assert!((count_fit(&skewed).unwrap().distance - 0.65).abs() < 1e-12);
    }

    #[test]
    fn a_provider_name_is_made_fit_for_a_scenario() {
        assert_eq!(scenario_name("openai"), "openai");
        assert_eq!(scenario_name("azure.ai.openai"), "azure_ai_openai");
        assert_eq!(scenario_name(""), "llm");
    }
}
