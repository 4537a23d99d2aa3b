//! Spans put back together into queries, in bounded memory. A trace is held open until the input
//! (by span end times) has moved [`GRACE_NS`] past its last span's end (spans from other
//! services may be exported later than their root) and [`GRACE_SPANS`] spans have been read
//! since its last one (an input out of time order), then it is closed into a [`Query`] and
//! forgotten. At most [`MAX_OPEN`] traces are held at once (beyond that, the one that ended
//! first is closed as it is). A span of a trace already closed is counted, not used.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// How far (in span end times) the input must move past a trace's end before it is closed.
pub const GRACE_NS: i64 = 30_000_000_000;
/// How many spans must be read after a trace's last one before it is closed: an input not in
/// time order (files merged, a writer that batches by query) still gets each trace whole.
pub const GRACE_SPANS: u64 = 10_000;
/// The most traces held open at once.
pub const MAX_OPEN: usize = 100_000;
/// How far a span may stand outside its parent's time before it is counted as skewed.
const SKEW_NS: i64 = 1_000_000;
/// How many closed traces are remembered, to recognize their late spans.
const REMEMBERED: usize = 100_000;

/// What a span is, for the query's structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A call to a model; the index is the caller's (which provider and model).
    Model(u32),
    /// A tool call; the index is the caller's (which tool).
    Tool(u32),
    /// An `invoke_agent` span: a query's boundary.
    Agent,
    /// Anything else.
    Other,
}

/// One span as the assembler keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// Its id (0: none).
    pub id: u64,
    /// Its parent's (0: a root).
    pub parent: u64,
    /// What it is.
    pub role: Role,
    /// Start, ns since the epoch.
    pub start: i64,
    /// End (at least its start).
    pub end: i64,
}

/// A query put back together.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// When it started: its boundary span's start (or its first span's).
    pub start: i64,
    /// When it ended: its boundary span's end (or its last span's).
    pub end: i64,
    /// Whether it had a boundary span (an `invoke_agent` span or a root); without one, its
    /// times are its calls' first start and last end.
    pub bounded: bool,
    /// Its session, when a span of it said.
    pub session: Option<String>,
    /// Its model and tool calls not made from inside a tool, by start (ties by end).
    pub steps: Vec<Node>,
    /// Model calls made from inside a tool (a subagent's): not steps of this query.
    pub nested: u64,
    /// Spans that start before their parent or end after it by more than a millisecond (clock
    /// skew between services, most likely).
    pub skewed: u64,
}

#[derive(Debug, Default)]
struct Open {
    nodes: Vec<Node>,
    session: Option<String>,
    last_end: i64,
    /// The input's span count when its last span came.
    last_seen: u64,
    /// Quiet (no span for [`GRACE_SPANS`]), waiting for the input's time to pass its end.
    waiting: bool,
}

/// Puts spans back together into queries.
#[derive(Debug, Default)]
pub struct Assembler {
    open: HashMap<u128, Open>,
    /// Open traces by when their last span came (in spans read): the quiet ones first.
    by_seen: BTreeMap<u64, u128>,
    /// Quiet traces by their last span's end: the next to close once the input's time passes.
    waiting: BTreeSet<(i64, u128)>,
    closed: HashSet<u128>,
    closed_order: VecDeque<u128>,
    watermark: i64,
    /// Spans read.
    seen: u64,
    /// Spans of traces already closed.
    pub late: u64,
    /// Traces closed because too many were open.
    pub evicted: u64,
}

