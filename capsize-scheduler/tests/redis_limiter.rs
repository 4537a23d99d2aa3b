//! The limiter's buckets on Redis ([`RedisBuckets`], feature `redis`) against a real
//! `redis-server` each test starts on a free port (and stops): the in-process semantics across
//! connections (debit at once, a wait for one's own share, first come first served), refunds,
//! a pause shared by every replica, keys that expire, and errors for a Redis that is not there
//! or does not answer; and schedulers on such a limiter ([`RateLimiter::shared`]) pacing
//! together, and each falling back to its share when Redis goes away.

#![cfg(feature = "redis")]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time and a real server

#[path = "common/redis.rs"]
mod redis_server;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use capsize_scheduler::limit::shared::{RedisBuckets, SharedLimitError};
use capsize_scheduler::{
    CallSpec, Limit, LimiterConfig, ProviderError, RateLimiter, Scheduler, SchedulerConfig,
};
use futures_util::future::join_all;
use redis_server::Redis;

/// 600 RPM at 90 % headroom: 9 a second, a burst of 9.
fn rpm_600() -> LimiterConfig {
    LimiterConfig {
        requests: Some(Limit::per_minute(600.0)),
        tokens: None,
        headroom: 0.9,
    }
}

async fn buckets(redis: &Redis, name: &str) -> RedisBuckets {
    RedisBuckets::connect(
        &redis.url(),
        "test",
        name,
        &rpm_600(),
        Duration::from_secs(2),
    )
    .await
    .expect("connects")
}

/// `d` in ms, for messages.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::test]
async fn replicas_share_one_bucket_first_come_first_served() {
    let redis = Redis::start();
    // Two replicas, two connections, one limit.
    let (a, b) = (buckets(&redis, "llm").await, buckets(&redis, "llm").await);
    let mut waits = Vec::new();
    let t0 = Instant::now();
    for i in 0..12 {
        let replica = if i % 2 == 0 { &a } else { &b };
        let asked = t0.elapsed();
        waits.push((asked, replica.reserve(0).await.expect("reserved")));
    }
    // The burst of 9 goes at once; then one every 1/9 s from the first, whichever replica
    // asks: each wait plus the time it was asked at (the bucket refills meanwhile; a stalled
    // machine only moves both) is the slot's, within a round trip.
    assert!(waits[..9].iter().all(|(_, w)| w.is_zero()), "{waits:?}");
    for (k, (asked, w)) in waits[9..].iter().enumerate() {
        let due = (k + 1) as f64 * 1000.0 / 9.0;
        let slot = ms(*asked + *w);
        assert!(
            (slot - due).abs() < 20.0,
            "reservation {}: slot at {slot} ms, due {due}",
            k + 9
        );
    }
    // Another limit's buckets are its own.
    let other = buckets(&redis, "search").await;
    assert!(other.reserve(0).await.unwrap().is_zero());
}

#[tokio::test]
async fn a_refund_gives_the_share_back_and_a_pause_holds_everyone() {
    let redis = Redis::start();
    let (a, b) = (buckets(&redis, "llm").await, buckets(&redis, "llm").await);
    let t0 = Instant::now();
    for _ in 0..9 {
        a.reserve(0).await.unwrap();
    }
    // Three more would wait 1/9, 2/9, 3/9 s; given back, the next waits 1/9 s again.
    for _ in 0..3 {
        a.reserve(0).await.unwrap();
    }
    for _ in 0..3 {
        a.refund(0).await.unwrap();
    }
    let asked = t0.elapsed();
    let slot = ms(asked + b.reserve(0).await.unwrap());
    assert!((slot - 111.1).abs() < 20.0, "slot at {slot} ms");
    // A Retry-After of 2 s from one replica holds the other: credit starts again after it, and
    // the debt still owed (paid at 111 ms, unless the pause came later) is paid after it, then
    // this reservation's own 111 ms.
    let paused = ms(t0.elapsed());
    a.pause_for(Duration::from_secs(2)).await.unwrap();
    let asked = t0.elapsed();
    let slot = ms(asked + b.reserve(0).await.unwrap());
    let due = paused.max(111.1) + 2_000.0 + 111.1;
    assert!((slot - due).abs() < 20.0, "slot at {slot} ms, due {due}");
}

