//! Reservations per second on the Redis-backed limiter (one `EVALSHA` round trip each) with
//! 1, 8 and 64 callers in flight on one multiplexed connection, against a `redis-server` it
//! starts on a free port (and stops).
//!
//! Run: `cargo bench -p capsize-scheduler --features redis --bench redis_reservations`.
//! Prints, per number of callers, the median of five 2-second rounds, and the median
//! round-trip time per reservation seen by one caller.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capsize_scheduler::limit::shared::RedisBuckets;
use capsize_scheduler::{Limit, LimiterConfig};

const ROUND: Duration = Duration::from_secs(2);
const ROUNDS: usize = 5;

fn main() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (Debian: apt-get install redis-server)");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    // A limit no caller ever waits for: what is measured is the round trip.
    let config = LimiterConfig {
        requests: Some(Limit::per_minute(1e12)),
        tokens: Some(Limit::per_minute(1e12)),
        headroom: 1.0,
    };
    let url = format!("redis://127.0.0.1:{port}");
    let buckets = rt
        .block_on(RedisBuckets::connect(
            &url,
            "bench",
            "llm",
            &config,
            Duration::from_secs(5),
        ))
        .expect("connects");
    println!(
        "{:>8} {:>16} {:>16}",
        "callers", "reservations/s", "round trip µs"
    );
    for callers in [1usize, 8, 64] {
        let mut rates = Vec::new();
        let mut trips = Vec::new();
        for _ in 0..ROUNDS {
            let (rate, trip) = rt.block_on(round(&buckets, callers));
            rates.push(rate);
            trips.push(trip);
        }
        rates.sort_by(f64::total_cmp);
        trips.sort_by(f64::total_cmp);
        println!(
            "{callers:>8} {:>16.0} {:>16.1}",
            rates[ROUNDS / 2],
            trips[ROUNDS / 2]
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// One round of `callers` reserving in a loop for [`ROUND`]: reservations per second, and the
/// mean round trip one caller saw, in µs.
async fn round(buckets: &RedisBuckets, callers: usize) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (b, done) = (buckets.clone(), done.clone());
            tokio::spawn(async move {
                let mut mine = 0u64;
                while start.elapsed() < ROUND {
                    b.reserve(100).await.expect("reserved");
                    mine += 1;
                }
                done.fetch_add(mine, Ordering::Relaxed);
                mine
            })
        })
        .collect();
    let mut first = 0;
    for (i, t) in tasks.into_iter().enumerate() {
        let n = t.await.expect("a caller");
        if i == 0 {
            first = n;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let total = done.load(Ordering::Relaxed) as f64;
    (total / secs, secs * 1e6 / first.max(1) as f64)
}
