//! The floor under the simulator: an engine doing nothing but timers.
//!
//! TASKS tasks each sleep one after another until absolute deadlines U[200, 900] ms apart. No
//! scheduler, provider or recorder: each sleep is the one timer a simulated call cannot do
//! without, so sleeps per second bound simulated calls per second from above. Two engines, the
//! same futures:
//!
//! - `des`: capsize-des, the engine the simulator runs on (virtual time in model units);
//! - `tokio`: tokio's paused clock on a current-thread runtime and a `LocalSet`, the engine it
//!   ran on before (at its 1000x time scale, so its 1 ms tick was a model microsecond).
//!
//! `cargo bench --bench engine_floor -- [des|tokio|both] [SLEEPS] [TASKS]`
//! (defaults: both, 1,000,000 sleeps, 40 tasks: the pool-40 benchmark's calls in flight).
//! Prints one line per engine: sleeps, wall seconds, sleeps per wall second.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // wall time is the output

use std::time::Duration;

use capsize_des::Executor;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// The gap before task `k`'s next deadline, in nanoseconds of model time.
fn gap_ns(rng: &mut Xoshiro256PlusPlus) -> u64 {
    let ms: f64 = rng.random_range(200.0..900.0);
    (ms * 1e6) as u64
}

fn on_des(sleeps: u64, tasks: u64) {
    let exec = Executor::new();
    let h = exec.handle();
    exec.block_on(async move {
        let all: Vec<_> = (0..tasks)
            .map(|k| {
                let h = h.clone();
                h.clone().spawn(async move {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(k);
                    let mut at = 0;
                    for _ in 0..sleeps / tasks {
                        at += gap_ns(&mut rng);
                        h.sleep_until_ns(at).await;
                    }
                })
            })
            .collect();
        for t in all {
            t.await;
        }
    })
    .expect("timers only: the run cannot stall");
}

fn on_tokio(sleeps: u64, tasks: u64) {
    /// The scale the simulator ran at on tokio's paused clock.
    const SCALE: u32 = 1000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(tokio::task::LocalSet::new().run_until(async {
        let all: Vec<_> = (0..tasks)
            .map(|k| {
                tokio::task::spawn_local(async move {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(k);
                    let mut at = tokio::time::Instant::now();
                    for _ in 0..sleeps / tasks {
                        at += Duration::from_nanos(gap_ns(&mut rng)) * SCALE;
                        tokio::time::sleep_until(at).await;
                    }
                })
            })
            .collect();
        for t in all {
            t.await.expect("sleeper");
        }
    }));
}

/// An engine's run of `sleeps` sleeps over `tasks` tasks.
type Engine = fn(u64, u64);

fn main() {
    // `cargo bench` passes `--bench`: skip flags.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let engine = args.first().map_or("both", String::as_str);
    let number =
        |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (sleeps, tasks) = (number(1, 1_000_000), number(2, 40).max(1));
    let engines: &[(&str, Engine)] = match engine {
        "des" => &[("des", on_des)],
        "tokio" => &[("tokio", on_tokio)],
        "both" => &[("des", on_des), ("tokio", on_tokio)],
        other => {
            eprintln!("engine_floor: unknown engine {other:?} (des, tokio or both)");
            std::process::exit(2);
        }
    };
    for (name, run) in engines {
        let wall = std::time::Instant::now();
        run(sleeps, tasks);
        let secs = wall.elapsed().as_secs_f64();
        let done = sleeps / tasks * tasks;
        println!(
            "{name:<6} floor: {done} sleeps in {secs:.3} s = {:.0} sleeps/s ({tasks} tasks)",
            done as f64 / secs
        );
    }
}
