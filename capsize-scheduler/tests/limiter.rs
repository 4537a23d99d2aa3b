//! Pins the client-side rate limiter in virtual time: burst drain schedule, reservation
//! semantics, FIFO order, headroom and config validation, progress at exact refill boundaries,
//! the Retry-After pause, and refunds of dropped reservations.
//!
//! Every test runs under tokio's paused clock, so send times are exact. Tokio timers fire on
//! whole milliseconds, rounding a deadline up.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::future::Future;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use capsize_scheduler::observe::EventLog;
use capsize_scheduler::{
    CallSpec, ConfigError, EventKind, InvalidLimit, Limit, LimitField, LimitKind, LimiterConfig,
    ProviderError, RateLimiter, Scheduler, SchedulerConfig,
};
use futures_util::future::join_all;
use tokio::time::{sleep_until, timeout, Instant};

mod common;
use common::{logged, ms, paused_runtime};

fn limits(requests: Option<Limit>, tokens: Option<Limit>) -> LimiterConfig {
    LimiterConfig {
        requests,
        tokens,
        headroom: 1.0,
    }
}

fn rpm(per_minute: f64, burst: f64) -> LimiterConfig {
    limits(Some(Limit::per_minute(per_minute).with_burst(burst)), None)
}

fn tpm(per_minute: f64, burst: f64) -> LimiterConfig {
    limits(None, Some(Limit::per_minute(per_minute).with_burst(burst)))
}

/// A scheduler enforcing only `limits` (unbounded concurrency), and its event log.
fn scheduler(limits: LimiterConfig) -> (Scheduler, Arc<EventLog>) {
    logged(SchedulerConfig {
        limits: Some(limits),
        ..Default::default()
    })
}

/// Submits one always-succeeding call per entry of `tokens`, all at once, and returns the sorted
/// times (from `t0`) at which they were sent.
async fn send_all(s: &Scheduler, log: &EventLog, t0: Instant, tokens: &[u64]) -> Vec<Duration> {
    let calls = tokens
        .iter()
        .map(|&n| s.call(CallSpec::new(n), |_| async { Ok::<_, ProviderError>(()) }));
    for r in join_all(calls).await {
        r.expect("call succeeds");
    }
    let mut sent: Vec<Duration> = log
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Sent { .. }))
        .map(|e| e.at - t0)
        .collect();
    sent.sort();
    sent
}

/// Arrives at `t0 + arrive`, reserves `tokens` directly in `lim`, and returns when it may go.
async fn go_at(lim: &RateLimiter, t0: Instant, arrive: Duration, tokens: u64) -> Duration {
    if !arrive.is_zero() {
        sleep_until(t0 + arrive).await;
    }
    lim.reserve(tokens).wait().await;
    t0.elapsed()
}

#[tokio::test(start_paused = true)]
async fn tpm_burst_of_400k_tokens_drains_on_the_refill_schedule() {
    let t0 = Instant::now();
    let (s, log) = scheduler(tpm(10_000_000.0, 200_000.0));
    let sent = send_all(&s, &log, t0, &[2_000; 200]).await;
    for (i, &at) in sent.iter().enumerate() {
        let k = i as u64 + 1;
        // Call k waits for (2000k - 200000) tokens at 10^7/60 tokens/s, rounded up to the ms.
        let debt_ns = (2_000 * k).saturating_sub(200_000) * 60 * 1_000_000_000 / 10_000_000;
        assert_eq!(at, ms(debt_ns.div_ceil(1_000_000)), "call {k}");
    }
    assert_eq!(sent[99], Duration::ZERO);
    assert_eq!(sent[100], ms(12));
    assert_eq!(sent[199], ms(1_200));
}

#[tokio::test(start_paused = true)]
async fn each_caller_waits_for_its_own_reserved_share() {
    let t0 = Instant::now();
    let (s, log) = scheduler(rpm(60.0, 1.0));
    let sent = send_all(&s, &log, t0, &[0; 3]).await;
    assert_eq!(sent, [ms(0), ms(1_000), ms(2_000)]);
}

#[tokio::test(start_paused = true)]
async fn a_large_request_is_not_overtaken_by_later_small_ones() {
    let t0 = Instant::now();
    // 10 tokens/s, burst 100: the first request empties the bucket, the big one needs 5 s.
    let lim = RateLimiter::new(&tpm(600.0, 100.0)).unwrap();
    let all = join_all([
        go_at(&lim, t0, ms(0), 100),
        go_at(&lim, t0, ms(0), 50),
        go_at(&lim, t0, ms(1_000), 1), // a greedy bucket would let these go at once
        go_at(&lim, t0, ms(2_000), 1),
        go_at(&lim, t0, ms(3_000), 1),
    ]);
    let sent = timeout(Duration::from_secs(60), all)
        .await
        .expect("no one starves");
    assert_eq!(sent, [ms(0), ms(5_000), ms(5_100), ms(5_200), ms(5_300)]);
}

