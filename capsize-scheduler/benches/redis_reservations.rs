//! Reservations per second on the Redis-backed limiter (one `EVALSHA` round trip carries
//! those asked while the one before was under way) with 1, 8 and 64 callers in flight on one
//! multiplexed connection, against a `redis-server` it starts on a free port (and stops).
//!
//! Run: `cargo bench -p capsize-scheduler --features redis --bench redis_reservations`.
//! Prints, per number of callers, the median of five 2-second rounds, the median round trip
//! one caller saw, and the most calls seen in flight at once (each caller is a task of its
//! own on a multi-threaded runtime, so 64 callers are 64 requests in flight). Then, for
//! comparison, the same rounds on a script that only returns (`return 0`) through a
//! connection set up the same way and the same timeout wrapper: the client's own ceiling.
//! Each line also gives the server's CPU time per call (`INFO commandstats`: the time in
//! `EVALSHA`, over the calls made).
//! Last, if `redis-benchmark` is installed, its `EVAL` of a one-call script (`TIME`) with 1
//! and 64 clients (one connection each, so one request per read at the server), for
//! comparison with figures measured that way.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::future::Future;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capsize_scheduler::limit::shared::RedisBuckets;
use capsize_scheduler::{Limit, LimiterConfig};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

const ROUND: Duration = Duration::from_secs(2);
const ROUNDS: usize = 5;
const CALLERS: [usize; 3] = [1, 8, 64];
const TIMEOUT: Duration = Duration::from_secs(5);

fn main() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // Stopped when dropped, even if a round panics.
    let _server = Server(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (Debian: apt-get install redis-server)"),
    );
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
            &url, "bench", "llm", &config, TIMEOUT,
        ))
        .expect("connects");
    // The client's ceiling: a script that does nothing, through a connection set up as
    // RedisBuckets sets up its own, behind the same timeout.
    let trivial = rt.block_on(Trivial::connect(&url));
    let mut admin = rt.block_on(async {
        redis::Client::open(url.as_str())
            .expect("a Redis URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connects")
    });

    println!(
        "{:<26} {:>8} {:>10} {:>14} {:>10} {:>10}",
        "", "callers", "calls/s", "round trip µs", "in flight", "server µs"
    );
    for callers in CALLERS {
        let b = buckets.clone();
        rt.block_on(reset_stats(&mut admin));
        let m = measure(&rt, callers, move || {
            let b = b.clone();
            async move {
                b.reserve(100).await.expect("reserved");
            }
        });
        let server = rt.block_on(evalsha_usec(&mut admin));
        m.print("reserve (RedisBuckets)", callers, server);
    }
    for callers in CALLERS {
        let t = trivial.clone();
        rt.block_on(reset_stats(&mut admin));
        let m = measure(&rt, callers, move || {
            let t = t.clone();
            async move { t.call().await }
        });
        let server = rt.block_on(evalsha_usec(&mut admin));
        m.print("return 0 (client ceiling)", callers, server);
    }
    let script = "return redis.call('TIME')";
    for clients in [1, 64] {
        match redis_benchmark(port, clients, script) {
            Some(rate) => println!(
                "redis-benchmark EVAL \"{script}\" 0, {clients:>2} clients: {rate:.0} calls/s"
            ),
            None => println!("redis-benchmark: not run (is it installed?)"),
        }
    }
}

/// The `redis-server` the bench started, stopped when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The medians of [`ROUNDS`] rounds: calls per second, one caller's round trip in µs, and the
/// most calls in flight at once.
struct Measured {
    rate: f64,
    trip: f64,
    in_flight: usize,
    /// Calls made in all rounds.
    calls: u64,
}

impl Measured {
    /// One line of the table; `server_usec` is the server's CPU time for all the rounds.
    fn print(&self, what: &str, callers: usize, server_usec: f64) {
        println!(
            "{what:<26} {callers:>8} {:>10.0} {:>14.1} {:>10} {:>10.1}",
            self.rate,
            self.trip,
            self.in_flight,
            server_usec / self.calls.max(1) as f64
        );
    }
}

fn measure<F, Fut>(rt: &tokio::runtime::Runtime, callers: usize, call: F) -> Measured
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut rates = Vec::new();
    let mut trips = Vec::new();
    let (mut in_flight, mut calls) = (0, 0);
    for _ in 0..ROUNDS {
        let (rate, trip, most, made) = rt.block_on(round(callers, call.clone()));
        rates.push(rate);
        trips.push(trip);
        in_flight = in_flight.max(most);
        calls += made;
    }
    rates.sort_by(f64::total_cmp);
    trips.sort_by(f64::total_cmp);
    Measured {
        rate: rates[ROUNDS / 2],
        trip: trips[ROUNDS / 2],
        in_flight,
        calls,
    }
}

/// One round of `callers` tasks calling `call` in a loop for [`ROUND`]: calls per second, the
/// mean round trip one caller saw (µs), the most calls in flight at once, and the calls made.
async fn round<F, Fut>(callers: usize, call: F) -> (f64, f64, usize, u64)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let done = Arc::new(AtomicU64::new(0));
    let flying = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (call, done) = (call.clone(), done.clone());
            let (flying, most) = (flying.clone(), most.clone());
            tokio::spawn(async move {
                let mut mine = 0u64;
                while start.elapsed() < ROUND {
                    let now = flying.fetch_add(1, Ordering::Relaxed) + 1;
                    most.fetch_max(now, Ordering::Relaxed);
                    call().await;
                    flying.fetch_sub(1, Ordering::Relaxed);
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
    let total = done.load(Ordering::Relaxed);
    (
        total as f64 / secs,
        secs * 1e6 / first.max(1) as f64,
        most.load(Ordering::Relaxed),
        total,
    )
}

/// `return 0` by `EVALSHA` on a connection configured as [`RedisBuckets`] configures its own.
#[derive(Clone)]
struct Trivial {
    conn: ConnectionManager,
    script: Arc<Script>,
}

impl Trivial {
    async fn connect(url: &str) -> Trivial {
        let client = redis::Client::open(url).expect("a Redis URL");
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(TIMEOUT.saturating_mul(2)));
        let conn = ConnectionManager::new_with_config(client, config)
            .await
            .expect("connects");
        Trivial {
            conn,
            script: Arc::new(Script::new("return 0")),
        }
    }

    async fn call(&self) {
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key("{bench:llm}:trivial");
        // The arguments of one reservation.
        invocation.arg("r").arg(&[0u8; 32][..]).arg(&[0u8; 8][..]);
        let answer: redis::RedisResult<i64> =
            tokio::time::timeout(TIMEOUT, invocation.invoke_async(&mut conn))
                .await
                .expect("in time");
        answer.expect("answered");
    }
}

async fn reset_stats(conn: &mut redis::aio::MultiplexedConnection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec_async(conn)
        .await
        .expect("CONFIG RESETSTAT");
}

/// The server's CPU time in `EVALSHA` since the stats were reset, in µs.
async fn evalsha_usec(conn: &mut redis::aio::MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec=")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// `redis-benchmark`'s calls per second for `EVAL script 0` with `clients` clients.
fn redis_benchmark(port: u16, clients: usize, script: &str) -> Option<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-c", &clients.to_string()])
        .args([
            "-n",
            &(if clients == 1 { 40_000 } else { 200_000 }).to_string(),
        ])
        .args(["--csv", "EVAL", script, "0"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    // "test","rps",...  then  "EVAL ...","12345.67",...
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last()?;
    last.split("\",\"").nth(1)?.trim_matches('"').parse().ok()
}
