//! What was seen of each model (of each provider) and each tool: calls, outcomes, times and
//! tokens. Names are found through an index, not a search, and at most [`MAX_NAMES`] of each
//! are told apart: the calls to names first seen after that are counted together (a trace that
//! puts a request id in a tool's name has one name a call).

use std::collections::{BTreeMap, HashMap};

use crate::engine::observed::{Span, Tally};

use super::sample::Sample;

/// The most distinct models, and tools, told apart.
pub const MAX_NAMES: usize = 10_000;

/// What was seen of one model of one provider.
#[derive(Debug, Clone)]
pub struct ModelSeen {
    /// The provider, as the spans name it (`""`: not said).
    pub provider: String,
    /// The model (`""`: not said).
    pub model: String,
    /// Calls (or attempts) seen.
    pub calls: u64,
    /// Answered.
    pub answered: u64,
    /// Answered 429 (or failed with a rate-limit error).
    pub rate_limited: u64,
    /// Timed out.
    pub timeouts: u64,
    /// Failed otherwise.
    pub errors: u64,
    /// Answered after retries, so their time holds the client's waits: not fitted.
    pub retried: u64,
    /// Answered attempts' time, ms.
    pub latency: Sample,
    /// Time to the first streamed chunk, ms.
    pub ttft: Sample,
    /// Time per output token after the first, ms (streamed answers with two or more tokens).
    pub tpot: Sample,
    /// Input tokens.
    pub input: Sample,
    /// Output tokens.
    pub output: Sample,
    /// `max_tokens` asked for, by value.
    pub max_tokens: BTreeMap<u64, u64>,
    /// Calls without token counts.
    pub untokened: u64,
    /// The most requests and tokens per minute the provider's headers said it allowed.
    pub limits: (Option<f64>, Option<f64>),
}

/// What was seen of one tool.
#[derive(Debug, Clone)]
pub struct ToolSeen {
    /// Its name.
    pub name: String,
    /// The provider that served it (exec's calls), if one did.
    pub provider: Option<String>,
    /// Calls seen.
    pub calls: u64,
    /// Failed.
    pub errors: u64,
    /// Answered 429.
    pub rate_limited: u64,
    /// Answered calls' time, ms.
    pub latency: Sample,
}

impl ToolSeen {
    /// A tool not seen yet.
    pub fn new(name: String, provider: Option<String>) -> Self {
        let latency = Sample::new(seed("tool", &name));
        ToolSeen {
            name,
            provider,
            calls: 0,
            errors: 0,
            rate_limited: 0,
            latency,
        }
    }

    /// Counts one call.
    fn count(&mut self, s: &Span) {
        self.calls += 1;
        match outcome(s) {
            Outcome::RateLimited => self.rate_limited += 1,
            Outcome::TimedOut | Outcome::Failed => self.errors += 1,
            Outcome::Answered => {
                if let Some(ms) = s.duration_ms() {
                    self.latency.add(ms);
                }
            }
        }
    }
}

/// Every model's and tool's calls.
#[derive(Debug, Default)]
pub struct Calls {
    /// Per (provider, model), in the order first seen.
    pub models: Vec<ModelSeen>,
    model_index: HashMap<(String, String), usize>,
    /// Calls to models first seen after [`MAX_NAMES`] others.
    pub models_beyond: u64,
    /// Per tool, in the order first seen.
    pub tools: Vec<ToolSeen>,
    tool_index: HashMap<String, usize>,
    /// Calls to tools first seen after [`MAX_NAMES`] others, together (its name empty).
    pub tools_beyond: Option<ToolSeen>,
}

