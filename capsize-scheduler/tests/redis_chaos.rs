//! A fleet of K = 8 schedulers sharing one limit on a real `redis-server` ([`RateLimiter::shared`],
//! each replica on a connection of its own), every replica sending as fast as the limiter lets
//! it, while something happens to Redis: `FLUSHALL` once and many times, a `SIGKILL` and a
//! restart on the same port (empty: no persistence), a `SIGSTOP` longer than the timeout then
//! `SIGCONT`, garbage written into the key. Each run asserts the limiter's promise on every send
//! it recorded: no window of `w` seconds (a quarter of a second to four seconds) holds more than
//! `rate × w + burst`; and that it ends on time, and sends at about the rate again once Redis is
//! back.
//!
//! The limit is compressed to fit a run in 6 s: 2,000 a minute at 90 % headroom, 30 a second,
//! with a burst of 8 (= K: the shares of a fleet in fallback may each send one request on the
//! same instant). The limiter's promise holds for any window, so a second's windows test what a
//! minute's would, sixty times faster. A send is recorded when its attempt runs, after the
//! limiter's timer: late by a timer tick and whatever else the machine is doing, which can bring
//! a send closer to the next one than the limiter allowed; [`TOLERANCE`] allows one request for
//! that (30 a second: 33 ms of lateness).

#![cfg(feature = "redis")]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time and a real server

#[path = "common/redis.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capsize_scheduler::limit::shared::RedisBuckets;
use capsize_scheduler::{
    CallSpec, Limit, LimiterConfig, ProviderError, RateLimiter, Scheduler, SchedulerConfig,
};
use futures_util::future::join_all;
use redis_server::Redis;

/// Replicas, and callers in each (every caller has one reservation at a time).
const K: usize = 8;
const CALLERS: usize = 4;
/// The fleet's rate (a second) and burst.
const RATE: f64 = 30.0;
const BURST: f64 = 8.0;
/// Each replica's wait for Redis before it falls back to its share.
const TIMEOUT: Duration = Duration::from_millis(100);
/// How long the callers keep asking.
const RUN: f64 = 6.0;
/// The windows the promise is checked over, in seconds.
const WINDOWS: [f64; 5] = [0.25, 0.5, 1.0, 2.0, 4.0];
/// Sends over the promise allowed for timer lateness (see the module comment).
const TOLERANCE: f64 = 1.0;

fn limit() -> LimiterConfig {
    LimiterConfig {
        requests: Some(Limit::per_minute(RATE * 60.0 / 0.9).with_burst(BURST)),
        tokens: None,
        headroom: 0.9,
    }
}

/// The run's clock, for the thread that does things to Redis.
#[derive(Clone, Copy)]
struct Timeline(Instant);

impl Timeline {
    /// Sleeps until `secs` into the run.
    fn at(&self, secs: f64) {
        let due = self.0 + Duration::from_secs_f64(secs);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }

