//! Pins the retry policy as the scheduler applies it: jitter bounds and seeding, which failures
//! are retried, Retry-After as a capped minimum wait, giving up early against a deadline, the
//! limiter-wide pause a Retry-After causes, and byte-identical runs for one seed.
//!
//! Scheduler tests run under tokio's paused clock, so send times are exact.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::time::Duration;

use capsize_scheduler::{
    CallError, EventKind, FailureKind, GiveUp, Jitter, Limit, LimiterConfig, ProviderError,
    RetryPolicy, Scope,
};
use futures_util::future::join_all;
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use tokio::time::Instant;

mod common;
use common::{call, exact, fail_once, gave_up, ms, retrying, secs, sent_times, single, Outcome};

#[test]
fn jitter_stays_in_its_band_and_is_seeded() {
    let full = RetryPolicy {
        base: ms(100),
        cap: secs(5),
        ..RetryPolicy::default()
    };
    let ceiling = |n: u32| (ms(100) * 2u32.pow(n)).min(secs(5));
    let draws = |policy: &RetryPolicy, seed: u64| -> Vec<Duration> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..12).map(|n| policy.backoff(n, &mut rng)).collect()
    };
    for seed in 0..50 {
        for (n, d) in draws(&full, seed).into_iter().enumerate() {
            assert!(d <= ceiling(n as u32), "full: retry {n} waited {d:?}");
        }
    }
    assert_eq!(draws(&full, 7), draws(&full, 7));
    assert_ne!(draws(&full, 7), draws(&full, 8));

    let equal = RetryPolicy {
        jitter: Jitter::Equal,
        ..full.clone()
    };
    for seed in 0..50 {
        for (n, d) in draws(&equal, seed).into_iter().enumerate() {
            let c = ceiling(n as u32);
            assert!(c / 2 <= d && d <= c, "equal: retry {n} waited {d:?}");
        }
    }
    let none = RetryPolicy {
        jitter: Jitter::None,
        ..full.clone()
    };
    let want: Vec<Duration> = (0..12).map(ceiling).collect();
    assert_eq!(draws(&none, 3), want);
}

#[test]
fn full_jitter_is_uniform_below_the_ceiling() {
    let policy = RetryPolicy {
        base: ms(100),
        ..RetryPolicy::default()
    };
    let d = 0.8; // retry 3: 100 ms · 2^3
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    const N: usize = 100_000;
    let xs: Vec<f64> = (0..N)
        .map(|_| policy.backoff(3, &mut rng).as_secs_f64())
        .collect();
    let mean = xs.iter().sum::<f64>() / N as f64;
    // Uniform on [0, d]: mean d/2, standard error d/√(12N) ≈ 0.00091·d; allow 5 standard errors.
    let bound = 5.0 * d / (12.0 * N as f64).sqrt();
    assert!(
        (mean - d / 2.0).abs() < bound,
        "mean {mean}, want {} ± {bound}",
        d / 2.0
    );
    // It reaches both ends of the band.
    let lo = xs.iter().cloned().fold(f64::MAX, f64::min);
    let hi = xs.iter().cloned().fold(0.0, f64::max);
    assert!(lo < 0.001 * d && hi > 0.999 * d, "range [{lo}, {hi}]");
}

#[tokio::test(start_paused = true)]
async fn scheduler_draws_its_delays_from_the_seeded_rng() {
    let policy = RetryPolicy {
        base: ms(100),
        ..RetryPolicy::default()
    };
    let t0 = Instant::now();
    let (s, log) = retrying(policy.clone(), None, 42);
    let always_429 = |_| Err(ProviderError::rate_limited(None));
    let out = call(
        &s,
        t0,
        Duration::ZERO,
        &Scope::new(),
        Duration::ZERO,
        always_429,
    )
    .await;
    assert_eq!(gave_up(out), (GiveUp::RetriesExhausted, 5));
    let delays: Vec<Duration> = log
        .events()
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::RetryScheduled { delay, .. } => Some(delay),
            _ => None,
        })
        .collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let want: Vec<Duration> = (0..4).map(|n| policy.backoff(n, &mut rng)).collect();
    assert_eq!(delays, want);
}