#[tokio::test]
async fn tokens_and_requests_are_reserved_together_and_keys_expire() {
    let redis = Redis::start();
    let config = LimiterConfig {
        requests: Some(Limit::per_minute(600.0)),
        tokens: Some(Limit::per_minute(60_000.0).with_burst(1_000.0)),
        headroom: 1.0,
    };
    let b = RedisBuckets::connect(&redis.url(), "t", "llm", &config, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(b.keys(), ["{t:llm}:buckets"]);
    // 1,000 tokens of burst at 1,000 a second: a call of 1,500 waits for its tokens until
    // 0.5 s after the first (the bucket refills meanwhile).
    let t0 = Instant::now();
    assert!(b.reserve(0).await.unwrap().is_zero());
    let asked = t0.elapsed();
    let slot = ms(asked + b.reserve(1_500).await.unwrap());
    assert!((slot - 500.0).abs() < 20.0, "slot at {slot} ms");
    // The key expires: when both buckets are full again, plus a minute.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    for key in b.keys() {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 60_000 && ttl <= 62_000, "{key}: {ttl} ms");
    }
}

#[tokio::test]
async fn a_redis_that_is_not_there_or_does_not_answer_is_an_error() {
    // Nothing listens: refused at once.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    let err = RedisBuckets::connect(&url, "t", "llm", &rpm_600(), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(matches!(err, SharedLimitError::Redis(_)), "{err}");
    // A listener that never answers: the timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let err = RedisBuckets::connect(&url, "t", "llm", &rpm_600(), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(err, SharedLimitError::Timeout(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Not a Redis URL.
    let err = RedisBuckets::connect("http://x", "t", "llm", &rpm_600(), Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("http://x: "), "{err}");
}

/// A scheduler whose one limiter is `buckets` on Redis, shared by `replicas`.
fn replica(buckets: RedisBuckets, replicas: usize) -> Scheduler {
    let limiter = RateLimiter::shared(buckets, &rpm_600(), replicas, Default::default())
        .expect("a valid limit");
    Scheduler::builder(SchedulerConfig::default())
        .limiters(Some(limiter), Vec::new())
        .build()
        .expect("a valid scheduler")
}

/// Sends one call through each of `schedulers` in turn, all at once; returns when each was
/// sent, in ms from now.
async fn send_times(schedulers: &[&Scheduler]) -> Vec<f64> {
    let t0 = Instant::now();
    let calls = schedulers.iter().map(|s| {
        s.call(CallSpec::new(0), move |_| async move {
            Ok::<_, ProviderError>(ms(t0.elapsed()))
        })
    });
    join_all(calls)
        .await
        .into_iter()
        .map(|r| r.expect("sent"))
        .collect()
}

#[tokio::test]
async fn two_schedulers_on_one_redis_limit_pace_together() {
    let redis = Redis::start();
    let a = replica(buckets(&redis, "llm").await, 2);
    let b = replica(buckets(&redis, "llm").await, 2);
    let mut sent = send_times(&[&a, &b, &a, &b, &a, &b, &a, &b, &a, &b, &a, &b]).await;
    // The fleet's burst of 9 at once, then one every 111 ms: 600 RPM at 0.9 for the two
    // together, not for each. (Which replica's call is served first depends on which
    // connection Redis reads first: the times, sorted, are the fleet's.)
    sent.sort_by(f64::total_cmp);
    for (i, t) in sent.iter().enumerate() {
        let due = i.saturating_sub(8) as f64 * 1000.0 / 9.0;
        // Never early (what a limit that is not shared would do); late only by a stall.
        assert!(
            *t > due - 20.0 && *t < due + 200.0,
            "call {i} sent at {t} ms, due {due}: {sent:?}"
        );
    }
}

#[tokio::test]
async fn when_redis_goes_away_each_replica_keeps_to_its_share() {
    let redis = Redis::start();
    let buckets = RedisBuckets::connect(
        &redis.url(),
        "t",
        "llm",
        &rpm_600(),
        Duration::from_millis(200),
    )
    .await
    .unwrap();
    let watch = buckets.clone();
    let a = replica(buckets, 2);
    // Redis stops: each reservation falls back to this replica's half of the limit, 270 a
    // minute (4.5 a second, a burst of 4.5): four at once, then one every 222 ms.
    let mut redis = redis;
    redis.kill();
    let sent = send_times(&[&a; 8]).await;
    assert_eq!(watch.failures(), 8);
    // Redis comes back on the same port: after at most the one request that finds the old
    // connection lost, reservations go to Redis again.
    let _back = Redis::on(redis.port());
    for _ in 0..3 {
        send_times(&[&a]).await;
    }
    let failed = watch.failures();
    assert!(failed <= 10, "{failed} fallbacks");
    send_times(&[&a, &a]).await;
    assert_eq!(watch.failures(), failed, "back on Redis");
    for (i, t) in sent.iter().enumerate() {
        let due = (i as f64 - 3.5).max(0.0) * 1000.0 / 4.5;
        // Never early (what a limit that is not shared would do); late only by a stall.
        assert!(
            *t > due - 20.0 && *t < due + 200.0,
            "call {i} sent at {t} ms, due {due}: {sent:?}"
        );
    }
}
