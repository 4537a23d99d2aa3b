//! Token and iteration budgets: the article's orchestrator arithmetic, clamped grants (zero
//! means zero), exhaustion that stops pending calls but not in-flight ones, iteration caps that
//! reach a parent's children, and refunds for calls cancelled before they were sent.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::time::Duration;

use capsize_scheduler::{
    Budget, BudgetExhausted, CallError, CallSpec, EventKind, FanOut, Interrupt, Limit,
    LimiterConfig, ProviderError, Scheduler, SchedulerConfig, Scope, Stage,
};
use tokio::time::{sleep, Instant};

mod common;
use common::{bounded, logged as scheduler, ms};

type Res = Result<u64, CallError<ProviderError>>;

/// A call of `tokens` in `scope` whose attempt takes `latency_ms`, answering `Ok(tokens)`.
/// Returns the result and when (since `t0`) it came back.
async fn call(
    sched: &Scheduler,
    scope: &Scope,
    tokens: u64,
    latency_ms: u64,
    t0: Instant,
) -> (Res, Duration) {
    let spec = CallSpec::new(tokens).in_scope(scope);
    let result = sched
        .call(spec, |_| async move {
            sleep(ms(latency_ms)).await;
            Ok::<_, ProviderError>(tokens)
        })
        .await;
    (result, t0.elapsed())
}

