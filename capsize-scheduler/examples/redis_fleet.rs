//! A fleet on one API key: four replicas, each its own scheduler and its own Redis
//! connection, keep one limit of 1,200 RPM between them (20 a second, a burst of 20) through
//! `limit::shared` (feature `redis`). 60 calls: the fleet's burst at once, then one every
//! 50 ms. Beside it, the common mistake: each replica's in-process limiter at the whole limit
//! lets all 60 go at once, three times the burst. Real time, about 2 s.
//! `cargo run -p capsize-scheduler --features redis --example redis_fleet [-- redis://HOST:PORT]`
//! (or `CAPSIZE_REDIS_URL`; default `redis://127.0.0.1:6379`).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time and a real Redis

use capsize_scheduler::limit::shared::RedisBuckets;
use capsize_scheduler::{
    CallSpec, Limit, LimiterConfig, ProviderError, RateLimiter, Scheduler, SchedulerConfig,
};
use futures_util::future::join_all;
use std::time::Duration;
use tokio::time::Instant;

const REPLICAS: usize = 4;
const CALLS_EACH: usize = 15;

fn limit() -> LimiterConfig {
    LimiterConfig {
        requests: Some(Limit::per_minute(1_200.0)),
        tokens: None,
        headroom: 1.0,
    }
}

/// Sends every replica's calls at once; returns when each was sent, in ms, sorted.
async fn send_times(replicas: &[Scheduler]) -> Vec<f64> {
    let t0 = Instant::now();
    let calls = replicas.iter().flat_map(|s| {
        (0..CALLS_EACH).map(move |_| {
            s.call(CallSpec::new(0), move |_| async move {
                Ok::<_, ProviderError>(t0.elapsed().as_secs_f64() * 1000.0)
            })
        })
    });
    let mut sent: Vec<f64> = join_all(calls)
        .await
        .into_iter()
        .map(|r| r.expect("sent"))
        .collect();
    sent.sort_by(f64::total_cmp);
    sent
}

fn report(what: &str, sent: &[f64]) {
    let at_once = sent.iter().filter(|&&ms| ms < 20.0).count();
    let last = sent.last().copied().unwrap_or(0.0);
    println!(
        "{what}: {at_once} of {} sent at once, the last at {last:.0} ms",
        sent.len()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("CAPSIZE_REDIS_URL").ok())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_string());
    // One limit, named per run so that an earlier run's debt is not this one's.
    let name = format!("llm-{}", std::process::id());
    let mut shared = Vec::new();
    for _ in 0..REPLICAS {
        let timeout = Duration::from_millis(250);
        let buckets = match RedisBuckets::connect(&url, "example", &name, &limit(), timeout).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!("redis_fleet: cannot reach Redis at {url}: {e}");
                std::process::exit(2);
            }
        };
        // While Redis does not answer, each replica falls back to 1/REPLICAS of the limit.
        let limiter = RateLimiter::shared(buckets, &limit(), REPLICAS, Default::default());
        let scheduler = Scheduler::builder(SchedulerConfig::default())
            .limiters(Some(limiter.expect("a valid limit")), Vec::new())
            .build();
        shared.push(scheduler.expect("a valid scheduler"));
    }
    println!("{REPLICAS} replicas x {CALLS_EACH} calls, one limit of 1200 RPM (burst 20)");
    report("shared on Redis", &send_times(&shared).await);

    let local: Vec<Scheduler> = (0..REPLICAS)
        .map(|_| {
            let config = SchedulerConfig {
                limits: Some(limit()),
                ..SchedulerConfig::default()
            };
            Scheduler::builder(config)
                .build()
                .expect("a valid scheduler")
        })
        .collect();
    report("local limiters ", &send_times(&local).await);
}
