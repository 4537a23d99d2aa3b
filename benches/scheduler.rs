//! Scheduler overhead per call, on a real (not paused) tokio clock.
//!
//! - `bare`: the attempt future alone, awaited in a loop: the floor to subtract.
//! - `uncontended`: one caller, semaphore + RPM and TPM buckets (never empty) + an observer that
//!   counts every event, no retry.
//! - `contended_64`: 64 tasks on a 2-worker runtime sharing one scheduler with 8 permits; each
//!   attempt yields once, so permits are held across a task switch and callers queue for them.
//!
//! Run: `cargo bench --bench scheduler`. Each figure is time per call (total / calls).
#![allow(clippy::disallowed_types, clippy::disallowed_methods)] // benchmarks time with std's clock

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capsize::scheduler::{
    CallSpec, Event, Limit, LimiterConfig, ProviderError, Scheduler, SchedulerConfig,
};
use criterion::{criterion_group, criterion_main, Criterion};

fn scheduler(max_concurrency: usize, events: Arc<AtomicU64>) -> Scheduler {
    let config = SchedulerConfig {
        max_concurrency,
        limits: Some(LimiterConfig {
            // Limits far above what a benchmark can send: the buckets are exercised, never empty.
            requests: Some(Limit::per_minute(1e15).with_burst(1e12)),
            tokens: Some(Limit::per_minute(1e18).with_burst(1e15)),
            headroom: 1.0,
        }),
        ..SchedulerConfig::default()
    };
    let observer = move |_: &Event| {
        events.fetch_add(1, Ordering::Relaxed);
    };
    Scheduler::builder(config)
        .observer(Arc::new(observer))
        .build()
        .expect("benchmark config is valid")
}

async fn attempt() -> Result<u64, ProviderError> {
    Ok(black_box(1))
}

fn overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("per_call");
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(attempt().await.ok());
                }
                start.elapsed()
            })
        })
    });
    let events = Arc::new(AtomicU64::new(0));
    let s = scheduler(64, events.clone());
    g.bench_function("uncontended", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(s.call(CallSpec::new(100), |_| attempt()).await.ok());
                }
                start.elapsed()
            })
        })
    });
    assert!(
        events.load(Ordering::Relaxed) > 0,
        "the observer saw the calls"
    );

    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("runtime");
    let s = scheduler(8, Arc::new(AtomicU64::new(0)));
    g.bench_function("contended_64", |b| {
        b.iter_custom(|iters| {
            let per_task = iters.div_ceil(64);
            let s = s.clone();
            mt.block_on(async move {
                let start = Instant::now();
                let tasks: Vec<_> = (0..64)
                    .map(|_| {
                        let s = s.clone();
                        tokio::spawn(async move {
                            for _ in 0..per_task {
                                let r = s
                                    .call(CallSpec::new(100), |_| async {
                                        tokio::task::yield_now().await;
                                        attempt().await
                                    })
                                    .await;
                                black_box(r.ok());
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.expect("task");
                }
                // Scale to the `iters` criterion asked for.
                start
                    .elapsed()
                    .mul_f64(iters as f64 / (per_task * 64) as f64)
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = overhead
}
criterion_main!(benches);
