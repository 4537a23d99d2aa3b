//! The floor under the simulator: tokio's paused clock doing nothing but timers.
//!
//! Four tasks (research-agent's `max_concurrency`) each sleep one after another until absolute
//! deadlines U[200, 900] model ms apart, at the simulator's time scale, on the same kind of
//! runtime the simulator uses (current-thread, paused, a `LocalSet`). No scheduler, provider or
//! recorder: each sleep is the one timer a simulated call cannot do without, so sleeps per
//! second bound simulated calls per second from above.
//!
//! `cargo bench --bench tokio_floor [-- SLEEPS]` (default 1,000,000).

#![allow(clippy::disallowed_methods)] // benchmarks tokio's clock and tasks on purpose

use std::time::Duration;

/// The time scale the simulator ran at on tokio's paused clock (1 ms tick = 1 model µs).
const SCALE: u32 = 1000;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep_until, Instant};

const TASKS: u64 = 4;

fn main() {
    // `cargo bench` passes `--bench`; the first numeric argument, if any, is the count.
    let sleeps: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)] // wall time is the output
    let wall = std::time::Instant::now();
    rt.block_on(tokio::task::LocalSet::new().run_until(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|k| {
                tokio::task::spawn_local(async move {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(k);
                    let mut at = Instant::now();
                    for _ in 0..sleeps / TASKS {
                        let ms: f64 = rng.random_range(200.0..900.0);
                        at += Duration::from_secs_f64(ms / 1000.0) * SCALE;
                        sleep_until(at).await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("sleeper");
        }
    }));
    let secs = wall.elapsed().as_secs_f64();
    let done = sleeps / TASKS * TASKS;
    println!(
        "tokio paused-clock floor: {done} sleeps in {secs:.2} s = {:.0} sleeps/s ({TASKS} tasks, scale {SCALE})",
        done as f64 / secs
    );
}