impl Calls {
    /// Counts model call `s` of (`provider`, `model`); its index, `u32::MAX` past the cap.
    pub fn model(&mut self, s: &Span, provider: &str, model: &str, skipped: &mut Tally) -> u32 {
        let key = (provider.to_string(), model.to_string());
        let i = match self.model_index.get(&key) {
            Some(&i) => i,
            None if self.models.len() >= MAX_NAMES => {
                self.models_beyond += 1;
                return u32::MAX;
            }
            None => {
                self.model_index.insert(key, self.models.len());
                let key = format!("{provider}/{model}");
                self.models.push(ModelSeen {
                    provider: provider.into(),
                    model: model.into(),
                    calls: 0,
                    answered: 0,
                    rate_limited: 0,
                    timeouts: 0,
                    errors: 0,
                    retried: 0,
                    latency: Sample::new(seed("latency", &key)),
                    ttft: Sample::new(seed("ttft", &key)),
                    tpot: Sample::new(seed("tpot", &key)),
                    input: Sample::new(seed("input", &key)),
                    output: Sample::new(seed("output", &key)),
                    max_tokens: BTreeMap::new(),
                    untokened: 0,
                    limits: (None, None),
                });
                self.models.len() - 1
            }
        };
        let m = &mut self.models[i];
        m.calls += 1;
        let most = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        m.limits = (most(m.limits.0, s.limits.0), most(m.limits.1, s.limits.1));
        match outcome(s) {
            Outcome::RateLimited => m.rate_limited += 1,
            Outcome::TimedOut => m.timeouts += 1,
            Outcome::Failed => m.errors += 1,
            Outcome::Answered => {
                m.answered += 1;
                if s.resend_count.unwrap_or(0) > 0 && !s.attempt {
                    m.retried += 1;
                } else if let Some(ms) = s.duration_ms() {
                    m.latency.add(ms);
                    if let Some(first) = s.first_chunk_ns {
                        let first_ms = first as f64 / 1e6;
                        m.ttft.add(first_ms);
                        if let Some(out) = s.output_tokens.filter(|n| *n >= 2) {
                            m.tpot.add((ms - first_ms).max(0.0) / (out - 1) as f64);
                        }
                    }
                }
                match s.input_tokens {
                    Some(n) => m.input.add(n as f64),
                    None => {
                        m.untokened += 1;
                        skipped.add(
                            "an answered model call without input tokens (gen_ai.usage.input_tokens): its time is fitted, its tokens are not",
                            String::new,
                        );
                    }
                }
                if let Some(n) = s.output_tokens {
                    m.output.add(n as f64);
                }
                if let Some(n) = s.max_tokens {
                    *m.max_tokens.entry(n).or_default() += 1;
                }
            }
        }
        i as u32
    }

    /// Counts tool call `s` of `name`; its index, `u32::MAX` past the cap (counted in
    /// `tools_beyond`).
    pub fn tool(&mut self, s: &Span, name: &str, provider: &Option<String>) -> u32 {
        let i = match self.tool_index.get(name) {
            Some(&i) => i,
            None if self.tools.len() >= MAX_NAMES => {
                let beyond = self
                    .tools_beyond
                    .get_or_insert_with(|| ToolSeen::new(String::new(), None));
                beyond.count(s);
                return u32::MAX;
            }
            None => {
                self.tool_index.insert(name.to_string(), self.tools.len());
                self.tools
                    .push(ToolSeen::new(name.into(), provider.clone()));
                self.tools.len() - 1
            }
        };
        self.tools[i].count(s);
        i as u32
    }
}

/// Seeds of the samples, told apart by what they sample.
pub fn seed(what: &str, key: &str) -> u64 {
    // FNV-1a: stable across runs and builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in what.bytes().chain([0]).chain(key.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// How a call ended.
pub enum Outcome {
    /// Answered.
    Answered,
    /// Answered 429, or failed with a rate-limit error.
    RateLimited,
    /// Timed out.
    TimedOut,
    /// Failed otherwise.
    Failed,
}

/// How call `s` ended, by its status and error.
pub fn outcome(s: &Span) -> Outcome {
    let error = s.error.as_deref().unwrap_or("").to_ascii_lowercase();
    if s.status == Some(429) || error.contains("ratelimit") || error.contains("rate_limit") {
        Outcome::RateLimited
    } else if error.contains("timeout") || error.contains("timed out") {
        Outcome::TimedOut
    } else if s.error.is_some() || s.status.is_some_and(|st| st >= 400) {
        Outcome::Failed
    } else {
        Outcome::Answered
    }
}
