//! Budgets: the article's orchestrator gives three subagents 15,000 tokens each from its
//! 50,000; each spends its own in calls of 2,000 tokens until the budget refuses the next one
//! (before it is sent). What each left is returned to the orchestrator, whose synthesis turn
//! then has what the subagents did not use. An iteration cap stops a looping subagent.
//! `cargo run -p capsize-scheduler --example budgets`
#![allow(clippy::disallowed_methods)] // tokio's paused clock, on purpose
use std::time::Duration;

use capsize_scheduler::{
    Budget, CallError, CallSpec, FanOut, Interrupt, ProviderError, Scheduler, SchedulerConfig,
    Scope,
};
use tokio::time::sleep;

/// A subagent: calls of `tokens` each, one after another, until its budget stops it.
/// Returns the calls it made and why it stopped.
async fn subagent(s: &Scheduler, scope: Scope, tokens: u64) -> (u32, String) {
    let mut calls = 0;
    loop {
        // An agent loop counts its iterations on its budget (the cap, if any, stops it).
        if let Some(budget) = scope.budget() {
            if let Err(spent) = budget.start_iteration() {
                return (calls, spent.to_string());
            }
        }
        let spec = CallSpec::new(tokens).in_scope(&scope);
        let answer = s.call(spec, |_| async {
            sleep(Duration::from_millis(300)).await;
            Ok::<_, ProviderError>(())
        });
        match answer.await {
            Ok(()) => calls += 1,
            Err(CallError::Interrupted {
                cause: Interrupt::BudgetExhausted(spent),
                ..
            }) => return (calls, spent.to_string()),
            Err(other) => return (calls, other.to_string()),
        }
    }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let scheduler = Scheduler::builder(SchedulerConfig::default())
        .build()
        .expect("valid");
    let orchestrator = Budget::new("orchestrator", 50_000, None);
    println!("orchestrator: {} tokens", orchestrator.granted());

    // Three subagents of 15,000 (clamped to what is left: zero means zero).
    let plans = [
        ("research", 15_000, None),
        ("code", 15_000, None),
        ("review", 15_000, Some(3)),
    ];
    let children: Vec<Budget> = plans
        .iter()
        .map(|&(name, tokens, cap)| orchestrator.child(name, tokens, cap))
        .collect();
    let lent: u64 = children.iter().map(Budget::granted).sum();
    let left = orchestrator.remaining();
    println!("lent to subagents: {lent}, left: {left}");
    let s = &scheduler;
    let jobs = children.iter().map(|budget| {
        let budget = budget.clone();
        move |scope: Scope| async move { subagent(s, scope.with_budget(budget), 2_000).await }
    });
    let ended = FanOut::new(&Scope::new()).gather(jobs).await;
    for ((budget, (calls, why)), (_, _, cap)) in children.iter().zip(&ended).zip(plans) {
        let cap = cap.map_or("no cap".to_string(), |c| format!("cap {c}"));
        println!(
            "  {:<8} ({cap}): {calls} calls, used {:>6}, left {:>5}: {why}",
            budget.name(),
            budget.used(),
            budget.remaining()
        );
    }

    // Dropping a child returns what it did not use to the orchestrator.
    drop(children);
    let left = orchestrator.remaining();
    println!("orchestrator after the subagents: {left} left for the synthesis");
    let synthesis = Scope::new().with_budget(orchestrator.clone());
    let turn = scheduler.call(CallSpec::new(5_000).in_scope(&synthesis), |_| async {
        Ok::<_, ProviderError>("synthesis")
    });
    match turn.await {
        Ok(what) => println!(
            "{what} of 5000 tokens sent: {} left",
            orchestrator.remaining()
        ),
        Err(e) => println!("synthesis refused: {e}"),
    }
}