#[tokio::test(start_paused = true)]
async fn headroom_scales_the_refill_rate() {
    let t0 = Instant::now();
    let config = LimiterConfig {
        headroom: 0.5,
        ..rpm(600.0, 1.0)
    };
    let (s, log) = scheduler(config);
    assert_eq!(s.limiter().unwrap().rates(), (Some(5.0), None));
    let sent = send_all(&s, &log, t0, &[0; 10]).await;
    let want: Vec<Duration> = (0..10).map(|k| ms(200 * k)).collect();
    assert_eq!(sent, want);
}

/// The error `config` is rejected with, checking the scheduler's builder agrees.
fn rejected(config: LimiterConfig) -> ConfigError {
    let direct = RateLimiter::new(&config).expect_err("limiter must reject the config");
    let via_builder = Scheduler::builder(SchedulerConfig {
        limits: Some(config),
        ..Default::default()
    })
    .build()
    .err()
    .expect("builder must reject the config");
    assert_eq!(direct.to_string(), via_builder.to_string()); // NaN != NaN, so compare texts
    direct
}

/// The limit and the number of it a rejection names, or `None` for anything else.
fn named(e: ConfigError) -> Option<(LimitKind, LimitField)> {
    match e {
        ConfigError::Limit(InvalidLimit { kind, field, .. }) => Some((kind, field)),
        _ => None,
    }
}

#[test]
fn bad_limits_are_rejected_naming_the_setting() {
    let ok = rpm(600.0, 1.0);
    for headroom in [0.0, -0.5, 1.5, f64::NAN] {
        let e = rejected(LimiterConfig { headroom, ..ok });
        assert!(
            matches!(e, ConfigError::Headroom(_)),
            "headroom {headroom}: {e:?}"
        );
        assert!(
            e.to_string().starts_with("headroom must be in (0, 1]"),
            "{e}"
        );
    }
    let (requests, tokens) = (LimitKind::Requests, LimitKind::Tokens);
    let (rate, burst) = (LimitField::PerMinute, LimitField::Burst);
    for bad in [0.0, -60.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            named(rejected(rpm(bad, 1.0))),
            Some((requests, rate)),
            "rpm {bad}"
        );
        assert_eq!(
            named(rejected(tpm(bad, 1.0))),
            Some((tokens, rate)),
            "tpm {bad}"
        );
        if !bad.is_infinite() {
            assert_eq!(
                named(rejected(rpm(60.0, bad))),
                Some((requests, burst)),
                "rpm burst {bad}"
            );
            assert_eq!(
                named(rejected(tpm(60.0, bad))),
                Some((tokens, burst)),
                "tpm burst {bad}"
            );
        }
    }
    assert_eq!(
        rejected(rpm(60.0, 0.0)).to_string(),
        "requests-per-minute limit: burst must be a positive number, got 0"
    );
    // The edges of the valid range are accepted.
    for headroom in [1.0, 1e-9] {
        assert!(RateLimiter::new(&LimiterConfig { headroom, ..ok }).is_ok());
    }
}

/// Runs `make()` on a fresh paused-clock runtime under a wall-clock watchdog. A limiter that
/// spins on zero-length waits never lets virtual time advance, so a virtual timeout alone
/// cannot catch it.
fn under_watchdog<F: Future<Output = ()> + 'static>(make: fn() -> F) {
    let (tx, rx) = mpsc::channel();
    let body = std::thread::spawn(move || {
        let rt = paused_runtime();
        rt.block_on(make());
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => {}
        Err(RecvTimeoutError::Timeout) => panic!("livelock: virtual time stopped advancing"),
        Err(RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(body.join().expect_err("body panicked"))
        }
    }
}

/// 1,000 calls of `tokens` through `limits`; returns their send times, failing if they take
/// more than an hour of virtual time.
async fn thousand_calls(limits: LimiterConfig, tokens: u64) -> Vec<Duration> {
    let t0 = Instant::now();
    let (s, log) = scheduler(limits);
    let tokens = [tokens; 1_000];
    timeout(Duration::from_secs(3_600), send_all(&s, &log, t0, &tokens))
        .await
        .expect("virtual-time watchdog")
}

