//! Adaptive concurrency (`Builder::adaptive_concurrency`, AIMD and the gradient) in virtual time against a
//! provider that serves six calls at once and answers a seventh 429: the limit climbs one
//! permit a window of successes, is halved by a 429 of an attempt sent since the last cut,
//! never leaves [min, max], and a fixed limit of six beside it gets no 429 at all. (That a
//! burst of 429s sent in one window cuts once is pinned by the unit tests in adaptive.rs.) Bad bounds are
//! refused when the scheduler is built.

#![allow(clippy::disallowed_methods)] // runs on tokio's paused clock on purpose

use std::cell::Cell;
use std::rc::Rc;

use capsize_scheduler::{
    Adaptive, Aimd, CallSpec, ConfigError, Gradient, Jitter, ProviderError, RetryPolicy, Scheduler,
    SchedulerConfig,
};
use futures_util::future::join_all;

mod common;
use common::{ms, paused_runtime};

/// 200 calls of 100 ms, all submitted at once, to a provider that serves six at a time and
/// refuses the rest with a 429 (no Retry-After); retries back off 50 ms, no jitter. Returns the
/// 429s and the time the last call ended, in ms.
async fn run(s: &Scheduler) -> (u64, u128) {
    let in_flight = Rc::new(Cell::new(0u32));
    let refused = Rc::new(Cell::new(0u64));
    let t0 = tokio::time::Instant::now();
    let calls = (0..200).map(|_| {
        let (in_flight, refused) = (in_flight.clone(), refused.clone());
        s.call(CallSpec::new(0), move |_| {
            let (in_flight, refused) = (in_flight.clone(), refused.clone());
            async move {
                if in_flight.get() >= 6 {
                    refused.set(refused.get() + 1);
                    return Err(ProviderError::rate_limited(None));
                }
                in_flight.set(in_flight.get() + 1);
                tokio::time::sleep(ms(100)).await;
                in_flight.set(in_flight.get() - 1);
                Ok(())
            }
        })
    });
    for r in join_all(calls).await {
        r.expect("every call ends served");
    }
    (refused.get(), t0.elapsed().as_millis())
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        base: ms(50),
        cap: ms(50),
        jitter: Jitter::None,
        max_retries: 100,
        ..RetryPolicy::default()
    }
}

fn aimd(initial: usize, min: usize, max: usize) -> Aimd {
    Aimd {
        initial,
        min,
        max,
        backoff: 0.5,
    }
}

#[test]
fn aimd_climbs_past_the_capacity_and_is_cut_once_a_burst() {
    paused_runtime().block_on(async {
        let config = SchedulerConfig {
            retry: policy(),
            ..SchedulerConfig::default()
        };
        let s = Scheduler::builder(config.clone())
            .adaptive_concurrency(aimd(2, 1, 16))
            .build()
            .expect("valid bounds");
        let (refused, took) = run(&s).await;
        let stats = s.concurrency_limit().expect("an adaptive limit");
        // From 2 it climbs to 7, one past the capacity, is refused and halves, climbs again:
        // 14 429s, each from an attempt sent after the last cut, so each cuts (down to 1 once,
        // when a retry sent after a cut was refused again); it ends at 7. 200 calls take 4.2 s:
        // probing past the capacity costs the AIMD client 0.8 s against the right fixed limit.
        assert_eq!((refused, took), (14, 4200));
        assert_eq!(
            (stats.current, stats.min, stats.max, stats.decreases),
            (7, 1, 7, 14)
        );
        // A fixed limit of six (the capacity, were it known) is never refused: 34 waves of
        // 100 ms, 3.4 s.
        let fixed = Scheduler::builder(SchedulerConfig {
            max_concurrency: 6,
            ..config
        })
        .build()
        .unwrap();
        assert_eq!(fixed.concurrency_limit(), None);
        assert_eq!(run(&fixed).await, (0, 3400));
    });
}

#[test]
fn bounds_that_do_not_hold_together_are_refused() {
    for bad in [
        aimd(0, 0, 4),
        aimd(2, 3, 4),
        aimd(5, 1, 4),
        Aimd {
            backoff: 1.0,
            ..aimd(2, 1, 4)
        },
        Aimd {
            backoff: 0.0,
            ..aimd(2, 1, 4)
        },
    ] {
        let e = Scheduler::builder(SchedulerConfig::default())
            .adaptive_concurrency(bad)
            .build()
            .err();
        assert_eq!(e, Some(ConfigError::Adaptive(bad.into())), "{bad:?}");
    }
}

/// 200 calls of 100 ms, all submitted at once, to a provider that serves four at a time and
/// queues the rest in order (it never refuses: its answers only slow down). Returns the time
/// the last call ended and the longest any call waited in the provider's queue, in ms.
async fn run_queued(s: &Scheduler) -> (u128, u128) {
    let servers = Rc::new(tokio::sync::Semaphore::new(4));
    let worst = Rc::new(Cell::new(0u128));
    let t0 = tokio::time::Instant::now();
    let calls = (0..200).map(|_| {
        let (servers, worst) = (servers.clone(), worst.clone());
        s.call(CallSpec::new(0), move |_| {
            let (servers, worst) = (servers.clone(), worst.clone());
            async move {
                let asked = tokio::time::Instant::now();
                let _server = servers.acquire().await.expect("never closed");
                worst.set(worst.get().max(asked.elapsed().as_millis()));
                tokio::time::sleep(ms(100)).await;
                Ok::<_, ProviderError>(())
            }
        })
    });
    for r in join_all(calls).await {
        r.expect("every call ends served");
    }
    (t0.elapsed().as_millis(), worst.get())
}

#[test]
fn the_gradient_stops_growing_where_answers_slow_down_and_aimd_does_not() {
    paused_runtime().block_on(async {
        let build = |policy: Adaptive| {
            Scheduler::builder(SchedulerConfig::default())
                .adaptive_concurrency(policy)
                .build()
                .expect("valid bounds")
        };
        let gradient = build(Gradient::new(4, 1, 64).into());
        let (took, queued) = run_queued(&gradient).await;
        let g = gradient.concurrency_limit().expect("an adaptive limit");
        let aimd = build(aimd(4, 1, 64).into());
        let (aimd_took, aimd_queued) = run_queued(&aimd).await;
        let a = aimd.concurrency_limit().expect("an adaptive limit");
        // Four servers bind both: 50 waves of 100 ms.
        assert_eq!((took, aimd_took), (5000, 5000));
        // The gradient learns 100 ms in its first ten answers at four, grows while answers
        // stay within 1.5 x that, overshoots while its short-run average catches up (14),
        // and settles where a limit's root of queue balances the slowdown: 8 (8.86 on average
        // over the 5 s). AIMD, with no 429 to stop it, grows all along (20 at the end): the
        // extra calls only wait at the provider, up to 400 ms where the gradient's wait 300.
        assert_eq!((g.current, g.min, g.max, g.decreases), (8, 4, 14, 0));
        assert!((g.mean - 8.86).abs() < 1e-9, "{}", g.mean);
        assert_eq!((a.current, a.min, a.max, a.decreases), (20, 4, 20, 0));
        assert!((a.mean - 13.46).abs() < 1e-9, "{}", a.mean);
        assert_eq!((queued, aimd_queued), (300, 400));
    });
}
