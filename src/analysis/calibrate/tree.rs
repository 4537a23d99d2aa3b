//! A closed trace's spans as a query: its boundary, its steps (the calls not made from inside
//! a tool), the model calls nested in tools, clock skew, and parent cycles. Linear in the
//! trace's spans: each span's ancestry is found once and kept ([`above`]), so a chain of n
//! spans costs n steps, not n²/2, and a cycle is found, not walked around.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::traces::{Node, Query, Role};

/// How far a span may stand outside its parent's time before it is counted as skewed.
const SKEW_NS: i64 = 1_000_000;

/// What is above a node in its trace: whether a tool or an agent span is among its
/// ancestors, and whether it is on or under a parent cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Above {
    tool: bool,
    agent: bool,
    cyclic: bool,
}

/// Each node's [`Above`], in one pass: every node is walked up to once, its result kept, so a
/// chain of n spans costs n steps, not n²/2; a cycle is found when a walk meets itself.
/// Returns them, the cycles found and the steps taken.
fn above(nodes: &[Node], parent: &[Option<usize>]) -> (Vec<Above>, u64, u64) {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; nodes.len()];
    let mut out = vec![Above::default(); nodes.len()];
    let (mut cycles, mut steps) = (0u64, 0u64);
    let mut path = Vec::new();
    let step = |up: Above, p: &Node| Above {
        tool: up.tool || matches!(p.role, Role::Tool(_)),
        agent: up.agent || p.role == Role::Agent,
        cyclic: up.cyclic,
    };
    for i in 0..nodes.len() {
        if state[i] != NEW {
            continue;
        }
        // Up from i until a node already known, a root, or a node of this very walk.
        let mut at = i;
        let top = loop {
            steps += 1;
            state[at] = ON_PATH;
            path.push(at);
            match parent[at] {
                None => break Above::default(),
                Some(p) if state[p] == DONE => break step(out[p], &nodes[p]),
                Some(p) if state[p] == ON_PATH => {
                    // A cycle: p and everything walked since. Each is above each of them.
                    cycles += 1;
                    let from = path.iter().rposition(|&j| j == p).unwrap_or(0);
                    let ring = Above {
                        cyclic: true,
                        ..path[from..]
                            .iter()
                            .fold(Above::default(), |up, &j| step(up, &nodes[j]))
                    };
                    for &j in &path[from..] {
                        out[j] = ring;
                        state[j] = DONE;
                    }
                    path.truncate(from);
                    break step(ring, &nodes[p]);
                }
                Some(p) => at = p,
            }
        };
        // Back down the walk: each node's parent is the one after it on the path.
        let mut up = top;
        while let Some(j) = path.pop() {
            out[j] = up;
            state[j] = DONE;
            up = step(up, &nodes[j]);
        }
    }
    (out, cycles, steps)
}

