//! How late timers end: tokio's `sleep_until` against `capsize_timer::sleep_until`, on one
//! current-thread runtime (as capsize's real-time client and mock use them).
//!
//! Run: `cargo bench -p capsize-timer --bench lateness`. Prints the median, 90th and 99th
//! percentile lateness in µs (negative: early) and how many of the timers ended before their
//! deadline, for one timer at a time at three delays, and for 64 tasks waiting at once with
//! deadlines spread over 0-20 ms.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::future::Future;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

const ROUNDS: usize = 400;

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "{:<34} {:>8} {:>8} {:>8} {:>6}",
        "timer, delay", "p50 µs", "p90 µs", "p99 µs", "early"
    );
    for delay_us in [500, 3_000, 20_000] {
        let d = Duration::from_micros(delay_us);
        let tokio = rt.block_on(one_at_a_time(d, tokio::time::sleep_until));
        let fine = rt.block_on(one_at_a_time(d, capsize_timer::sleep_until));
        row(&format!("tokio, {delay_us} µs"), tokio);
        row(&format!("capsize-timer, {delay_us} µs"), fine);
    }
    let tokio = rt.block_on(together(tokio::time::sleep_until));
    let fine = rt.block_on(together(capsize_timer::sleep_until));
    row("tokio, 64 at once", tokio);
    row("capsize-timer, 64 at once", fine);
}

async fn one_at_a_time<S, F>(delay: Duration, sleep: S) -> Vec<f64>
where
    S: Fn(Instant) -> F,
    F: Future<Output = ()>,
{
    let mut late = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let deadline = Instant::now() + delay;
        sleep(deadline).await;
        late.push(lateness(deadline));
    }
    late
}

async fn together<S, F>(sleep: S) -> Vec<f64>
where
    S: Fn(Instant) -> F + Clone + 'static,
    F: Future<Output = ()> + 'static,
{
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
    let local = tokio::task::LocalSet::new();
    let mut late = Vec::new();
    for _ in 0..ROUNDS / 8 {
        let start = Instant::now();
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let deadline = start + Duration::from_micros(rng.random_range(0..20_000));
                let sleep = sleep.clone();
                local.spawn_local(async move {
                    sleep(deadline).await;
                    lateness(deadline)
                })
            })
            .collect();
        for t in tasks {
            late.push(local.run_until(t).await.expect("a task"));
        }
    }
    late
}

/// How long after `deadline` it is now, in µs; negative if it has not come yet (a timer that
/// ended early).
fn lateness(deadline: Instant) -> f64 {
    let now = Instant::now();
    match now.checked_duration_since(deadline) {
        Some(late) => late.as_secs_f64() * 1e6,
        None => -(deadline - now).as_secs_f64() * 1e6,
    }
}

fn row(name: &str, mut late: Vec<f64>) {
    late.sort_by(f64::total_cmp);
    let at = |q: f64| late[((late.len() - 1) as f64 * q).round() as usize];
    let early = late.iter().filter(|&&l| l < 0.0).count();
    println!(
        "{name:<34} {:>8.1} {:>8.1} {:>8.1} {early:>6}",
        at(0.5),
        at(0.9),
        at(0.99)
    );
}
