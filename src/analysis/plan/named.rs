//! The arithmetic of a whole scenario: [`plan`](super::plan)'s rows for one provider, and for
//! an agent whose model and tools sit behind several, the same questions asked of each
//! provider against what a query asks of it, then the query ceiling over all of them (which
//! limit of which provider binds) and the requests in flight it takes to reach it.

use super::demand::{calls_per_round, Demand};
use super::{plan, Key, LimitKind, PlanInput, Row};
use crate::engine::scenario::Scenario;
use crate::fmt::fmt_num;

/// Every row of `s`'s arithmetic: the one-provider rows of [`plan`], with the split limits'
/// ceilings and a query's least time when it is more than one round; for named providers, the
/// rows of each provider and the query ceiling over all of them.
pub fn plan_scenario(s: &Scenario) -> Vec<Row> {
    let demand = Demand::of(s);
    let mut rows = if s.named_providers {
        per_provider(s, &demand)
    } else {
        let mut rows = plan(&PlanInput::from_scenario(s));
        for c in demand
            .ceilings
            .iter()
            .filter(|c| matches!(c.kind, LimitKind::Itpm | LimitKind::Otpm))
        {
            ceiling_row(&mut rows, c, s.scheduler.headroom);
        }
        rows
    };
    floor(s, &demand, &mut rows);
    rows
}

/// Whether a query is more than one round of tool calls: then E[max of n] is a round's time,
/// not a query's.
pub fn multi_step(s: &Scenario) -> bool {
    let w = &s.workload;
    w.rounds > 1
        || w.model_turn.as_ref().is_some_and(|t| t.turns(w.rounds) > 0)
        || w.subagents.is_some()
}

/// A query's least time, when it is more than one round.
fn floor(s: &Scenario, demand: &Demand, rows: &mut Vec<Row>) {
    if !multi_step(s) || demand.floor_ms <= 0.0 {
        return;
    }
    let w = &s.workload;
    let turns = w.model_turn.as_ref().map_or(0, |t| t.turns(w.rounds));
    let mut parts = vec![format!(
        "{} round{} × E[max of {}]",
        w.rounds,
        if w.rounds == 1 { "" } else { "s" },
        fmt_num(calls_per_round(s))
    )];
    if turns > 0 {
        parts.push(format!(
            "{turns} model turn{}",
            if turns == 1 { "" } else { "s" }
        ));
    }
    if w.subagents.is_some_and(|a| a.synthesis_tokens > 0) {
        parts.push("a synthesis".into());
    }
    row!(rows; QueryFloorMs => demand.floor_ms, "ms";
        "Least query time (no waiting)"; "{}", parts.join(" + "));
}

/// The rows of one ceiling: the queries per minute its limit lets through, and at headroom.
fn ceiling_row(rows: &mut Vec<Row>, c: &super::Ceiling, headroom: f64) {
    let f = fmt_num;
    let provider = (!c.provider.is_empty()).then(|| c.provider.clone());
    let n = rows.len();
    match c.kind {
        LimitKind::Concurrency => {
            row!(rows; LimitQueriesPerMin => c.queries_per_min, "queries/min";
            "{} slots at {} s of service per query", f(c.limit), f(c.per_query);
            "{} / {} × 60", f(c.limit), f(c.per_query))
        }
        k => row!(rows; LimitQueriesPerMin => c.queries_per_min, "queries/min";
            "{}: queries at {} {}/query", c.name(), f(c.per_query), k.unit();
            "{} / {}", f(c.limit), f(c.per_query)),
    }
    if c.gated && headroom < 1.0 {
        row!(rows; LimitQueriesPerMinAtHeadroom => c.at_headroom, "queries/min";
            "{}: at {} % headroom", c.name(), f(headroom * 100.0);
            "{} × {}", f(headroom), f(c.queries_per_min));
    }
    for row in &mut rows[n..] {
        row.provider.clone_from(&provider);
        row.limit = Some(c.kind);
    }
}

/// Named providers: what a query asks of each, each limit's ceiling (lowest first), the query
/// ceiling, and the requests in flight it takes; then a round's fan-out.
fn per_provider(s: &Scenario, demand: &Demand) -> Vec<Row> {
    let f = fmt_num;
    let mut rows = Vec::new();
    for l in &demand.loads {
        let n = rows.len();
        let tools = l.requests - l.model_turns;
        let formula = match (tools > 0.0, l.model_turns > 0.0) {
            (true, true) => format!("{} tool calls + {} model turns", f(tools), f(l.model_turns)),
            (false, true) => format!("{} model turns", f(l.model_turns)),
            _ => format!("{} tool calls", f(tools)),
        };
        row!(rows; RequestsPerQuery => l.requests, "requests";
            "{}: requests per query", l.name; "{}", formula);
        if l.tokens > 0.0 {
            row!(rows; TokensPerQuery => l.tokens, "tokens";
                "{}: tokens per query", l.name;
                "{} requests × {} tokens", f(l.requests), f(l.tokens / l.requests));
        }
        for row in &mut rows[n..] {
            row.provider = Some(l.name.clone());
        }
    }
    for c in &demand.ceilings {
        ceiling_row(&mut rows, c, s.scheduler.headroom);
    }
    if let Some(b) = demand.binding() {
        let all: Vec<String> = demand.ceilings.iter().map(|c| f(c.at_headroom)).collect();
        let at = if s.scheduler.headroom < 1.0 {
            format!(" at {} % headroom", f(s.scheduler.headroom * 100.0))
        } else {
            String::new()
        };
        row!(rows; QueriesPerMinAtHeadroom => b.at_headroom, "queries/min";
            "Query ceiling{at} ({} binds)", b.name(); "min({})", all.join(", "));
        let busy = demand.busy_s();
        row!(rows; RequestsInFlightAtCeiling => b.at_headroom / 60.0 * busy, "requests";
            "Requests in flight at the query ceiling (L = λ·W)";
            "{} / 60 × {} s", f(b.at_headroom), f(busy));
    }
    for ph in &demand.phases {
        let when = match ph.to_s {
            Some(to) => format!("{}–{} s", f(ph.from_s), f(to)),
            None => format!("from {} s", f(ph.from_s)),
        };
        let n = rows.len();
        match &ph.binding {
            Some(b) => row!(rows; PhaseQueriesPerMin => b.at_headroom, "queries/min";
            "While {}'s phase {when} holds: query ceiling ({} {} binds)",
            ph.provider, b.name(), f(b.limit);
            "{} / {}{}", f(b.limit), f(b.per_query),
            if b.gated && s.scheduler.headroom < 1.0 {
                format!(" × {}", f(s.scheduler.headroom))
            } else {
                String::new()
            }),
            None => row!(rows; PhaseQueriesPerMin => 0.0, "queries/min";
                "While {}'s phase {when} holds: query ceiling (an outage)", ph.provider;
                "every request fails"),
        }
        for row in &mut rows[n..] {
            row.provider = Some(ph.provider.clone());
            row.limit = ph.binding.as_ref().map(|b| b.kind);
        }
    }
    let n = calls_per_round(s);
    if n >= 1.0 && demand.round_ms > 0.0 {
        let mixed = s.workload.tools.len() > 1;
        let how = if mixed {
            "≈ over the tools' latencies by weight (fixed-seed draws)"
        } else {
            "each at its tool's latency"
        };
        row!(rows; FanoutExpectedMaxMs => demand.round_ms, "ms";
            "A round's {} calls in parallel: E[max of {}]", f(n), f(n); "{}", how);
    }
    rows
}
