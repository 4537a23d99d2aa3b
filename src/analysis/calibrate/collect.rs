//! What the spans say, gathered as they stream past: per model (and provider) and per tool, the
//! answered attempts' times, tokens and failures; per query (from [`traces`](super::traces)), its
//! time, the agent's own time between calls, and its shape (model turns, rounds, calls a round);
//! and when queries started, by session where one is said. Memory is bounded by the samples'
//! caps and the open traces, plus 8 bytes a query (its start time, for the arrival process).

use std::collections::BTreeMap;

use crate::engine::observed::{Kind, Span, Tally};

use super::sample::Sample;
use super::traces::{Assembler, Node, Query, Role};

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

/// Where a query's model turns stand among its rounds of tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// One model call and nothing else.
    Single,
    /// A turn before each round and one to answer: `rounds + 1` turns.
    Around,
    /// A turn between each two rounds: `rounds − 1` turns.
    Between,
    /// Tool calls only.
    ToolsOnly,
    /// Anything else (a turn before the rounds but none after, say).
    Other,
}

/// What was seen of the queries.
#[derive(Debug, Clone)]
pub struct QueriesSeen {
    /// Queries closed.
    pub count: u64,
    /// Of which with a boundary span (their time is theirs; the others' is their calls').
    pub bounded: u64,
    /// Query time, ms (bounded queries).
    pub latency: Sample,
    /// The agent's own time in a query: not inside any model or tool call, ms.
    pub own: Sample,
    /// Queries by shape.
    pub shapes: BTreeMap<Shape, u64>,
    /// Rounds per query, by count (shapes with rounds).
    pub rounds: BTreeMap<u32, u64>,
    /// Tool calls per round, by count.
    pub per_round: BTreeMap<u64, u64>,
    /// Rounds of two or more tool calls, and how many of them ran one after another.
    pub multi_rounds: (u64, u64),
    /// Model calls made inside a tool (a subagent's).
    pub nested: u64,
    /// Each query's start, ns since the epoch.
    pub starts: Vec<i64>,
    /// Per session: its queries, the first start, the last end, and the gaps between one
    /// query's end and the next one's start.
    pub sessions: BTreeMap<String, SessionSeen>,
    /// Queries with no session said.
    pub sessionless: u64,
}

/// One session's queries.
#[derive(Debug, Clone)]
pub struct SessionSeen {
    /// Queries.
    pub queries: u64,
    /// First start, ns.
    pub first: i64,
    /// Last end, ns.
    pub last_end: i64,
}

/// What one input's spans give: the calls' figures (of models, of tools), and the queries'
/// structure. When a provider's own record of the calls (exec's `calls.jsonl`) is read beside
/// the agent's traces, the calls' figures come from the first (each attempt, as the provider
/// timed it) and the structure from the second, so no call is counted twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// Model calls are fitted.
    pub model_stats: bool,
    /// Tool calls are fitted.
    pub tool_stats: bool,
    /// Spans shape queries.
    pub structure: bool,
}

impl View {
    /// Everything from this input.
    pub const ALL: View = View {
        model_stats: true,
        tool_stats: true,
        structure: true,
    };
    /// A provider's record beside the agent's traces: its model calls' figures only.
    pub const PROVIDER: View = View {
        model_stats: true,
        tool_stats: false,
        structure: false,
    };
    /// The agent's traces beside a provider's record: the structure, and the tool calls (each
    /// timed as the agent saw it, whether it ran there or at the provider).
    pub const AGENT: View = View {
        model_stats: false,
        tool_stats: true,
        structure: true,
    };
}

/// Everything gathered.
#[derive(Debug)]
pub struct Collector {
    /// Per (provider, model).
    pub models: Vec<ModelSeen>,
    /// Per tool.
    pub tools: Vec<ToolSeen>,
    /// HTTP attempts under calls, and how many were answered 429.
    pub http: (u64, u64),
    /// The queries.
    pub queries: QueriesSeen,
    /// Think times: one session's gap between a query's end and its next start, ms.
    pub think: Sample,
    /// Model calls as the client saw them (an agent's span, retries and waits included), ms:
    /// answered ones, from traces only.
    pub client_calls: Sample,
    /// Skipped or read by assumption.
    pub skipped: Tally,
    assembler: Assembler,
}

