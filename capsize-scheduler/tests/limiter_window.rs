//! The limiter's promise, as a property: over any 60 s, the requests and tokens it lets through
//! stay at or under `headroom × limit + burst`, with both limits set, for random mixes of call
//! sizes, arrival times, cancellations while waiting, and 429s whose Retry-After pauses the
//! limiter, with retries at the back of its line or jumping to the front. (A call larger than
//! the burst and sent counts as the burst: the bucket saves up for it.)
//!
//! Each case drives the real scheduler under tokio's paused clock and reads every send from
//! its events. Timers fire on whole milliseconds, so a send may trail its due instant by up to
//! one: the bound allows the refill of that millisecond.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::collections::BTreeMap;
use std::time::Duration;

use capsize_scheduler::{
    CallSpec, EventKind, Limit, LimiterConfig, ProviderError, RetryPolicy, Scheduler,
    SchedulerConfig, Scope,
};
use futures_util::future::join_all;
use proptest::prelude::*;
use tokio::time::{sleep_until, Instant};

mod common;
use common::{logged, paused_runtime};

const MINUTE: Duration = Duration::from_secs(60);
/// tokio's timer tick: how late a send may be after its due instant.
const TICK: f64 = 0.001;

/// One call of a case: when it arrives, what it costs, whether its caller gives up, and how
/// the provider answers its first attempt.
#[derive(Debug, Clone)]
struct Call {
    at_ms: u64,
    tokens: u64,
    /// The caller cancels after this long (it may still be waiting in the limiter).
    give_up_ms: Option<u64>,
    /// The first attempt gets a 429 with this Retry-After (ms); later attempts succeed.
    retry_after_ms: Option<u64>,
    latency_ms: u64,
}

#[derive(Debug, Clone)]
struct Case {
    rpm: f64,
    tpm: f64,
    headroom: f64,
    rpm_burst: f64,
    tpm_burst: f64,
    /// Retries join the limiter's line at the front.
    jump: bool,
    calls: Vec<Call>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1.0..600.0f64,
        2_000.0..200_000.0f64,
        0.1..=1.0f64,
        0.01..5.0f64,
        0.01..5.0f64,
        any::<bool>(),
    )
        .prop_flat_map(|(rpm, tpm, headroom, rb, tb, jump)| {
            // Calls up to the whole TPM (a larger one can never be served and is refused by
            // validation); most far smaller.
            let max_tokens = (tpm as u64).max(1);
            let call = (
                0..180_000u64,
                prop_oneof![4 => 1..=(max_tokens / 20).max(1), 1 => 1..=max_tokens],
                prop::option::weighted(0.2, 1..120_000u64),
                prop::option::weighted(0.1, 0..30_000u64),
                0..5_000u64,
            )
                .prop_map(
                    |(at_ms, tokens, give_up_ms, retry_after_ms, latency_ms)| Call {
                        at_ms,
                        tokens,
                        give_up_ms,
                        retry_after_ms,
                        latency_ms,
                    },
                );
            prop::collection::vec(call, 1..120).prop_map(move |calls| Case {
                rpm,
                tpm,
                headroom,
                // Bursts in seconds of the scaled refill, at least one unit (as scenarios do).
                rpm_burst: (rpm * headroom / 60.0 * rb).max(1.0),
                tpm_burst: (tpm * headroom / 60.0 * tb).max(1.0),
                jump,
                calls,
            })
        })
}

/// Runs the case; returns every send as (seconds from the start, tokens).
fn sends(case: &Case) -> Vec<(f64, u64)> {
    let rt = paused_runtime();
    rt.block_on(async {
        let (s, log) = logged(SchedulerConfig {
            max_concurrency: 0,
            limits: Some(LimiterConfig {
                requests: Some(Limit::per_minute(case.rpm).with_burst(case.rpm_burst)),
                tokens: Some(Limit::per_minute(case.tpm).with_burst(case.tpm_burst)),
                headroom: case.headroom,
            }),
            retry: RetryPolicy {
                max_retries: 3,
                retries_jump_queue: case.jump,
                ..RetryPolicy::default()
            },
            ..SchedulerConfig::default()
        });
        let t0 = Instant::now();
        join_all(case.calls.iter().map(|c| one(&s, t0, c))).await;
        let events = log.events();
        let tokens: BTreeMap<u64, u64> = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Queued { tokens } => Some((e.call, tokens)),
                _ => None,
            })
            .collect();
        let mut out: Vec<(f64, u64)> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Sent { .. }))
            .map(|e| ((e.at - t0).as_secs_f64(), tokens[&e.call]))
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    })
}

async fn one(s: &Scheduler, t0: Instant, c: &Call) {
    let start = t0 + Duration::from_millis(c.at_ms);
    sleep_until(start).await;
    let mut scope = Scope::new();
    if let Some(g) = c.give_up_ms {
        scope = scope.with_deadline(start + Duration::from_millis(g));
    }
    let spec = CallSpec::new(c.tokens).in_scope(&scope);
    let _ = s
        .call(spec, |attempt| async move {
            tokio::time::sleep(Duration::from_millis(c.latency_ms)).await;
            match c.retry_after_ms {
                Some(ra) if attempt.number == 1 => {
                    Err(ProviderError::rate_limited(Some(Duration::from_millis(ra))))
                }
                _ => Ok(()),
            }
        })
        .await;
}

/// The most any half-open window of `MINUTE` holds, weighting each send by `weight`.
fn busiest_minute(sends: &[(f64, u64)], weight: impl Fn(u64) -> f64) -> f64 {
    let w = MINUTE.as_secs_f64();
    let (mut best, mut sum, mut lo) = (0.0f64, 0.0f64, 0);
    for &(t, n) in sends {
        sum += weight(n);
        while sends[lo].0 <= t - w {
            sum -= weight(sends[lo].1);
            lo += 1;
        }
        best = best.max(sum);
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_minute_holds_more_than_headroom_times_the_limit_plus_the_burst(case in case()) {
        let sends = sends(&case);
        let rate_r = case.rpm * case.headroom / 60.0;
        let rate_t = case.tpm * case.headroom / 60.0;
        // The bucket saves up past its capacity only for a call it then sends.
        let largest = sends.iter().map(|s| s.1).max().unwrap_or(0) as f64;
        let requests = busiest_minute(&sends, |_| 1.0);
        let tokens = busiest_minute(&sends, |n| n as f64);
        let bound_r = rate_r * (60.0 + TICK) + case.rpm_burst;
        let bound_t = rate_t * (60.0 + TICK) + case.tpm_burst.max(largest);
        prop_assert!(requests <= bound_r + 1e-6, "{requests} requests in a minute > {bound_r}");
        prop_assert!(tokens <= bound_t + 1e-6, "{tokens} tokens in a minute > {bound_t}");
    }
}