#[tokio::test(start_paused = true)]
async fn only_429_transient_statuses_and_timeouts_are_retried() {
    let policy = exact(ms(1), ms(8));
    let retried = [429, 500, 502, 503, 504, 529].map(|code| match code {
        429 => ProviderError::rate_limited(None),
        c => ProviderError::status(c),
    });
    for e in retried.into_iter().chain([ProviderError::timeout()]) {
        let (out, sent) = single(policy.clone(), &Scope::new(), fail_once(e.clone())).await;
        assert!(out.is_ok(), "{e:?} should be retried");
        assert_eq!(sent, [ms(0), ms(1)], "{e:?}");
    }
    let fatal = [400, 401, 404, 501].map(ProviderError::status);
    for e in fatal.into_iter().chain([ProviderError::other("bad")]) {
        let (out, sent) = single(policy.clone(), &Scope::new(), fail_once(e.clone())).await;
        match out {
            Err(CallError::Failed {
                error,
                attempts: 1,
                reason: GiveUp::NotRetryable,
            }) => assert_eq!(error, e),
            other => panic!("{e:?} must not be retried, got {other:?}"),
        }
        assert_eq!(sent, [ms(0)]);
    }
    // The lists are the policy's, not fixed.
    let custom = RetryPolicy {
        retry_on: vec![418],
        retry_timeouts: false,
        ..policy.clone()
    };
    for (e, retried) in [(418, true), (503, false)]
        .map(|(c, r)| (ProviderError::status(c), r))
        .into_iter()
        .chain([(ProviderError::timeout(), false)])
    {
        let (out, _) = single(custom.clone(), &Scope::new(), fail_once(e.clone())).await;
        assert_eq!(out.is_ok(), retried, "{e:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn max_retries_bounds_the_attempts() {
    let always_503 = |_| Err(ProviderError::status(503));
    let (out, sent) = single(exact(ms(1), ms(8)), &Scope::new(), always_503).await;
    assert_eq!(gave_up(out), (GiveUp::RetriesExhausted, 5));
    // Backoff 1, 2, 4, 8 ms (capped at 8).
    assert_eq!(sent, [ms(0), ms(1), ms(3), ms(7), ms(15)]);

    let never = RetryPolicy {
        max_retries: 0,
        ..exact(ms(1), ms(8))
    };
    let (out, _) = single(never, &Scope::new(), always_503).await;
    assert_eq!(gave_up(out), (GiveUp::RetriesExhausted, 1));
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_a_capped_minimum_wait() {
    let after_3s = || fail_once(ProviderError::rate_limited(Some(secs(3))));
    let policy = exact(ms(1), ms(1));
    let (out, sent) = single(policy.clone(), &Scope::new(), after_3s()).await;
    assert!(out.is_ok());
    assert_eq!(sent, [ms(0), secs(3)]);

    let capped = RetryPolicy {
        retry_after_cap: secs(2),
        ..policy.clone()
    };
    let (_, sent) = single(capped, &Scope::new(), after_3s()).await;
    assert_eq!(sent, [ms(0), secs(2)]);

    let ignored = RetryPolicy {
        honor_retry_after: false,
        ..policy.clone()
    };
    let (_, sent) = single(ignored, &Scope::new(), after_3s()).await;
    assert_eq!(sent, [ms(0), ms(1)]);

    // A minimum, not a replacement: a longer backoff still applies.
    let (_, sent) = single(exact(secs(5), secs(5)), &Scope::new(), after_3s()).await;
    assert_eq!(sent, [ms(0), secs(5)]);

    // A 503 may carry one too.
    let busy = ProviderError {
        kind: FailureKind::Status {
            code: 503,
            retry_after: Some(secs(3)),
        },
        message: "overloaded".into(),
    };
    let (_, sent) = single(policy, &Scope::new(), fail_once(busy)).await;
    assert_eq!(sent, [ms(0), secs(3)]);
}

/// A call at t0 whose first attempt takes 500 ms and ends in a 429 asking for 3 s, in a scope
/// with a deadline at `t0 + deadline`; returns its outcome and when it ended.
async fn against_deadline(deadline: Duration) -> (Outcome, Duration) {
    let t0 = Instant::now();
    let (s, _) = retrying(exact(ms(1), ms(1)), None, 0);
    let scope = Scope::new().with_deadline(t0 + deadline);
    let script = fail_once(ProviderError::rate_limited(Some(secs(3))));
    let out = call(&s, t0, Duration::ZERO, &scope, ms(500), script).await;
    (out, t0.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_deadline_gives_up_at_once() {
    let (out, ended) = against_deadline(secs(2)).await;
    assert_eq!(
        gave_up(out),
        (GiveUp::WouldMissDeadline { wait: secs(3) }, 1)
    );
    assert_eq!(
        ended,
        ms(500),
        "gives up when the 429 arrives, without sleeping"
    );
    // A retry due exactly at the deadline could not run either.
    let (out, ended) = against_deadline(ms(3_500)).await;
    assert_eq!(gave_up(out).0, GiveUp::WouldMissDeadline { wait: secs(3) });
    assert_eq!(ended, ms(500));
    // With room for the wait, the call retries at 3.5 s and finishes at 4 s.
    let (out, ended) = against_deadline(secs(5)).await;
    assert!(out.is_ok());
    assert_eq!(ended, ms(4_000));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_pauses_every_caller_of_the_limiter() {
    let t0 = Instant::now();
    // 1 request/s, burst 1; default backoff (at most 1 s, below the 7 s Retry-After).
    let limits = LimiterConfig {
        requests: Some(Limit::per_minute(60.0).with_burst(1.0)),
        ..LimiterConfig::default()
    };
    let (s, log) = retrying(RetryPolicy::default(), Some(limits), 0);
    let scope = Scope::new();
    let ok = |_| Ok(());
    let after_7s = fail_once(ProviderError::rate_limited(Some(secs(7))));
    let (x, w, n) = tokio::join!(
        biased;
        call(&s, t0, ms(0), &scope, ms(500), after_7s), // call 0: 429 at 0.5 s
        call(&s, t0, ms(0), &scope, ms(0), ok),         // call 1: waiting, due at 1 s
        call(&s, t0, ms(2_000), &scope, ms(0), ok),     // call 2: arrives in the pause
    );
    assert!(x.is_ok() && w.is_ok() && n.is_ok());
    // The pause lasts to 7.5 s; credit restarts then and each waits for its own share, FIFO.
    assert_eq!(sent_times(&log, t0, Some(0)), [ms(0), ms(10_000)]);
    assert_eq!(sent_times(&log, t0, Some(1)), [ms(8_000)]);
    assert_eq!(sent_times(&log, t0, Some(2)), [ms(9_000)]);
}

/// 20 calls that each get three 429s (no Retry-After) before succeeding; the event log as text,
/// with times taken from the run's start.
async fn noisy_run(seed: u64) -> String {
    let t0 = Instant::now();
    let (s, log) = retrying(RetryPolicy::default(), None, seed);
    let scope = Scope::new();
    let script = |n| {
        if n <= 3 {
            Err(ProviderError::rate_limited(None))
        } else {
            Ok(())
        }
    };
    let calls = (0..20).map(|i| call(&s, t0, ms(i * 10), &scope, ms(30), script));
    assert!(join_all(calls).await.iter().all(Result::is_ok));
    assert_eq!(
        log.count(|k| matches!(k, EventKind::RateLimited { .. })),
        60
    );
    log.events()
        .iter()
        .map(|e| format!("{:?} {} {:?}\n", e.at - t0, e.call, e.kind))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn one_seed_gives_identical_runs() {
    let a = noisy_run(42).await;
    assert_eq!(a, noisy_run(42).await);
    assert_ne!(a, noisy_run(43).await);
}
