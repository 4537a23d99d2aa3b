//! The simulator's workload features: a user stop, subagent budgets, the per-turn cap, model
//! turns, think time, and the watchdog. (Parent timeouts with and without transport
//! cancellation run on both clocks in tests/realtime.rs.)

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim::{self, SimError};
use capsize::api::summary::Summary;

fn scenario(toml: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    parse(toml, Path::new("test.toml"), &sets).unwrap_or_else(|e| panic!("{e}"))
}

/// Summary latencies come from HDR histograms kept to 3 significant digits: equal within 0.1 %.
fn assert_close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= want * 1e-3,
        "{got} is not {want} (within 0.1 %)"
    );
}

fn summary(s: &Scenario) -> Summary {
    Summary::new(s, &sim::run(s).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn a_user_stop_cancels_what_is_in_flight_and_starts_nothing_after() {
    let s = scenario(
        r#"
        name = "stop"
        [provider]
        latency = { dist = "constant", ms = 1000 }
        [workload]
        sessions = 2
        queries = 1000
        calls_per_query = 2
        tokens_per_call = 1
        stop_at_s = 10.5
        "#,
        &[],
    );
    let out = sim::run(&s).unwrap();
    // Each session finishes one query a second: 10 each by 10 s; the 11th of each is stopped.
    assert_eq!(out.recording.queries_completed, 20);
    assert_eq!(out.recording.queries_abandoned, 2);
    assert_eq!(out.queries_started, 22);
    assert_eq!(out.recording.calls.cancelled, 4);
    assert!(
        out.recording.series.bins.len() <= 11,
        "arrivals after the stop"
    );
}

#[test]
fn subagents_spend_at_most_their_budgets() {
    // Orchestrator 50k; 3 subagents of 15k each, 4 rounds of 3 calls x 1,500 tokens: a subagent
    // would need 18k, so each is stopped once its 15k is spent (10 calls fit, the 11th is refused).
    let s = scenario(
        r#"
        name = "budgets"
        [provider]
        latency = { dist = "constant", ms = 100 }
        [workload]
        queries = 10
        calls_per_query = 3
        tokens_per_call = 1500
        rounds = 4
        [workload.subagents]
        count = 3
        budget_tokens = 15000
        orchestrator_budget = 50000
        synthesis_tokens = 5000
        "#,
        &[],
    );
    let sum = summary(&s);
    // Per query: 3 x 10 calls x 1,500 = 45k for the subagents, then 5k for the synthesis.
    assert_eq!(sum.provider.counters.tokens_charged, 10 * (45_000 + 5_000));
    assert_eq!(sum.provider.counters.received, 10 * (3 * 10 + 1));
    assert!(sum.budget_exhausted >= 10 * 3, "{}", sum.budget_exhausted);
    assert_eq!(sum.queries_failed, 10);
    // The grants were reserved: each synthesis found exactly 50k - 3 x 15k left, and ran.
    let synth = sum.synthesis.expect("a synthesis summary");
    assert_eq!((synth.attempted, synth.refused), (10, 0));
    assert_eq!(
        (synth.left_tokens_mean, synth.left_tokens_min),
        (5000.0, 5000)
    );
}

#[test]
fn a_synthesis_larger_than_what_is_left_is_refused() {
    // 2 subagents of 20k from 40k leave nothing for a 1k synthesis once they spend it all.
    let s = scenario(
        r#"
        name = "refused"
        [provider]
        latency = { dist = "constant", ms = 100 }
        [workload]
        queries = 4
        calls_per_query = 1
        tokens_per_call = 10000
        rounds = 2
        [workload.subagents]
        count = 2
        budget_tokens = 20000
        orchestrator_budget = 40000
        synthesis_tokens = 1000
        "#,
        &[],
    );
    let synth = summary(&s).synthesis.expect("a synthesis summary");
    assert_eq!((synth.attempted, synth.refused), (4, 4));
    assert_eq!((synth.left_tokens_mean, synth.left_tokens_min), (0.0, 0));
}

#[test]
fn an_iteration_cap_stops_a_subagent_after_its_turns() {
    let s = scenario(
        r#"
        name = "iterations"
        [provider]
        latency = { dist = "constant", ms = 100 }
        [workload]
        queries = 5
        calls_per_query = 2
        tokens_per_call = 10
        rounds = 5
        [workload.subagents]
        count = 2
        budget_tokens = 1000000
        orchestrator_budget = 10000000
        max_iterations = 3
        "#,
        &[],
    );
    // 5 queries x 2 subagents x 3 turns x 2 calls.
    assert_eq!(summary(&s).provider.counters.received, 60);
}

#[test]
fn the_turn_cap_and_model_turns_shape_a_query() {
    let base = r#"
        name = "turns"
        [provider]
        latency = { dist = "constant", ms = 350 }
        [workload]
        queries = 10
        calls_per_query = 30
        tokens_per_call = 10
        rounds = 2
        model_turn = { tokens = 100, latency = { dist = "constant", ms = 1000 } }
        [scheduler]
        max_parallel_tools = 8
        "#;
    let truncate = summary(&scenario(base, &["scheduler.over_cap=truncate"]));
    // Per query: round 1 (350 ms), the model turn (1 s), round 2 (350 ms); 22 not run a round.
    assert_close(truncate.latency_ms.query.max, 1700.0);
    assert_eq!(truncate.not_run, 10 * 2 * 22);
    assert_eq!(truncate.provider.counters.received, 10 * (2 * 8 + 1));
    let batch = summary(&scenario(base, &["scheduler.over_cap=batch"]));
    // 4 batches of 350 ms a round.
    assert_close(batch.latency_ms.query.max, 2.0 * 1400.0 + 1000.0);
    assert_eq!(batch.not_run, 0);
}

#[test]
fn model_turns_around_rounds_are_the_agent_loop() {
    let base = r#"
        name = "around"
        [provider]
        latency = { dist = "constant", ms = 350 }
        [workload]
        queries = 10
        calls_per_query = 2
        tokens_per_call = 10
        rounds = 3
        model_turn = { tokens = 100, latency = { dist = "constant", ms = 1000 } }
        "#;
    let between = summary(&scenario(base, &[]));
    // 3 rounds of 350 ms, a model turn between each two: 2 turns of 1 s.
    assert_close(between.latency_ms.query.max, 3.0 * 350.0 + 2.0 * 1000.0);
    assert_eq!(between.provider.counters.received, 10 * (3 * 2 + 2));
    let around = summary(&scenario(base, &["workload.model_turn.at=around"]));
    // A turn before each round and one to answer: 4 turns of 1 s.
    assert_close(around.latency_ms.query.max, 3.0 * 350.0 + 4.0 * 1000.0);
    assert_eq!(around.provider.counters.received, 10 * (3 * 2 + 4));
    assert_eq!(
        around.provider.counters.tokens_charged,
        10 * (3 * 2 * 10 + 4 * 100)
    );
    // One round: no turn between rounds, two around it.
    let one = summary(&scenario(
        base,
        &["workload.rounds=1", "workload.model_turn.at=around"],
    ));
    assert_close(one.latency_ms.query.max, 350.0 + 2.0 * 1000.0);
    assert_eq!(one.provider.counters.received, 10 * (2 + 2));
}

#[test]
fn think_time_spaces_a_sessions_queries() {
    let s = scenario(
        r#"
        name = "think"
        [provider]
        latency = { dist = "constant", ms = 500 }
        [workload]
        queries = 10
        calls_per_query = 1
        tokens_per_call = 1
        think_time = { dist = "constant", ms = 1500 }
        "#,
        &[],
    );
    let sum = summary(&s);
    // Ten queries of 0.5 s with 1.5 s between them: the last ends at 9 x 2 + 0.5 s.
    assert_eq!(sum.virtual_seconds, 18.5);
    assert_close(sum.latency_ms.query.max, 500.0);
}

#[test]
fn a_run_past_the_horizon_is_an_error_not_a_hang() {
    let s = scenario(
        r#"
        name = "forever"
        [provider]
        latency = { dist = "constant", ms = 1 }
        [workload]
        queries = 100
        calls_per_query = 1
        tokens_per_call = 1
        think_time = { dist = "constant", ms = 1e10 }
        "#,
        &[],
    );
    assert!(matches!(sim::run(&s), Err(SimError::Watchdog(_))));
}
