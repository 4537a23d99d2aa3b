//! Pins the retry rules of clients other than capsize's, as the scheduler applies them: the
//! SDKs' jitter, a Retry-After instead of the backoff, a longest Retry-After past which the call
//! is not retried, a 429 that holds only its own call, retries that go around the limiter, and
//! the presets' values as read in the SDKs' source.
//!
//! Scheduler tests run under tokio's paused clock, so send times are exact.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::time::Duration;

use capsize_scheduler::{
    GiveUp, Jitter, Limit, LimiterConfig, ProviderError, RetryAfterMode, RetryPolicy, RetryPreset,
    Scope,
};
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use tokio::time::Instant;

mod common;
use common::{call, exact, fail_once, gave_up, ms, retrying, secs, sent_times, single};

#[test]
fn the_sdk_jitter_shaves_at_most_a_quarter_uniformly() {
    let policy = RetryPolicy {
        jitter: Jitter::Reduce,
        ..exact(ms(500), secs(8))
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    const N: usize = 100_000;
    // Retry 2: ceiling 0.5 s · 2^2 = 2 s; the delay is 2 s · (1 − U/4), in [1.5 s, 2 s].
    let xs: Vec<f64> = (0..N)
        .map(|_| policy.backoff(2, &mut rng).as_secs_f64())
        .collect();
    assert!(xs.iter().all(|x| (1.5..=2.0).contains(x)));
    // Mean 1.75 s; standard error 0.5/√(12N) ≈ 0.00046 s; allow 5 standard errors.
    let mean = xs.iter().sum::<f64>() / N as f64;
    let bound = 5.0 * 0.5 / (12.0 * N as f64).sqrt();
    assert!(
        (mean - 1.75).abs() < bound,
        "mean {mean}, want 1.75 ± {bound}"
    );
    // Retry 5 and on: capped at 8 s, so in [6 s, 8 s].
    let d = policy.backoff(5, &mut rng);
    assert!(secs(6) <= d && d <= secs(8), "{d:?}");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_instead_of_the_backoff_replaces_it() {
    let after = |s| fail_once(ProviderError::rate_limited(Some(secs(s))));
    let instead = RetryPolicy {
        retry_after_mode: RetryAfterMode::Instead,
        ..exact(secs(5), secs(5))
    };
    // Shorter than the backoff: waited alone (at least, the backoff would have won at 5 s).
    let (out, sent) = single(instead.clone(), &Scope::new(), after(3)).await;
    assert!(out.is_ok());
    assert_eq!(sent, [ms(0), secs(3)]);
    let (_, sent) = single(exact(secs(5), secs(5)), &Scope::new(), after(3)).await;
    assert_eq!(sent, [ms(0), secs(5)]);
    // A zero Retry-After asks for nothing: the backoff applies.
    let (_, sent) = single(instead, &Scope::new(), after(0)).await;
    assert_eq!(sent, [ms(0), secs(5)]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_longest_honoured_is_not_retried() {
    let policy = RetryPolicy {
        retry_after_mode: RetryAfterMode::Instead,
        retry_after_max: Some(secs(120)),
        retry_after_cap: Duration::from_secs(4_294_967),
        ..exact(ms(500), secs(8))
    };
    let after = |s| fail_once(ProviderError::rate_limited(Some(secs(s))));
    let (out, sent) = single(policy.clone(), &Scope::new(), after(121)).await;
    assert_eq!(
        gave_up(out),
        (GiveUp::RetryAfterTooLong { wait: secs(121) }, 1)
    );
    assert_eq!(sent, [ms(0)]);
    // At the limit it is waited in full.
    let (out, sent) = single(policy.clone(), &Scope::new(), after(120)).await;
    assert!(out.is_ok());
    assert_eq!(sent, [ms(0), secs(120)]);
    // Without a longest, any length is waited (anthropic's rule).
    let any = RetryPolicy {
        retry_after_max: None,
        ..policy
    };
    let (_, sent) = single(any, &Scope::new(), after(600)).await;
    assert_eq!(sent, [ms(0), secs(600)]);
}

/// Calls 0 and 1 at 0 s and call 2 at 2 s, through a limiter of 1 request/s (burst 1); call 0's
/// first attempt takes 500 ms and gets a 429 asking for 7 s, then succeeds. Send times of each.
async fn after_a_429_in_the_limiter(policy: RetryPolicy) -> [Vec<Duration>; 3] {
    let t0 = Instant::now();
    let limits = LimiterConfig {
        requests: Some(Limit::per_minute(60.0).with_burst(1.0)),
        ..LimiterConfig::default()
    };
    let (s, log) = retrying(policy, Some(limits), 0);
    let scope = Scope::new();
    let ok = |_| Ok(());
    let after_7s = fail_once(ProviderError::rate_limited(Some(secs(7))));
    let (x, w, n) = tokio::join!(
        biased;
        call(&s, t0, ms(0), &scope, ms(500), after_7s),
        call(&s, t0, ms(0), &scope, ms(0), ok),
        call(&s, t0, ms(2_000), &scope, ms(0), ok),
    );
    assert!(x.is_ok() && w.is_ok() && n.is_ok());
    [0, 1, 2].map(|c| sent_times(&log, t0, Some(c)))
}

#[tokio::test(start_paused = true)]
async fn without_pause_limiter_a_retry_after_holds_only_its_own_call() {
    let policy = RetryPolicy {
        pause_limiter: false,
        ..RetryPolicy::default()
    };
    let [x, w, n] = after_a_429_in_the_limiter(policy).await;
    // The others keep the limiter's pace (1 s, 2 s); call 0 retries after its own 7 s wait,
    // through the limiter, which has credit again by 7.5 s.
    assert_eq!(w, [ms(1_000)]);
    assert_eq!(n, [ms(2_000)]);
    assert_eq!(x, [ms(0), ms(7_500)]);
    // With the pause (capsize's rule) every caller waits it out: 8 s, 9 s, and 10 s for the
    // retry.
    let [x, w, n] = after_a_429_in_the_limiter(RetryPolicy::default()).await;
    assert_eq!(
        (x, w, n),
        (vec![ms(0), ms(10_000)], vec![ms(8_000)], vec![ms(9_000)])
    );
}

/// Calls 0 and 1 at 0 s and call 2 at 1.5 s through a limiter of 1 request/s (burst 1); call
/// 0's first attempt gets a 429 (no Retry-After) and it backs off exactly 100 ms; its retry
/// goes around the limiter, through it, or through it at the front of the line. Send times of
/// each.
async fn retry_in_a_busy_limiter(through: bool, jump: bool) -> [Vec<Duration>; 3] {
    let t0 = Instant::now();
    let policy = RetryPolicy {
        retries_through_limiter: through,
        retries_jump_queue: jump,
        ..exact(ms(100), ms(100))
    };
    let limits = LimiterConfig {
        requests: Some(Limit::per_minute(60.0).with_burst(1.0)),
        ..LimiterConfig::default()
    };
    let (s, log) = retrying(policy, Some(limits), 0);
    let scope = Scope::new();
    let (x, w, n) = tokio::join!(
        biased;
        call(&s, t0, ms(0), &scope, ms(0), fail_once(ProviderError::rate_limited(None))),
        call(&s, t0, ms(0), &scope, ms(0), |_| Ok(())),
        call(&s, t0, ms(1_500), &scope, ms(0), |_| Ok(())),
    );
    assert!(x.is_ok() && w.is_ok() && n.is_ok());
    [0, 1, 2].map(|c| sent_times(&log, t0, Some(c)))
}

#[tokio::test(start_paused = true)]
async fn retries_around_the_limiter_neither_wait_for_it_nor_spend_its_credit() {
    // Around: the retry goes at 100 ms and takes no credit: call 1 keeps its 1 s slot, and
    // call 2, arriving at 1.5 s, gets the next one at 2 s.
    assert_eq!(
        retry_in_a_busy_limiter(false, false).await,
        [vec![ms(0), ms(100)], vec![ms(1_000)], vec![ms(2_000)]]
    );
    // Through: the retry queues behind call 1 and pays its own share, at 2 s; call 2 goes
    // a second later.
    assert_eq!(
        retry_in_a_busy_limiter(true, false).await,
        [vec![ms(0), ms(2_000)], vec![ms(1_000)], vec![ms(3_000)]]
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_jumps_the_queue_takes_the_slot_of_the_first_attempt_waiting() {
    // The retry joins at 100 ms ahead of call 1 and takes its 1 s slot; call 1 moves to 2 s,
    // and call 2, arriving at 1.5 s, queues behind it at 3 s.
    assert_eq!(
        retry_in_a_busy_limiter(true, true).await,
        [vec![ms(0), ms(1_000)], vec![ms(2_000)], vec![ms(3_000)]]
    );
}

#[tokio::test(start_paused = true)]
async fn the_sdk_presets_retry_twice_with_their_own_backoff() {
    let always_429 = |_| Err(ProviderError::rate_limited(None));
    for preset in [RetryPreset::OpenAiPython, RetryPreset::AnthropicPython] {
        let (out, sent) = single(preset.policy(), &Scope::new(), always_429).await;
        assert_eq!(gave_up(out), (GiveUp::RetriesExhausted, 3), "{preset}");
        // Backoffs 0.5 s and 1 s, each shaved by up to a quarter.
        let first = sent[1] - sent[0];
        let second = sent[2] - sent[1];
        assert!(ms(375) <= first && first <= ms(500), "{preset}: {first:?}");
        assert!(
            ms(750) <= second && second <= ms(1_000),
            "{preset}: {second:?}"
        );
    }
}

#[test]
fn the_presets_hold_the_sdks_rules() {
    let openai = RetryPreset::OpenAiPython.policy();
    let anthropic = RetryPreset::AnthropicPython.policy();
    for p in [&openai, &anthropic] {
        assert_eq!((p.max_retries, p.base, p.cap), (2, ms(500), secs(8)));
        assert_eq!(p.jitter, Jitter::Reduce);
        assert_eq!(p.retry_after_mode, RetryAfterMode::Instead);
        assert!(!p.pause_limiter && !p.retries_through_limiter && p.retry_timeouts);
        for code in [408, 409, 500, 503, 529, 599] {
            assert!(p.retry_on.contains(&code), "{code}");
        }
        assert!(!p.retry_on.contains(&400) && !p.retry_on.contains(&404));
    }
    assert_eq!(openai.retry_after_max, Some(secs(120)));
    assert_eq!(anthropic.retry_after_max, None);
    assert_eq!(anthropic.retry_after_cap, secs(4_294_967));
}

#[test]
fn no_wait_is_longer_than_a_century_whatever_the_policy_and_the_provider_say() {
    use capsize_scheduler::retry::Decision;
    use capsize_scheduler::retry::LONGEST_WAIT;
    use capsize_scheduler::FailureKind;
    let unbounded = RetryPolicy {
        base: Duration::MAX,
        cap: Duration::MAX,
        retry_after_cap: Duration::MAX,
        ..RetryPolicy::default()
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    assert!(unbounded.backoff(1_000, &mut rng) <= LONGEST_WAIT);
    let huge = FailureKind::RateLimited {
        retry_after: Some(Duration::MAX),
    };
    assert_eq!(unbounded.retry_after(&huge), Some(LONGEST_WAIT));
    let now = Instant::now();
    assert_eq!(
        unbounded.decide(&huge, 0, now, None, &mut rng),
        Decision::Retry {
            delay: LONGEST_WAIT
        }
    );
    // Against a deadline it gives up instead, without adding the wait to an instant it cannot
    // reach.
    assert_eq!(
        unbounded.decide(&huge, 0, now, Some(now + secs(1)), &mut rng),
        Decision::GiveUp(GiveUp::WouldMissDeadline { wait: LONGEST_WAIT })
    );
}
