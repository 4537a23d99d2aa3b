//! Spans put back together into queries, in bounded memory. A trace is held open until the input
//! (by span end times) has moved [`GRACE_NS`] past its last span's end (spans from other
//! services may be exported later than their root) and [`GRACE_SPANS`] spans have been read
//! since its last one (an input out of time order), then it is closed into a [`Query`] and
//! forgotten. At most [`MAX_OPEN`] traces are held at once (beyond that, the one that ended
//! first is closed as it is). A span of a trace already closed is counted, not used. A span
//! given again (the same trace and span id: a file read twice, an exporter's re-sent batch) is
//! recognized while its trace is open and, for [`REMEMBERED_IDS`] spans, after: by its ids and
//! its times, so that two spans an exporter gave one id are still two.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use super::tree::query;

/// How far (in span end times) the input must move past a trace's end before it is closed.
pub const GRACE_NS: i64 = 30_000_000_000;
/// How many spans must be read after a trace's last one before it is closed: an input not in
/// time order (files merged, a writer that batches by query) still gets each trace whole.
pub const GRACE_SPANS: u64 = 10_000;
/// The most traces held open at once.
pub const MAX_OPEN: usize = 100_000;
/// How many closed traces are remembered, to recognize their late spans.
const REMEMBERED: usize = 100_000;
/// How many spans of closed traces are remembered (16 bytes each), to tell a span given
/// again from a late one; the oldest closed traces' are forgotten first.
pub const REMEMBERED_IDS: usize = 1_000_000;

/// What tells a span from another of its trace: its id and a hash of its times.
pub type SpanKey = (u64, u64);

/// The key of span `id` from `start` to `end` (`None`: not timed).
pub fn span_key(id: u64, start: i64, end: Option<i64>) -> SpanKey {
    let end = end.unwrap_or(i64::MIN) as u64;
    let fp = (start as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(29)
        ^ end;
    (id, fp)
}

impl Node {
    /// Its [`SpanKey`].
    fn key(&self) -> SpanKey {
        span_key(self.id, self.start, self.timed.then_some(self.end))
    }
}

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
    /// End (at least its start; its start when it is not timed).
    pub end: i64,
    /// Whether its end was read (a span that ends before it starts is placed, not timed).
    pub timed: bool,
}

/// A query put back together.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// When it started: its boundary span's start (or its first span's).
    pub start: i64,
    /// When it ended: its boundary span's end (or its last span's).
    pub end: i64,
    /// Whether its time is its boundary span's (an `invoke_agent` span or a root, timed);
    /// otherwise its times are its calls' first start and last end.
    pub bounded: bool,
    /// Whether it had a boundary span at all (timed or not).
    pub rooted: bool,
    /// Its session, when a span of it said.
    pub session: Option<String>,
    /// Its model and tool calls not made from inside a tool, by start (ties by end).
    pub steps: Vec<Node>,
    /// Model calls made from inside a tool (a subagent's): not steps of this query.
    pub nested: u64,
    /// Spans that start before their parent or end after it by more than a millisecond (clock
    /// skew between services, most likely).
    pub skewed: u64,
    /// Spans on or under a parent cycle (each an ancestor of itself): not placed.
    pub cyclic: u64,
    /// Spans whose id an earlier span of the trace has (with other times): each is placed,
    /// the children under the earliest.
    pub shared: u64,
}

impl Query {
    /// A query of one call (a log's row, a call without a trace).
    pub fn single(node: Node, session: Option<String>) -> Query {
        Query {
            start: node.start,
            end: node.end,
            bounded: true,
            rooted: true,
            session,
            steps: vec![node],
            nested: 0,
            skewed: 0,
            cyclic: 0,
            shared: 0,
        }
    }
}

#[derive(Debug, Default)]
struct Open {
    nodes: Vec<Node>,
    /// Its spans' keys, to recognize one given again.
    ids: HashSet<SpanKey>,
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
    /// Closed traces, with their span ids (sorted; emptied once forgotten).
    closed: HashMap<u128, Vec<SpanKey>>,
    closed_order: VecDeque<u128>,
    /// Closed traces whose ids are still held, oldest first, and how many ids that is.
    with_ids: VecDeque<u128>,
    ids_held: usize,
    watermark: i64,
    /// Spans read.
    seen: u64,
    /// Spans of traces already closed.
    pub late: u64,
    /// Traces closed because too many were open.
    pub evicted: u64,
}

