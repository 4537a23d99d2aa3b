//! Adaptive concurrency: a provider that serves six calls at once and answers a seventh 429
//! (no Retry-After), and 300 calls of 100 ms submitted together. A fixed limit of 6 is the
//! right size and gets no 429; a fixed 16 is refused over and over; AIMD and the gradient
//! start at 2, find the capacity by probing past it, and pay for it in 429s. Virtual time.
//!
//! `cargo run -p capsize-scheduler --example adaptive`

#![allow(clippy::disallowed_methods)] // tokio's paused clock, on purpose

use std::cell::Cell;
use std::time::Duration;

use capsize_scheduler::{
    Adaptive, Aimd, CallSpec, Gradient, Jitter, ProviderError, RetryPolicy, Scheduler,
    SchedulerConfig,
};
use futures_util::future::join_all;
use tokio::time::{sleep, Instant};

const CALLS: usize = 300;
const CAPACITY: u32 = 6;

/// Sends every call through `s`; returns the 429s and the seconds until the last answer.
async fn run(s: &Scheduler) -> (u64, f64) {
    let (in_flight, refused) = (Cell::new(0u32), Cell::new(0u64));
    let t0 = Instant::now();
    let calls = (0..CALLS).map(|_| {
        s.call(CallSpec::new(0), |_| async {
            if in_flight.get() >= CAPACITY {
                refused.set(refused.get() + 1);
                return Err(ProviderError::rate_limited(None));
            }
            in_flight.set(in_flight.get() + 1);
            sleep(Duration::from_millis(100)).await;
            in_flight.set(in_flight.get() - 1);
            Ok(())
        })
    });
    let served = join_all(calls).await.iter().filter(|r| r.is_ok()).count();
    assert_eq!(served, CALLS, "every call is served in the end");
    (refused.get(), t0.elapsed().as_secs_f64())
}

fn scheduler(max_concurrency: usize, adaptive: Option<Adaptive>) -> Scheduler {
    // Quick retries with no jitter, so the runs are easy to compare.
    let retry = RetryPolicy {
        base: Duration::from_millis(50),
        cap: Duration::from_millis(50),
        jitter: Jitter::None,
        max_retries: 100,
        ..RetryPolicy::default()
    };
    let config = SchedulerConfig {
        max_concurrency,
        retry,
        ..SchedulerConfig::default()
    };
    let builder = Scheduler::builder(config).seed(7);
    match adaptive {
        Some(policy) => builder.adaptive_concurrency(policy),
        None => builder,
    }
    .build()
    .expect("a valid configuration")
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    println!("{CALLS} calls of 100 ms to a provider serving {CAPACITY} at once (the rest: 429)");
    let aimd = Aimd {
        initial: 2,
        min: 1,
        max: 32,
        backoff: 0.5,
    };
    let gradient = Gradient::new(2, 1, 32);
    let runs: [(&str, usize, Option<Adaptive>); 4] = [
        ("fixed 6", 6, None),
        ("fixed 16", 16, None),
        ("aimd", 32, Some(aimd.into())),
        ("gradient", 32, Some(gradient.into())),
    ];
    for (name, max, policy) in runs {
        let s = scheduler(max, policy);
        let (refused, secs) = run(&s).await;
        let limit = match s.concurrency_limit() {
            Some(l) => format!(
                "limit mean {:.1}, min {}, max {}, {} cuts, ends at {}",
                l.mean, l.min, l.max, l.decreases, l.current
            ),
            None => "fixed".to_string(),
        };
        println!("  {name:<9} {refused:>4} 429s, done in {secs:.1} s; {limit}");
    }
    println!("(the floor: {CALLS} / {CAPACITY} waves of 0.1 s = 5.0 s)");
}