impl Assembler {
    /// Adds one span of trace `trace` (not 0); `session` is its session, if it says.
    pub fn add(
        &mut self,
        trace: u128,
        node: Node,
        session: Option<&str>,
        done: &mut dyn FnMut(Query),
    ) {
        self.seen += 1;
        if self.closed.contains(&trace) {
            self.late += 1;
            return;
        }
        let t = self.open.entry(trace).or_default();
        if !t.nodes.is_empty() {
            if t.waiting {
                self.waiting.remove(&(t.last_end, trace));
                t.waiting = false;
            } else {
                self.by_seen.remove(&t.last_seen);
            }
        }
        t.last_end = if t.nodes.is_empty() {
            node.end
        } else {
            t.last_end.max(node.end)
        };
        t.nodes.push(node);
        t.last_seen = self.seen;
        if t.session.is_none() {
            t.session = session.map(str::to_owned);
        }
        self.by_seen.insert(self.seen, trace);
        self.watermark = self.watermark.max(node.end);
        // The quiet ones close, or wait for the input's time to pass them.
        while let Some((&seen, &quiet)) = self.by_seen.first_key_value() {
            if self.seen - seen < GRACE_SPANS {
                break;
            }
            self.by_seen.pop_first();
            let t = self.open.get_mut(&quiet).expect("an open trace");
            if t.last_end.saturating_add(GRACE_NS) < self.watermark {
                self.close(quiet, done);
            } else {
                t.waiting = true;
                self.waiting.insert((t.last_end, quiet));
            }
        }
        while let Some(&(end, ripe)) = self.waiting.first() {
            if end.saturating_add(GRACE_NS) >= self.watermark {
                break;
            }
            self.waiting.pop_first();
            self.close(ripe, done);
        }
        while self.open.len() > MAX_OPEN {
            let oldest = match self.waiting.pop_first() {
                Some((_, t)) => t,
                None => self.by_seen.pop_first().expect("open traces are queued").1,
            };
            self.evicted += 1;
            self.close(oldest, done);
        }
    }

    /// Closes every trace still open (at the end of the input), the longest quiet first.
    pub fn finish(&mut self, done: &mut dyn FnMut(Query)) {
        while let Some((_, trace)) = self.waiting.pop_first() {
            self.close(trace, done);
        }
        while let Some((_, trace)) = self.by_seen.pop_first() {
            self.close(trace, done);
        }
    }

    /// Closes `trace` (already out of `by_seen` and `waiting`).
    fn close(&mut self, trace: u128, done: &mut dyn FnMut(Query)) {
        let Some(t) = self.open.remove(&trace) else {
            return;
        };
        if self.closed_order.len() == REMEMBERED {
            if let Some(old) = self.closed_order.pop_front() {
                self.closed.remove(&old);
            }
        }
        self.closed.insert(trace);
        self.closed_order.push_back(trace);
        done(query(t.nodes, t.session));
    }
}

/// A closed trace's nodes as a query.
fn query(mut nodes: Vec<Node>, session: Option<String>) -> Query {
    nodes.sort_by_key(|n| (n.start, n.end, n.id));
    let parents: HashMap<u64, usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.id != 0)
        .map(|(i, n)| (n.id, i))
        .collect();
    // The boundary: the outermost invoke_agent span, else the root.
    let outermost_agent = nodes
        .iter()
        .filter(|n| n.role == Role::Agent)
        .find(|n| !ancestors(&nodes, &parents, n).any(|a| a.role == Role::Agent));
    let root = nodes.iter().find(|n| n.parent == 0);
    let boundary = outermost_agent.or(root).copied();
    let inside_tool =
        |n: &Node| ancestors(&nodes, &parents, n).any(|a| matches!(a.role, Role::Tool(_)));
    let mut nested = 0;
    let mut steps = Vec::new();
    for n in &nodes {
        match n.role {
            Role::Model(_) if inside_tool(n) => nested += 1,
            Role::Model(_) | Role::Tool(_) if !inside_tool(n) => steps.push(*n),
            _ => {}
        }
    }
    let skewed = nodes
        .iter()
        .filter(|n| {
            parents.get(&n.parent).is_some_and(|&p| {
                let p = &nodes[p];
                n.start + SKEW_NS < p.start || n.end > p.end + SKEW_NS
            })
        })
        .count() as u64;
    let (start, end) = match boundary {
        Some(b) => (b.start, b.end),
        None => (
            nodes.iter().map(|n| n.start).min().unwrap_or(0),
            nodes.iter().map(|n| n.end).max().unwrap_or(0),
        ),
    };
    Query {
        start,
        end,
        bounded: boundary.is_some(),
        session,
        steps,
        nested,
        skewed,
    }
}