    fn now(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// What a run recorded: every send, in seconds from its start, in order; the instants of what
/// was done to Redis; the reservations that fell back.
struct Run {
    sends: Vec<f64>,
    marks: Vec<(&'static str, f64)>,
    failures: u64,
}

impl Run {
    /// The instant of the first mark named `name`.
    fn mark(&self, name: &str) -> f64 {
        self.marks
            .iter()
            .find(|(n, _)| *n == name)
            .map(|m| m.1)
            .expect("marked")
    }

    /// Sends in `[from, to)`.
    fn sent(&self, from: f64, to: f64) -> usize {
        self.sends.iter().filter(|&&t| t >= from && t < to).count()
    }

    /// The promise, checked over every window that starts with a send: the largest excess
    /// over `rate × w + burst`, with its window, must be within the tolerance.
    fn keeps_the_promise(&self, case: &str) {
        let s = &self.sends;
        let mut worst = (f64::NEG_INFINITY, 0.0, 0.0);
        for w in WINDOWS {
            let mut j = 0;
            for (i, &start) in s.iter().enumerate() {
                while j < s.len() && s[j] < start + w {
                    j += 1;
                }
                let excess = (j - i) as f64 - (RATE * w + BURST);
                if excess > worst.0 {
                    worst = (excess, w, start);
                }
            }
        }
        let (excess, w, start) = worst;
        eprintln!(
            "{case}: {} sends, {} fallbacks, marks {:?}; worst window {w} s from {start:.3} s: {excess:+} over the promise",
            s.len(),
            self.failures,
            self.marks
        );
        assert!(
            excess <= TOLERANCE,
            "{case}: {excess} sends over rate × {w} s + burst in the window from {start:.3} s: {s:?}"
        );
    }

    /// At least half the rate in `[from, to)`: the fleet is not starved.
    fn sends_at_the_rate(&self, case: &str, from: f64, to: f64) {
        let sent = self.sent(from, to);
        let due = RATE * (to - from);
        assert!(
            sent as f64 >= 0.5 * due,
            "{case}: {sent} sends in [{from:.2}, {to:.2}) s, {due} due: {:?}",
            self.sends
        );
    }
}

/// Runs the fleet on a fresh Redis for [`RUN`] seconds while `chaos` does things to that Redis
/// (on a thread of its own, on the run's timeline); asserts the fleet ended on time.
async fn run<F>(name: &str, chaos: F) -> Run
where
    F: FnOnce(&mut Redis, Timeline) -> Vec<(&'static str, f64)> + Send + 'static,
{
    let redis = Redis::start();
    let mut watches = Vec::new();
    let mut schedulers = Vec::new();
    for _ in 0..K {
        let buckets = RedisBuckets::connect(&redis.url(), "chaos", name, &limit(), TIMEOUT)
            .await
            .expect("connects");
        watches.push(buckets.clone());
        let limiter =
            RateLimiter::shared(buckets, &limit(), K, Default::default()).expect("a valid limit");
        let scheduler = Scheduler::builder(SchedulerConfig::default())
            .limiters(Some(limiter), Vec::new())
            .build()
            .expect("a valid scheduler");
        schedulers.push(scheduler);
    }
    let t0 = Instant::now();
    let timeline = Timeline(t0);
    let chaos = std::thread::spawn(move || {
        let mut redis = redis;
        let marks = chaos(&mut redis, timeline);
        (redis, marks)
    });
    let sends = Arc::new(Mutex::new(Vec::new()));
    let callers = schedulers
        .iter()
        .flat_map(|s| std::iter::repeat_n(s, CALLERS))
        .map(|s| {
            let sends = sends.clone();
            async move {
                while t0.elapsed().as_secs_f64() < RUN {
                    let sends = &sends;
                    let _ = s
                        .call(CallSpec::new(0), |_| async move {
                            sends.lock().unwrap().push(t0.elapsed().as_secs_f64());
                            Ok::<_, ProviderError>(())
                        })
                        .await;
                }
            }
        });
    let ended = tokio::time::timeout(Duration::from_secs_f64(RUN + 3.0), join_all(callers)).await;
    assert!(
        ended.is_ok(),
        "{name}: callers still waiting {:?} into a run of {RUN} s",
        t0.elapsed()
    );
    let (_redis, marks) = chaos.join().expect("the chaos thread");
    let mut sends = sends.lock().unwrap().clone();
    sends.sort_by(f64::total_cmp);
    Run {
        sends,
        marks,
        failures: watches.iter().map(RedisBuckets::failures).sum(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_left_alone_keeps_to_the_promise() {
    let run = run("alone", |_, _| Vec::new()).await;
    run.keeps_the_promise("alone");
    assert_eq!(run.failures, 0);
    run.sends_at_the_rate("alone", 1.0, RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushall_does_not_forget_the_debt() {
    let run = run("flushonce", |redis, time| {
        let mut conn = conn(redis);
        time.at(2.5);
        let () = redis::cmd("FLUSHALL").query(&mut conn).expect("flushed");
        vec![("flush", time.now())]
    })
    .await;
    run.keeps_the_promise("flush once");
    run.sends_at_the_rate("flush once", 3.0, RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_after_flushall_does_not_forget_it_either() {
    let run = run("flush", |redis, time| {
        let mut conn = conn(redis);
        let mut marks = Vec::new();
        for i in 0..13 {
            time.at(1.5 + 0.25 * i as f64);
            let () = redis::cmd("FLUSHALL").query(&mut conn).expect("flushed");
            marks.push(("flush", time.now()));
        }
        marks
    })
    .await;
    run.keeps_the_promise("flush x13");
    run.sends_at_the_rate("flush x13", 1.0, RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_killed_and_restarted_empty_keeps_the_fleet_within_the_limit() {
    let run = run("kill", |redis, time| {
        time.at(2.0);
        let killed = time.now();
        redis.kill_and_restart(Duration::from_secs(1));
        vec![("kill", killed), ("restart", time.now())]
    })
    .await;
    run.keeps_the_promise("kill and restart");
    assert!(
        run.failures > 0,
        "the replicas fell back while Redis was away"
    );
    // The shares keep the fleet going while Redis is away, and Redis after.
    run.sends_at_the_rate("kill and restart", run.mark("kill") + 0.5, RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_stuck_in_a_stopped_redis_cost_nothing_when_it_resumes() {
    let run = run("stop", |redis, time| {
        time.at(1.5);
        redis.signal("STOP");
        let stopped = time.now();
        time.at(4.0);
        redis.signal("CONT");
        vec![("stop", stopped), ("cont", time.now())]
    })
    .await;
    run.keeps_the_promise("stop 2.5 s");
    assert!(
        run.failures > 0,
        "the replicas fell back while Redis was stopped"
    );
    // Redis ran what had waited in its socket when it resumed: none of it was charged.
    let cont = run.mark("cont");
    run.sends_at_the_rate("stop 2.5 s", cont + 0.5, RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_the_key_neither_lifts_the_limit_nor_stalls_the_fleet() {
    let key = "{chaos:garbage}:buckets";
    let run = run("garbage", move |redis, time| {
        let mut conn = conn(redis);
        let mut marks = Vec::new();
        let doubles = |v: &[f64]| v.iter().flat_map(|d| d.to_le_bytes()).collect::<Vec<u8>>();
        for i in 0..15 {
            time.at(2.0 + 0.1 * i as f64);
            let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut conn).expect("time");
            let now = secs as f64 + micros as f64 / 1e6;
            let gen = (secs * 1_000_000 + micros) as f64;
            // Each breaks one check (the rest is what the script could have stored): balance
            // and instant of the requests bucket, of the tokens bucket (none), the generation.
            let value = match i {
                0 => doubles(&[f64::NAN; 5]),
                1 => doubles(&[f64::NAN, now, 0.0, 0.0, gen]),
                2 => doubles(&[f64::INFINITY, now, 0.0, 0.0, gen]),
                3 => doubles(&[f64::NEG_INFINITY, now, 0.0, 0.0, gen]),
                4 => doubles(&[0.0, now + 1e12, 0.0, 0.0, gen]),
                5 => doubles(&[-1e300, now, 0.0, 0.0, gen]),
                6 => doubles(&[0.0, f64::NAN, 0.0, 0.0, gen]),
                7 => b"xx".to_vec(),
                // The layout of an earlier version: four doubles.
                8 => doubles(&[BURST, now, 0.0, f64::NEG_INFINITY]),
                9 => {
                    let () = redis::cmd("DEL").arg(key).query(&mut conn).expect("del");
                    let () = redis::cmd("HSET")
                        .arg(key)
                        .arg("a")
                        .arg("b")
                        .query(&mut conn)
                        .expect("hset");
                    marks.push(("hash", time.now()));
                    continue;
                }
                10 => {
                    let () = redis::cmd("DEL").arg(key).query(&mut conn).expect("del");
                    let () = redis::cmd("RPUSH")
                        .arg(key)
                        .arg("a")
                        .query(&mut conn)
                        .expect("rpush");
                    marks.push(("list", time.now()));
                    continue;
                }
                // Generations: none, before any, not whole, far ahead.
                11 => doubles(&[0.0, now, 0.0, 0.0, f64::NAN]),
                12 => doubles(&[0.0, now, 0.0, 0.0, -5.0]),
                13 => doubles(&[0.0, now, 0.0, 0.0, gen + 0.5]),
                _ => doubles(&[0.0, now, 0.0, 0.0, gen + 1e16]),
            };
            let () = redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query(&mut conn)
                .expect("set");
            marks.push(("set", time.now()));
        }
        marks
    })
    .await;
    run.keeps_the_promise("garbage");
    // No round trip failed: the script read the garbage, not the replica.
    assert_eq!(run.failures, 0);
    run.sends_at_the_rate("garbage", 4.0, RUN);
}

/// A plain connection to `redis`, to do things to it.
fn conn(redis: &Redis) -> redis::Connection {
    redis::Client::open(redis.url())
        .and_then(|c| c.get_connection())
        .expect("a connection")
}
