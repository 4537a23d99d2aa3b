//! Fan-out: the article's research agent asks 8 sources per query, each answering in
//! U[200, 900] ms. Sequential, a semaphore of 4 and all 8 at once, on tokio's paused clock
//! (virtual time: the run takes microseconds and repeats exactly), then `as_completed` and
//! `all_or_nothing` on one turn. `cargo run -p capsize-scheduler --example fanout`

#![allow(clippy::disallowed_methods)] // tokio's paused clock, on purpose

use std::time::Duration;

use capsize_scheduler::{
    CallError, CallSpec, FanOut, ProviderError, Scheduler, SchedulerConfig, Scope,
};
use futures_util::StreamExt;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

const QUERIES: usize = 200;
const SOURCES: usize = 8;
type Answer = Result<u64, CallError<ProviderError>>;

/// One tool call that takes `ms`, through `s`, in `scope`; `fail` answers a 400.
async fn source(s: &Scheduler, scope: Scope, ms: u64, fail: bool) -> Answer {
    let spec = CallSpec::new(2_000).in_scope(&scope);
    s.call(spec, |_| async move {
        sleep(Duration::from_millis(ms)).await; // the request
        match fail {
            true => Err(ProviderError::status(400)), // not retried
            false => Ok(ms),
        }
    })
    .await
}

/// The mean query time, in ms, at `max_concurrency` (0: unbounded), same latencies each time.
async fn mean_query_ms(max_concurrency: usize) -> f64 {
    let config = SchedulerConfig {
        max_concurrency,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::builder(config).seed(1).build().expect("valid");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let t0 = Instant::now();
    for _ in 0..QUERIES {
        let latencies: Vec<u64> = (0..SOURCES).map(|_| rng.random_range(200..=900)).collect();
        let s = &scheduler;
        let jobs = latencies
            .into_iter()
            .map(|ms| move |scope| source(s, scope, ms, false));
        let results = FanOut::new(&Scope::new()).gather(jobs).await;
        assert!(results.iter().all(Result::is_ok));
    }
    t0.elapsed().as_secs_f64() * 1000.0 / QUERIES as f64
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    println!("{QUERIES} queries of {SOURCES} calls, U[200, 900] ms each, in virtual time");
    let names = ["sequential", "semaphore of 4", "all 8 at once"];
    for (name, limit) in names.into_iter().zip([1, 4, 0]) {
        let ms = mean_query_ms(limit).await;
        println!("  {name:<15} mean query {ms:>6.0} ms");
    }
    // The closed forms: 8 x 550 = 4,400 sequential; E[max of 8] = 200 + 700 x 8/9 = 822 at once;
    // two strict waves of 4 would take 2 x (200 + 700 x 4/5) = 1,520: a semaphore does better.
    println!("  closed forms: 4400 sequential, 822 all at once, 1520 for two strict waves");

    let scheduler = Scheduler::builder(SchedulerConfig::default())
        .build()
        .expect("valid");
    let s = &scheduler;
    let t0 = Instant::now();
    let turn = [700u64, 300, 500];
    let jobs = turn.map(|ms| move |scope| source(s, scope, ms, false));
    let mut stream = Box::pin(FanOut::new(&Scope::new()).as_completed(jobs));
    while let Some((i, result)) = stream.next().await {
        let at = t0.elapsed().as_millis();
        println!(
            "as_completed: call {i} answered {:?} at {at} ms",
            result.ok()
        );
    }

    let t0 = Instant::now();
    let jobs = [(900u64, false), (200, true), (400, false)]
        .map(|(ms, fail)| move |scope| source(s, scope, ms, fail));
    let outcome = FanOut::new(&Scope::new()).all_or_nothing(jobs).await;
    let at = t0.elapsed().as_millis();
    match outcome {
        Ok(values) => println!("all_or_nothing: {values:?}"),
        Err(f) => {
            let (i, why) = &f.failures[0];
            println!(
                "all_or_nothing: call {i} failed ({why}); cancelled {:?}; back at {at} ms",
                f.cancelled
            );
        }
    }
}
