//! capsize-des in three runs: timers that make a virtual day pass at once; the tie rule (at
//! one instant, first armed, first woken); and an M/M/1 queue at 80 % load, customers as
//! tasks and the server as tokio's runtime-agnostic semaphore, against its closed form.
//! `cargo run -p capsize-des --example timers`

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // wall time, to show the speed

use capsize_des::Executor;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
const CUSTOMERS: u32 = 100_000;
/// An exponential draw of mean `mean` seconds.
fn exp(rng: &mut Xoshiro256PlusPlus, mean: f64) -> Duration {
    Duration::from_secs_f64(-mean * (1.0 - rng.random::<f64>()).ln())
}

fn main() {
    // 1. A day of hourly timers: the clock jumps from one to the next.
    let exec = Executor::new();
    let h = exec.handle();
    let wall = Instant::now();
    let ended = exec.block_on(async move {
        for _ in 0..24 {
            h.sleep(Duration::from_secs(3_600)).await;
        }
        h.now()
    });
    let (hours, wall) = (
        ended.expect("never stalls").as_secs() / 3600,
        wall.elapsed(),
    );
    println!("24 hourly sleeps: virtual {hours} h, in {wall:?} of wall time");

    // 2. Three tasks arm timers for the same instant, in the order c, a, b: they wake so.
    let exec = Executor::new();
    let h = exec.handle();
    let order = Rc::new(RefCell::new(Vec::new()));
    let woken = order.clone();
    exec.block_on(async move {
        let tasks: Vec<_> = ["c", "a", "b"]
            .into_iter()
            .map(|name| {
                let (h2, order) = (h.clone(), woken.clone());
                h.spawn(async move {
                    h2.sleep_until_ns(1_000_000).await;
                    order.borrow_mut().push((name, h2.now()));
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    })
    .expect("never stalls");
    println!("woken at one instant, in arming order: {:?}", order.take());

    // 3. M/M/1: arrivals every 1.25 s on average, service 1 s on average (load 0.8). The
    // closed form of the mean wait in the queue is load / (rate of service - rate of arrivals)
    // = 0.8 / (1 - 0.8) = 4 s.
    let exec = Executor::new();
    let h = exec.handle();
    let wall = Instant::now();
    let (waited, span) = exec
        .block_on(async move {
            let server = Rc::new(Semaphore::new(1));
            let total_wait = Rc::new(RefCell::new(Duration::ZERO));
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
            let mut customers = Vec::new();
            for _ in 0..CUSTOMERS {
                h.sleep(exp(&mut rng, 1.25)).await;
                let (h2, server, total) = (h.clone(), server.clone(), total_wait.clone());
                let service = exp(&mut rng, 1.0);
                customers.push(h.spawn(async move {
                    let arrived = h2.now();
                    let _permit = server.acquire().await.expect("never closed");
                    *total.borrow_mut() += h2.now() - arrived;
                    h2.sleep(service).await;
                }));
            }
            for c in customers {
                c.await;
            }
            (total_wait.take(), h.now())
        })
        .expect("never stalls");
    let mean = waited.as_secs_f64() / f64::from(CUSTOMERS);
    println!(
        "M/M/1 at load 0.8, {CUSTOMERS} customers: mean wait {mean:.2} s (closed form 4.00 s), \
         {:.1} virtual days in {:?} of wall time",
        span.as_secs_f64() / 86_400.0,
        wall.elapsed()
    );
}