impl Assembler {
    /// Whether the span of `key` in `trace` was added before (a span without an id never
    /// was).
    pub fn seen_before(&self, trace: u128, key: SpanKey) -> bool {
        key.0 != 0
            && (self.open.get(&trace).is_some_and(|t| t.ids.contains(&key))
                || self
                    .closed
                    .get(&trace)
                    .is_some_and(|ids| ids.binary_search(&key).is_ok()))
    }

    /// Adds one span of trace `trace` (not 0); `session` is its session, if it says.
    pub fn add(
        &mut self,
        trace: u128,
        node: Node,
        session: Option<&str>,
        done: &mut dyn FnMut(Query),
    ) {
        self.seen += 1;
        if let Some(ids) = self.closed.get_mut(&trace) {
            self.late += 1;
            // Remembered, so that the same late span given again is told apart.
            if let (Err(at), true) = (ids.binary_search(&node.key()), !ids.is_empty()) {
                ids.insert(at, node.key());
                self.ids_held += 1;
            }
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
        if node.id != 0 {
            t.ids.insert(node.key());
        }
        t.last_seen = self.seen;
        if t.session.is_none() {
            t.session = session.map(str::to_owned);
        }
        self.by_seen.insert(self.seen, trace);
        self.watermark = self.watermark.max(node.end);
        self.close_ripe(done);
    }

    /// Closes the traces quiet for long enough, and the oldest beyond [`MAX_OPEN`].
    fn close_ripe(&mut self, done: &mut dyn FnMut(Query)) {
        // The quiet ones close, or wait for the input's time to pass them.
        while let Some((&seen, &quiet)) = self.by_seen.first_key_value() {
            if self.seen - seen < GRACE_SPANS {
                break;
            }
            self.by_seen.pop_first();
            let Some(t) = self.open.get_mut(&quiet) else {
                continue;
            };
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
                None => match self.by_seen.pop_first() {
                    Some((_, t)) => t,
                    None => break,
                },
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
                if let Some(ids) = self.closed.remove(&old) {
                    self.ids_held -= ids.len();
                }
            }
        }
        let mut ids: Vec<SpanKey> = t.ids.into_iter().collect();
        ids.sort_unstable();
        self.ids_held += ids.len();
        self.closed.insert(trace, ids);
        self.closed_order.push_back(trace);
        self.with_ids.push_back(trace);
        while self.ids_held > REMEMBERED_IDS {
            let Some(old) = self.with_ids.pop_front() else {
                break;
            };
            if let Some(ids) = self.closed.get_mut(&old) {
                self.ids_held -= ids.len();
                *ids = Vec::new();
            }
        }
        done(query(t.nodes, t.session));
    }
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
            timed: true,
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
    fn a_span_given_again_is_recognized_while_open_and_after_its_trace_closes() {
        let mut a = Assembler::default();
        let mut done = |_: Query| {};
        let key = |id, start, end| span_key(id, start, Some(end));
        a.add(7, node(1, 0, Role::Agent, 0, 10), None, &mut done);
        assert!(a.seen_before(7, key(1, 0, 10)));
        assert!(!a.seen_before(7, key(2, 0, 10)) && !a.seen_before(8, key(1, 0, 10)));
        assert!(!a.seen_before(7, key(0, 0, 10)), "no id: never");
        // Another span an exporter gave the same id is not the same span.
        assert!(!a.seen_before(7, key(1, 0, 11)) && !a.seen_before(7, span_key(1, 0, None)));
        a.finish(&mut done);
        assert!(
            a.seen_before(7, key(1, 0, 10)),
            "closed, its spans remembered"
        );
        // A late span of the closed trace is counted late once, then recognized.
        a.add(7, node(5, 1, Role::Tool(0), 1, 2), None, &mut done);
        assert_eq!(a.late, 1);
        assert!(a.seen_before(7, key(5, 1, 2)));
    }

    #[test]
    fn the_ids_of_closed_traces_are_forgotten_oldest_first_past_the_cap() {
        let mut a = Assembler::default();
        let mut done = |_: Query| {};
        let per = 1_000u64;
        let traces = (REMEMBERED_IDS as u64 / per) + 2;
        for t in 0..traces {
            for i in 0..per {
                a.add(
                    u128::from(t) + 1,
                    node(i + 1, 0, Role::Other, 0, 1),
                    None,
                    &mut done,
                );
            }
            a.finish(&mut done);
        }
        assert!(a.ids_held <= REMEMBERED_IDS);
        assert!(
            !a.seen_before(1, span_key(1, 0, Some(1))),
            "the oldest forgotten"
        );
        assert!(a.seen_before(traces as u128, span_key(per, 0, Some(1))));
    }
}
