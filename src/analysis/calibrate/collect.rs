//! What the spans say, gathered as they stream past: per model (and provider) and per tool, the
//! answered attempts' times, tokens and failures; per query (from [`traces`](super::traces)), its
//! time, the agent's own time between calls, and its shape (model turns, rounds, calls a round);
//! and when queries started, by session where one is said. Memory is bounded by the samples'
//! caps, the names told apart ([`seen::MAX_NAMES`](super::seen::MAX_NAMES)) and the open
//! traces, plus 8 bytes a query (its start time, for the arrival process) and about 50 a
//! session (at most [`MAX_SESSIONS`]).

use std::collections::BTreeMap;

use crate::engine::observed::{Kind, Span, Tally};

use super::sample::Sample;
use super::seen::{outcome, seed, Calls, Outcome};
use super::traces::{span_key, Assembler, Node, Query, Role};

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
    /// Per session (by a 64-bit hash of its id: a long id costs no more than a short one):
    /// its queries, the first start, the last end. At most [`MAX_SESSIONS`].
    pub sessions: BTreeMap<u64, SessionSeen>,
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

/// The most sessions told apart (about 50 bytes each); a query of a session first seen after
/// that is read as one without a session.
pub const MAX_SESSIONS: usize = 1_000_000;

/// Everything gathered.
#[derive(Debug)]
pub struct Collector {
    /// Per (provider, model) and per tool.
    pub calls: Calls,
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

impl Default for Collector {
    fn default() -> Self {
        Collector {
            calls: Calls::default(),
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

impl Collector {
    /// Takes one span, for what `view` says it gives. A span of a trace given again (the same
    /// trace and span id) is counted as such and not used.
    pub fn add(&mut self, s: Span, view: View) {
        let key = span_key(s.id, s.start_ns, s.end_ns);
        if view.structure && s.trace != 0 && self.assembler.seen_before(s.trace, key) {
            self.skipped.add(
                "a span given again (its trace id, span id and times seen before: a file read twice, an exporter's re-sent batch): counted once",
                String::new,
            );
            return;
        }
        if matches!(s.kind, Kind::Model { .. }) && view.structure && !s.attempt {
            if let (Outcome::Answered, Some(ms)) = (outcome(&s), s.duration_ms()) {
                self.client_calls.add(ms);
            }
        }
        let role = match &s.kind {
            Kind::Model { .. } if !view.model_stats => Role::Model(u32::MAX),
            Kind::Model { provider, model } => {
                Role::Model(self.calls.model(&s, provider, model, &mut self.skipped))
            }
            Kind::Tool { .. } if !view.tool_stats => Role::Tool(u32::MAX),
            Kind::Tool { name, provider } => Role::Tool(self.calls.tool(&s, name, provider)),
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
        if s.trace == 0 && s.end_ns.is_none() {
            // A log row without its time: a query we know the start of only.
            self.queries.starts.push(s.start_ns);
            self.queries.count += 1;
            self.queries.sessionless += 1;
            return;
        }
        // A span of a trace without its end is placed in its trace, not timed.
        let node = Node {
            id: s.id,
            parent: s.parent,
            role,
            start: s.start_ns,
            end: s.end_ns.unwrap_or(s.start_ns),
            timed: s.end_ns.is_some(),
        };
        let mut closed = Vec::new();
        if s.trace == 0 {
            // A row of a flat log, or a call without a trace: a query by itself.
            closed.push(Query::single(node, s.session.clone()));
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
        self.skipped.add_n(
            "a span on or under a parent cycle (spans each other's ancestors): its call is fitted, not placed in its query",
            q.cyclic,
            String::new,
        );
        self.skipped.add_n(
            "a span whose span id another span of its trace has, at other times (ids not unique): read as a span of its own",
            q.shared,
            String::new,
        );
        if !q.rooted {
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
        let key = q.session.as_deref().map(|id| seed("session", id));
        let known = key.is_some_and(|k| seen.sessions.contains_key(&k));
        match key {
            Some(_) if !known && seen.sessions.len() >= MAX_SESSIONS => {
                seen.sessionless += 1;
                self.skipped.add(
                    "a query of a session first seen after 1,000,000 others: read as one without a session",
                    String::new,
                );
            }
            Some(k) => {
                let s = seen.sessions.entry(k).or_insert(SessionSeen {
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
            timed: true,
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
            rooted: true,
            session: None,
            steps: vec![step(Role::Model(0), 10, 30), step(Role::Tool(0), 20, 50)],
            nested: 0,
            skewed: 0,
            cyclic: 0,
            shared: 0,
        };
        assert_eq!(own_time(&q), 60);
    }

    fn span(trace: u128, id: u64, parent: u64, kind: Kind, start: i64, end: Option<i64>) -> Span {
        let mut s = Span::new(kind, start);
        (s.trace, s.id, s.parent, s.end_ns) = (trace, id, parent, end);
        s
    }

    fn chat() -> Kind {
        Kind::Model {
            provider: "openai".into(),
            model: "gpt-4o".into(),
        }
    }

    #[test]
    fn a_span_given_again_is_counted_once_and_said() {
        // W5: the same spans twice (a file given twice, a re-sent batch), and a span that ends
        // before it starts (not timed) among them.
        let mut c = Collector::default();
        for _ in 0..2 {
            c.add(span(1, 1, 0, Kind::Agent, 0, Some(100)), View::ALL);
            c.add(span(1, 2, 1, chat(), 0, Some(40)), View::ALL);
            c.add(span(1, 3, 1, chat(), 60, None), View::ALL);
        }
        c.finish();
        assert_eq!(c.calls.models[0].calls, 2);
        assert_eq!(c.queries.count, 1);
        // Two turns (the untimed one placed, at its start): around a round of no calls.
        assert_eq!(c.queries.shapes, BTreeMap::from([(Shape::Around, 1)]));
        let again = c
            .skipped
            .iter()
            .find(|(w, _, _)| w.starts_with("a span given again"));
        assert_eq!(again.map(|(_, n, _)| n), Some(3));
    }

    #[test]
    fn spans_an_exporter_gave_one_id_are_still_two() {
        let mut c = Collector::default();
        c.add(span(1, 1, 0, Kind::Agent, 0, Some(100)), View::ALL);
        c.add(span(1, 1, 0, chat(), 0, Some(40)), View::ALL);
        c.add(span(1, 1, 0, chat(), 50, Some(90)), View::ALL);
        c.finish();
        assert_eq!(c.calls.models[0].calls, 2);
        let said = |what: &str| {
            c.skipped
                .iter()
                .find(|(w, _, _)| w.starts_with(what))
                .map(|(_, n, _)| n)
        };
        assert_eq!(said("a span whose span id another span"), Some(2));
        assert_eq!(said("a span given again"), None);
    }

    #[test]
    fn sessions_are_kept_by_a_hash_of_their_id_up_to_a_cap() {
        let mut c = Collector::default();
        let long = "z".repeat(1_000);
        for q in 0..(MAX_SESSIONS as i64 + 3) {
            let mut s = span(0, 0, 0, chat(), q * 1_000, Some(q * 1_000 + 10));
            s.session = Some(format!("s{q}{long}"));
            c.add(s, View::ALL);
        }
        assert_eq!(c.queries.sessions.len(), MAX_SESSIONS);
        assert_eq!(c.queries.sessionless, 3);
        let past = c
            .skipped
            .iter()
            .find(|(w, _, _)| w.starts_with("a query of a session"));
        assert_eq!(past.map(|(_, n, _)| n), Some(3));
    }
}