/// Seeds of the samples, told apart by what they sample.
fn seed(what: &str, key: &str) -> u64 {
    // FNV-1a: stable across runs and builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in what.bytes().chain([0]).chain(key.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Default for Collector {
    fn default() -> Self {
        Collector {
            models: Vec::new(),
            tools: Vec::new(),
            http: (0, 0),
            queries: QueriesSeen {
                count: 0,
                bounded: 0,
                latency: Sample::new(seed("query", "")),
                own: Sample::new(seed("own", "")),
                shapes: BTreeMap::new(),
                rounds: BTreeMap::new(),
                per_round: BTreeMap::new(),
                multi_rounds: (0, 0),
                nested: 0,
                starts: Vec::new(),
                sessions: BTreeMap::new(),
                sessionless: 0,
            },
            think: Sample::new(seed("think", "")),
            client_calls: Sample::new(seed("client", "")),
            skipped: Tally::default(),
            assembler: Assembler::default(),
        }
    }
}

/// How a call ended.
enum Outcome {
    Answered,
    RateLimited,
    TimedOut,
    Failed,
}

fn outcome(s: &Span) -> Outcome {
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

impl Collector {
    /// Takes one span, for what `view` says it gives.
    pub fn add(&mut self, s: Span, view: View) {
        if matches!(s.kind, Kind::Model { .. }) && view.structure && !s.attempt {
            if let (Outcome::Answered, Some(ms)) = (outcome(&s), s.duration_ms()) {
                self.client_calls.add(ms);
            }
        }
        let role = match &s.kind {
            Kind::Model { .. } if !view.model_stats => Role::Model(u32::MAX),
            Kind::Model { provider, model } => Role::Model(self.model_seen(&s, provider, model)),
            Kind::Tool { .. } if !view.tool_stats => Role::Tool(u32::MAX),
            Kind::Tool { name, provider } => Role::Tool(self.tool_seen(&s, name, provider)),
            Kind::Agent => Role::Agent,
            Kind::Http => {
                self.http.0 += 1;
                self.http.1 += u64::from(s.status == Some(429));
                Role::Other
            }
            Kind::Other => Role::Other,
        };
        if !view.structure {
            return;
        }
        let Some(end) = s.end_ns else {
            if s.trace == 0 {
                // A log row without its time: a query we know the start of only.
                self.queries.starts.push(s.start_ns);
                self.queries.count += 1;
                self.queries.sessionless += 1;
            }
            return;
        };
        let node = Node {
            id: s.id,
            parent: s.parent,
            role,
            start: s.start_ns,
            end,
        };
        let mut closed = Vec::new();
        if s.trace == 0 {
            // A row of a flat log, or a call without a trace: a query by itself.
            closed.push(Query {
                start: s.start_ns,
                end,
                bounded: true,
                session: s.session.clone(),
                steps: vec![node],
                nested: 0,
                skewed: 0,
            });
        } else {
            self.assembler
                .add(s.trace, node, s.session.as_deref(), &mut |q| closed.push(q));
        }
        for q in closed {
            self.query(q);
        }
    }

    /// Closes every open trace and counts what the assembler left out.
    pub fn finish(&mut self) {
        let mut closed = Vec::new();
        self.assembler.finish(&mut |q| closed.push(q));
        for q in closed {
            self.query(q);
        }
        let (late, evicted) = (self.assembler.late, self.assembler.evicted);
        self.skipped.add_n(
            "a span of a trace closed 30 s (of span time) earlier: its call is fitted, not placed in its query",
            late,
            String::new,
        );
        self.skipped.add_n(
            "a trace closed early, as more than 100,000 were open at once",
            evicted,
            String::new,
        );
    }

    fn model_seen(&mut self, s: &Span, provider: &str, model: &str) -> u32 {
        let i = match self
            .models
            .iter()
            .position(|m| m.provider == provider && m.model == model)
        {
            Some(i) => i,
            None => {
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
                        self.skipped.add(
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

    fn tool_seen(&mut self, s: &Span, name: &str, provider: &Option<String>) -> u32 {
        let i = match self.tools.iter().position(|t| t.name == name) {
            Some(i) => i,
            None => {
                self.tools.push(ToolSeen {
                    name: name.into(),
                    provider: provider.clone(),
                    calls: 0,
                    errors: 0,
                    rate_limited: 0,
                    latency: Sample::new(seed("tool", name)),
                });
                self.tools.len() - 1
            }
        };
        let t = &mut self.tools[i];
        t.calls += 1;
        match outcome(s) {
            Outcome::RateLimited => t.rate_limited += 1,
            Outcome::TimedOut | Outcome::Failed => t.errors += 1,
            Outcome::Answered => {
                if let Some(ms) = s.duration_ms() {
                    t.latency.add(ms);
                }
            }
        }
        i as u32
    }

    /// Takes one closed query.
    fn query(&mut self, q: Query) {
        let seen = &mut self.queries;
        seen.count += 1;
        seen.nested += q.nested;
        seen.starts.push(q.start);
        self.skipped.add_n(
            "a span outside its parent's time by more than 1 ms (clock skew between services?): kept as timed",
            q.skewed,
            String::new,
        );
        if !q.bounded {
            self.skipped.add(
                "a trace without a root span (spans whose parent never arrived): its calls are fitted and shape it, its time is no query's",
                String::new,
            );
        }
        if q.bounded {
            seen.bounded += 1;
            seen.latency.add((q.end - q.start) as f64 / 1e6);
            seen.own.add(own_time(&q) as f64 / 1e6);
        }
        let (shape, rounds) = shape(&q.steps);
        *seen.shapes.entry(shape).or_default() += 1;
        if matches!(shape, Shape::Around | Shape::Between | Shape::ToolsOnly) {
            *seen.rounds.entry(rounds.len() as u32).or_default() += 1;
            for round in &rounds {
                *seen.per_round.entry(round.len() as u64).or_default() += 1;
                if round.len() >= 2 {
                    seen.multi_rounds.0 += 1;
                    let sequential = round.windows(2).all(|w| w[1].start >= w[0].end);
                    seen.multi_rounds.1 += u64::from(sequential);
                }
            }
        }
        match q.session {
            Some(id) => {
                let s = seen.sessions.entry(id).or_insert(SessionSeen {
                    queries: 0,
                    first: q.start,
                    last_end: i64::MIN,
                });
                if s.queries > 0 && q.start >= s.last_end {
                    self.think.add((q.start - s.last_end) as f64 / 1e6);
                }
                s.queries += 1;
                s.first = s.first.min(q.start);
                s.last_end = s.last_end.max(q.end);
            }
            None => seen.sessionless += 1,
        }
    }
}

/// A query's shape and its rounds (each round's tool calls, by start).
fn shape(steps: &[Node]) -> (Shape, Vec<Vec<Node>>) {
    let models = steps
        .iter()
        .filter(|n| matches!(n.role, Role::Model(_)))
        .count();
    let mut rounds: Vec<Vec<Node>> = vec![Vec::new()];
    for n in steps {
        match n.role {
            Role::Model(_) => rounds.push(Vec::new()),
            _ => rounds.last_mut().expect("one round at least").push(*n),
        }
    }
    // rounds[0] is before the first model call, the last after the last one.
    let (first, last) = (
        !rounds[0].is_empty(),
        !rounds.last().is_some_and(Vec::is_empty),
    );
    match (models, first, last) {
        (0, _, _) => (Shape::ToolsOnly, rounds),
        (1, false, false) => (Shape::Single, Vec::new()),
        (_, false, false) => {
            let inner = rounds[1..rounds.len() - 1].to_vec();
            (Shape::Around, inner)
        }
        (_, true, true) => (Shape::Between, rounds),
        _ => (Shape::Other, rounds),
    }
}

/// Time in the query not inside any of its steps, ns.
fn own_time(q: &Query) -> i64 {
    let mut covered = 0;
    let mut reach = q.start;
    for n in &q.steps {
        let (s, e) = (n.start.max(reach), n.end.min(q.end));
        if e > s {
            covered += e - s;
            reach = e;
        }
    }
    (q.end - q.start - covered).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(role: Role, start: i64, end: i64) -> Node {
        Node {
            id: 0,
            parent: 1,
            role,
            start,
            end,
        }
    }

    #[test]
    fn an_agent_loop_is_turns_around_rounds() {
        let m = |s, e| step(Role::Model(0), s, e);
        let t = |s, e| step(Role::Tool(0), s, e);
        let (shape_, rounds) = shape(&[
            m(0, 10),
            t(10, 20),
            t(11, 25),
            m(25, 30),
            t(30, 31),
            m(31, 40),
        ]);
        assert_eq!(shape_, Shape::Around);
        assert_eq!(rounds.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
        let (shape_, rounds) = shape(&[t(0, 5), m(5, 10), t(10, 20)]);
        assert_eq!((shape_, rounds.len()), (Shape::Between, 2));
        assert_eq!(shape(&[m(0, 1)]).0, Shape::Single);
        assert_eq!(shape(&[m(0, 1), t(1, 2)]).0, Shape::Other);
    }

    #[test]
    fn the_agents_own_time_is_what_no_call_covers() {
        let q = Query {
            start: 0,
            end: 100,
            bounded: true,
            session: None,
            steps: vec![step(Role::Model(0), 10, 30), step(Role::Tool(0), 20, 50)],
            nested: 0,
            skewed: 0,
        };
        assert_eq!(own_time(&q), 60);
    }
}