fn assert_stopped(got: &(Res, Duration), stage: Stage, cause: &Interrupt, at: Duration) {
    match got {
        (Err(CallError::Interrupted { stage: s, cause: c }), t)
            if *s == stage && c == cause && *t == at => {}
        other => panic!("expected {cause:?} while {stage:?} at {at:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn the_articles_orchestrator_numbers() {
    let orchestrator = Budget::new("orchestrator", 50_000, None);
    let children: Vec<Budget> = ["research", "code", "review"]
        .into_iter()
        .map(|name| orchestrator.child(name, 15_000, None))
        .collect();
    for (child, used) in children.iter().zip([12_000, 14_000, 8_000]) {
        assert_eq!(child.granted(), 15_000);
        child.charge(used).unwrap();
    }
    assert_eq!(orchestrator.remaining(), 5_000, "45,000 is lent out");
    let left: Vec<u64> = children.iter().map(Budget::remaining).collect();
    assert_eq!(left, vec![3_000, 1_000, 7_000]);

    drop(children);
    assert_eq!(orchestrator.used(), 34_000);
    assert_eq!(orchestrator.remaining(), 16_000);
    orchestrator.charge(5_000).expect("the synthesis fits");
    assert_eq!(orchestrator.used(), 39_000);
    assert_eq!(orchestrator.remaining(), 11_000);
}

#[tokio::test]
async fn a_grant_is_clamped_to_what_is_left_and_zero_means_zero() {
    let parent = Budget::new("parent", 10_000, None);
    let first = parent.child("first", 8_000, None);
    assert_eq!(first.granted(), 8_000);
    let second = parent.child("second", 5_000, None);
    assert_eq!(
        second.granted(),
        2_000,
        "clamped to what the parent had left"
    );
    assert_eq!(parent.remaining(), 0);
    assert!(second.charge(2_000).is_ok());
    assert!(second.charge(1).is_err());

    let last = parent.child("last", 1_000, None);
    assert_eq!(last.granted(), 0);
    assert_eq!(last.remaining(), 0);
    let refusal = last.charge(1).unwrap_err();
    assert_eq!(
        refusal,
        BudgetExhausted::Tokens {
            budget: "last".into(),
            requested: 1,
            remaining: 0,
        }
    );
    assert_eq!(last.exhausted(), Some(refusal));
    assert_eq!(last.used(), 0);
}

#[tokio::test(start_paused = true)]
async fn exhaustion_stops_queued_calls_but_not_calls_in_flight() {
    let t0 = Instant::now();
    let budget = Budget::new("agent", 1_000, None);
    let scope = Scope::new().with_budget(budget.clone());
    // Tools go one at a time; the model has a scheduler of its own on the same budget.
    let (tools, log) = scheduler(bounded(1));
    let (model, _) = scheduler(bounded(0));
    let model_call = async {
        sleep(ms(200)).await;
        call(&model, &scope, 800, 50, t0).await
    };
    let (in_flight, queued_a, queued_b, refused) = tokio::join!(
        biased;
        call(&tools, &scope, 300, 1_000, t0),
        call(&tools, &scope, 300, 100, t0),
        call(&tools, &scope, 300, 100, t0),
        model_call,
    );
    let why = BudgetExhausted::Tokens {
        budget: "agent".into(),
        requested: 800,
        remaining: 700,
    };
    let cause = Interrupt::BudgetExhausted(why.clone());
    assert_stopped(&refused, Stage::Queued, &cause, ms(200));
    // The queued calls stop when the budget is spent, not when a permit frees at 1 s.
    assert_stopped(&queued_a, Stage::Queued, &cause, ms(200));
    assert_stopped(&queued_b, Stage::Queued, &cause, ms(200));
    // The call already sent is not dropped.
    assert_eq!(in_flight.0.unwrap(), 300);
    assert_eq!(in_flight.1, ms(1_000));
    assert_eq!(log.count(|k| matches!(k, EventKind::Sent { .. })), 1);
    assert_eq!(budget.used(), 300);

    let text = why.to_string();
    for part in ["agent", "800", "700"] {
        assert!(text.contains(part), "{text:?} does not name {part}");
    }
    let text = refused.0.unwrap_err().to_string();
    assert!(text.contains("'agent'") && text.contains("800"), "{text:?}");
}

#[tokio::test]
async fn an_iteration_cap_allows_exactly_cap_iterations() {
    let budget = Budget::new("loop", 10_000, Some(3));
    for n in 1..=3 {
        assert_eq!(budget.start_iteration(), Ok(n));
    }
    let capped = BudgetExhausted::Iterations {
        budget: "loop".into(),
        cap: 3,
    };
    assert_eq!(budget.start_iteration(), Err(capped.clone()));
    assert_eq!(budget.start_iteration(), Err(capped.clone()));
    assert_eq!(budget.iterations(), 3);
    assert_eq!(budget.exhausted(), Some(capped.clone()));
    assert_eq!(
        budget.charge(1),
        Err(capped),
        "an exhausted budget refuses tokens too"
    );
}

#[tokio::test(start_paused = true)]
async fn a_parents_exhaustion_cancels_a_childs_pending_work() {
    let t0 = Instant::now();
    let parent = Budget::new("orchestrator", 10_000, Some(2));
    let child = parent.child("sub", 5_000, None);
    let scope = Scope::new().with_budget(child.clone());
    let (sched, _log) = scheduler(bounded(1));
    let orchestrate = async {
        sleep(ms(300)).await;
        assert_eq!(parent.start_iteration(), Ok(1));
        assert_eq!(parent.start_iteration(), Ok(2));
        assert!(matches!(
            parent.start_iteration(),
            Err(BudgetExhausted::Iterations { cap: 2, .. })
        ));
    };
    let (in_flight, queued, ()) = tokio::join!(
        biased;
        call(&sched, &scope, 100, 1_000, t0),
        call(&sched, &scope, 100, 1_000, t0),
        orchestrate,
    );
    let why = BudgetExhausted::Parent {
        budget: "sub".into(),
    };
    let cause = Interrupt::BudgetExhausted(why.clone());
    assert_stopped(&queued, Stage::Queued, &cause, ms(300));
    assert_eq!(in_flight.0.unwrap(), 100);
    assert_eq!(in_flight.1, ms(1_000));
    assert_eq!(child.exhausted(), Some(why.clone()));
    assert_eq!(child.charge(1), Err(why));
    assert_eq!(child.used(), 100);
}

#[tokio::test(start_paused = true)]
async fn tokens_of_a_call_cancelled_before_it_was_sent_are_refunded() {
    let t0 = Instant::now();
    let budget = Budget::new("agent", 1_000, None);
    // One request now, the next at 1 s.
    let (sched, log) = scheduler(SchedulerConfig {
        limits: Some(LimiterConfig {
            requests: Some(Limit::per_minute(60.0).with_burst(1.0)),
            ..LimiterConfig::default()
        }),
        ..SchedulerConfig::default()
    });
    let fan = FanOut::new(&Scope::new().with_budget(budget.clone()));
    let cancel = async {
        sleep(ms(500)).await;
        assert_eq!(
            budget.used(),
            300,
            "both calls are charged before the limiter"
        );
        fan.cancel();
    };
    let (sent, waiting, ()) = tokio::join!(
        biased;
        call(&sched, fan.scope(), 100, 2_000, t0),
        call(&sched, fan.scope(), 200, 2_000, t0),
        cancel,
    );
    assert_stopped(&sent, Stage::InFlight, &Interrupt::Cancelled, ms(500));
    assert_stopped(&waiting, Stage::Limiter, &Interrupt::Cancelled, ms(500));
    assert_eq!(log.count(|k| matches!(k, EventKind::Sent { .. })), 1);
    // The unsent call's 200 come back; the sent call's 100 stay spent.
    assert_eq!(budget.used(), 100);
    assert_eq!(budget.remaining(), 900);
}