/// `n`'s ancestors that are in the trace, nearest first (stopping at a cycle's length).
fn ancestors<'a>(
    nodes: &'a [Node],
    parents: &'a HashMap<u64, usize>,
    n: &Node,
) -> impl Iterator<Item = &'a Node> + 'a {
    let mut next = n.parent;
    let mut left = nodes.len();
    std::iter::from_fn(move || {
        if next == 0 || left == 0 {
            return None;
        }
        left -= 1;
        let p = &nodes[*parents.get(&next)?];
        next = p.parent;
        Some(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u64, parent: u64, role: Role, start: i64, end: i64) -> Node {
        Node {
            id,
            parent,
            role,
            start,
            end,
        }
    }

    #[test]
    fn a_trace_is_closed_once_the_input_moves_past_its_root() {
        let mut a = Assembler::default();
        let got = std::cell::RefCell::new(Vec::new());
        let mut done = |q: Query| got.borrow_mut().push(q);
        a.add(1, node(2, 1, Role::Model(0), 10, 20), None, &mut done);
        a.add(1, node(3, 1, Role::Tool(0), 25, 30), None, &mut done);
        a.add(1, node(1, 0, Role::Agent, 0, 40), Some("s1"), &mut done);
        assert!(got.borrow().is_empty(), "held open within the grace");
        // Later traces, far enough on in time and in spans, close the first.
        for i in 0..GRACE_SPANS {
            let far = node(9, 0, Role::Other, 0, 40 + GRACE_NS + 1);
            a.add(2 + u128::from(i), far, None, &mut done);
        }
        {
            let got = got.borrow();
            assert_eq!(got.len(), 1);
            assert_eq!((got[0].start, got[0].end, got[0].bounded), (0, 40, true));
            assert_eq!(got[0].session.as_deref(), Some("s1"));
            assert_eq!(got[0].steps.len(), 2);
        }
        // A span of the closed trace is late.
        a.add(1, node(4, 1, Role::Tool(0), 31, 32), None, &mut done);
        assert_eq!(a.late, 1);
        a.finish(&mut done);
        assert_eq!(got.borrow().len(), 1 + GRACE_SPANS as usize);
        assert!(got.borrow()[1].steps.is_empty());
    }

    #[test]
    fn a_trace_written_out_of_time_order_is_still_read_whole() {
        let mut a = Assembler::default();
        let got = std::cell::RefCell::new(Vec::new());
        let mut done = |q: Query| got.borrow_mut().push(q);
        // A trace far in the future first, then an old one span by span.
        a.add(
            1,
            node(1, 0, Role::Agent, 1_000 * GRACE_NS, 1_001 * GRACE_NS),
            None,
            &mut done,
        );
        a.add(2, node(3, 2, Role::Model(0), 10, 20), None, &mut done);
        a.add(2, node(4, 2, Role::Tool(0), 20, 30), None, &mut done);
        a.add(2, node(2, 0, Role::Agent, 0, 40), None, &mut done);
        a.finish(&mut done);
        let got = got.borrow();
        let old = got.iter().find(|q| q.start == 0).unwrap();
        assert_eq!((old.steps.len(), old.bounded), (2, true));
    }

    #[test]
    fn a_model_call_inside_a_tool_is_not_a_step_of_the_query() {
        let nodes = vec![
            node(1, 0, Role::Agent, 0, 100),
            node(2, 1, Role::Tool(0), 10, 90),
            node(3, 2, Role::Model(0), 20, 30),
            node(4, 1, Role::Model(0), 0, 10),
        ];
        let q = query(nodes, None);
        assert_eq!(q.nested, 1);
        assert_eq!(q.steps.iter().map(|n| n.id).collect::<Vec<_>>(), [4, 2]);
    }

    #[test]
    fn a_trace_without_a_root_is_timed_by_its_calls() {
        let q = query(
            vec![
                node(2, 7, Role::Model(0), 5, 9),
                node(3, 7, Role::Tool(0), 10, 12),
            ],
            None,
        );
        assert_eq!((q.start, q.end, q.bounded), (5, 12, false));
    }
}