#[test]
fn one_request_per_millisecond_finishes_on_time() {
    under_watchdog(|| async {
        let sent = thousand_calls(rpm(60_000.0, 1.0), 0).await;
        let want: Vec<Duration> = (0..1_000).map(ms).collect();
        assert_eq!(sent, want);
    });
}

#[test]
fn tpm_waits_on_a_12_ms_grid_finish_on_time() {
    under_watchdog(|| async {
        let sent = thousand_calls(tpm(10_000_000.0, 2_000.0), 2_000).await;
        let want: Vec<Duration> = (0..1_000).map(|k| ms(12 * k)).collect();
        assert_eq!(sent, want);
    });
}

#[test]
fn waits_ending_mid_millisecond_round_up_without_drift() {
    under_watchdog(|| async {
        // 1,666.67 requests/s: call k (from 0) is paid at 0.6k ms, sent on the next whole ms.
        // Every fifth lands exactly on a millisecond, where float noise must not cost 1 ms.
        let sent = thousand_calls(rpm(100_000.0, 1.0), 0).await;
        let want: Vec<Duration> = (0..1_000).map(|k: u64| ms((3 * k).div_ceil(5))).collect();
        assert_eq!(sent, want);
    });
}

#[tokio::test(start_paused = true)]
async fn pause_holds_waiting_and_new_callers_and_forfeits_the_balance() {
    let t0 = Instant::now();
    // 1 request/s, burst 2. Two go at once; the third would go at 1 s, the fourth at 2 s.
    let lim = RateLimiter::new(&rpm(60.0, 2.0)).unwrap();
    let pause = async {
        sleep_until(t0 + ms(500)).await;
        lim.pause_until(Instant::now() + ms(7_000)); // what a Retry-After of 7 s does
    };
    let (sent, ()) = tokio::join!(
        join_all([
            go_at(&lim, t0, ms(0), 0),
            go_at(&lim, t0, ms(0), 0),
            go_at(&lim, t0, ms(0), 0), // waiting when the pause starts
            go_at(&lim, t0, ms(0), 0),
            go_at(&lim, t0, ms(3_000), 0), // arrives during the pause
        ]),
        pause
    );
    // No credit accrues before 7.5 s; then each waiter waits out the rest of its own share
    // (0.5, 1.5, 2.5 requests), in order.
    assert_eq!(sent, [ms(0), ms(0), ms(8_000), ms(9_000), ms(10_000)]);

    // A full bucket's balance is forfeited: no stampede when the pause ends.
    let t1 = Instant::now();
    let lim = RateLimiter::new(&rpm(60.0, 5.0)).unwrap();
    lim.pause_until(t1 + ms(7_000));
    assert_eq!(lim.balances(), (Some(0.0), None));
    let sent = join_all((0..3).map(|_| go_at(&lim, t1, ms(1_000), 0))).await;
    assert_eq!(sent, [ms(8_000), ms(9_000), ms(10_000)]);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_reservation_refunds_it_and_moves_the_queue_up() {
    let t0 = Instant::now();
    let lim = RateLimiter::new(&rpm(60.0, 1.0)).unwrap();
    assert!(lim.reserve(0).is_ready()); // empties the bucket
    let before = lim.balances();
    drop(lim.reserve(0));
    assert_eq!(
        lim.balances(),
        before,
        "a dropped reservation gives its share back"
    );

    let b = lim.reserve(0); // would go at 1 s
    let c = lim.reserve(0); // would go at 2 s
    assert_eq!(c.wait_time(), ms(2_000));
    let (balance, c_sent) = tokio::join!(
        async {
            // b gives up at 250 ms while waiting (its wait future is dropped).
            assert!(timeout(ms(250), b.wait()).await.is_err());
            lim.balances()
        },
        async {
            c.wait().await;
            t0.elapsed()
        }
    );
    // 1 + 0.25 s of refill, less the first request and c's.
    assert_eq!(balance, (Some(-0.75), None));
    assert_eq!(c_sent, ms(1_000), "c takes b's place");
}

#[tokio::test(start_paused = true)]
async fn dropping_a_reservation_refunds_every_bucket() {
    // 1 request/s burst 10, 10 tokens/s burst 100.
    let both = limits(
        Some(Limit::per_minute(60.0).with_burst(10.0)),
        Some(Limit::per_minute(600.0).with_burst(100.0)),
    );
    let lim = RateLimiter::new(&both).unwrap();
    assert!(lim.reserve(100).is_ready()); // empties the TPM bucket only
    let before = lim.balances();
    assert_eq!(before, (Some(9.0), Some(0.0)));
    let r = lim.reserve(50); // a request is free, the tokens are not: it waits
    assert!(!r.is_ready());
    drop(r);
    assert_eq!(lim.balances(), before);
}