/// A closed trace's nodes as a query.
pub(super) fn query(mut nodes: Vec<Node>, session: Option<String>) -> Query {
    nodes.sort_by_key(|n| (n.start, n.end, n.id));
    let mut index: HashMap<u64, usize> = HashMap::with_capacity(nodes.len());
    let mut shared = 0;
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.id != 0) {
        // Ids not unique: the children go to the first of them.
        match index.entry(n.id) {
            Entry::Occupied(_) => shared += 1,
            Entry::Vacant(v) => {
                v.insert(i);
            }
        }
    }
    let parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|n| {
            (n.parent != 0)
                .then(|| index.get(&n.parent).copied())
                .flatten()
        })
        .collect();
    let (above, _, _) = above(&nodes, &parent);
    let placed = |i: usize| !above[i].cyclic;
    // The boundary: the outermost invoke_agent span, else the root.
    let outermost_agent =
        (0..nodes.len()).find(|&i| nodes[i].role == Role::Agent && placed(i) && !above[i].agent);
    let root = nodes.iter().position(|n| n.parent == 0);
    let boundary = outermost_agent.or(root).map(|i| nodes[i]);
    let (mut nested, mut cyclic) = (0, 0);
    let mut steps = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if !placed(i) {
            cyclic += 1;
            continue;
        }
        match n.role {
            Role::Model(_) if above[i].tool => nested += 1,
            Role::Model(_) | Role::Tool(_) if !above[i].tool => steps.push(*n),
            _ => {}
        }
    }
    let skewed = (0..nodes.len())
        .filter(|&i| {
            parent[i].is_some_and(|p| {
                let (n, p) = (&nodes[i], &nodes[p]);
                n.timed
                    && p.timed
                    && (n.start.saturating_add(SKEW_NS) < p.start
                        || n.end > p.end.saturating_add(SKEW_NS))
            })
        })
        .count() as u64;
    let (start, end) = match boundary.filter(|b| b.timed) {
        Some(b) => (b.start, b.end),
        None => (
            nodes.iter().map(|n| n.start).min().unwrap_or(0),
            nodes.iter().map(|n| n.end).max().unwrap_or(0),
        ),
    };
    Query {
        start,
        end,
        bounded: boundary.is_some_and(|b| b.timed),
        rooted: boundary.is_some(),
        session,
        steps,
        nested,
        skewed,
        cyclic,
        shared,
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

    /// The parent index of each node, as `query` finds it.
    fn parents(nodes: &[Node]) -> Vec<Option<usize>> {
        let index: HashMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        nodes
            .iter()
            .map(|n| index.get(&n.parent).copied())
            .collect()
    }

    #[test]
    fn a_deep_chain_is_walked_once_per_span_not_once_per_ancestor() {
        // H1: 200,000 spans, each the parent of the next, under a tool. Walking each one's
        // ancestors took n²/2 = 2e10 steps.
        let n = 200_000u64;
        let mut nodes = vec![
            node(1, 0, Role::Agent, 0, 1_000_000),
            node(2, 1, Role::Tool(0), 1, 999_999),
        ];
        for i in 0..n {
            let id = 3 + i;
            nodes.push(node(
                id,
                id - 1,
                Role::Model(0),
                2 + i as i64,
                999_998 - i as i64,
            ));
        }
        let (above, cycles, steps) = above(&nodes, &parents(&nodes));
        assert_eq!((cycles, steps), (0, n + 2));
        assert!(above[2..].iter().all(|a| a.tool && a.agent && !a.cyclic));
        let q = query(nodes, None);
        assert_eq!(
            (q.steps.len(), q.nested, q.cyclic, q.bounded),
            (1, n, 0, true)
        );
    }

    #[test]
    fn a_parent_cycle_is_found_once_and_what_hangs_from_it_is_not_placed() {
        // Spans 2 and 3 each other's parent, 1,000 model calls under 2, a root beside them.
        let mut nodes = vec![
            node(1, 0, Role::Agent, 0, 100),
            node(9, 1, Role::Model(0), 1, 2),
            node(2, 3, Role::Other, 0, 50),
            node(3, 2, Role::Tool(0), 0, 50),
        ];
        for i in 0..1_000 {
            nodes.push(node(10 + i, 2, Role::Model(0), 1, 3));
        }
        let (above, cycles, steps) = above(&nodes, &parents(&nodes));
        assert_eq!((cycles, steps), (1, 1_004));
        assert_eq!(
            above[2],
            Above {
                tool: true,
                agent: false,
                cyclic: true
            }
        );
        assert!(above[4..].iter().all(|a| a.cyclic && a.tool));
        let q = query(nodes, None);
        assert_eq!(q.cyclic, 1_002);
        assert_eq!(q.steps.iter().map(|n| n.id).collect::<Vec<_>>(), [9]);
        assert_eq!((q.start, q.end, q.bounded), (0, 100, true));
        // A span its own parent is a cycle of one.
        let q = query(
            vec![
                node(1, 0, Role::Agent, 0, 9),
                node(2, 2, Role::Model(0), 1, 2),
            ],
            None,
        );
        assert_eq!((q.cyclic, q.steps.len()), (1, 0));
    }
}
