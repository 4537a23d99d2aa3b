//! Helpers shared by the scheduler's integration tests (each test file uses a subset).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use capsize_scheduler::observe::EventLog;
use capsize_scheduler::{
    Attempt, CallError, CallSpec, EventKind, GiveUp, Jitter, LimiterConfig, ProviderError,
    RetryPolicy, Scheduler, SchedulerConfig, Scope,
};
use tokio::time::{sleep, sleep_until, Instant};
/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A scheduler for `config` and the log of every event it emits.
pub fn logged(config: SchedulerConfig) -> (Scheduler, Arc<EventLog>) {
    let log = Arc::new(EventLog::new());
    let sched = Scheduler::builder(config)
        .observer(log.clone())
        .build()
        .unwrap();
    (sched, log)
}

/// The default configuration with `max_concurrency` permits.
pub fn bounded(max_concurrency: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_concurrency,
        ..SchedulerConfig::default()
    }
}

/// A current-thread runtime on tokio's paused (virtual) clock.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
}

// Retry tests: one call at a time under a policy, its attempts' send times.

pub type Outcome = Result<(), CallError<ProviderError>>;

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// No jitter: retry n waits exactly min(cap, base·2^n).
pub fn exact(base: Duration, cap: Duration) -> RetryPolicy {
    RetryPolicy {
        base,
        cap,
        jitter: Jitter::None,
        ..RetryPolicy::default()
    }
}

/// A scheduler with `retry` and `limits` (no concurrency bound), seeded, and its event log.
pub fn retrying(
    retry: RetryPolicy,
    limits: Option<LimiterConfig>,
    seed: u64,
) -> (Scheduler, Arc<EventLog>) {
    let log = Arc::new(EventLog::new());
    let config = SchedulerConfig {
        max_concurrency: 0,
        limits,
        retry,
        ..SchedulerConfig::default()
    };
    let s = Scheduler::builder(config)
        .seed(seed)
        .observer(log.clone())
        .build()
        .expect("valid config");
    (s, log)
}

/// One call that arrives at `t0 + arrive`; attempt n takes `service` and returns `script(n)`.
pub async fn call(
    s: &Scheduler,
    t0: Instant,
    arrive: Duration,
    scope: &Scope,
    service: Duration,
    script: impl Fn(u32) -> Result<(), ProviderError>,
) -> Outcome {
    if !arrive.is_zero() {
        sleep_until(t0 + arrive).await;
    }
    let spec = CallSpec::new(1).in_scope(scope);
    s.call(spec, |a: Attempt| {
        let out = script(a.number);
        async move {
            sleep(service).await;
            out
        }
    })
    .await
}

/// Fails the first attempt with `e`, then succeeds.
pub fn fail_once(e: ProviderError) -> impl Fn(u32) -> Result<(), ProviderError> {
    move |n| if n == 1 { Err(e.clone()) } else { Ok(()) }
}

/// Runs a single call at t0 with `policy` and instant service; returns its outcome and the
/// times (from t0) its attempts were sent.
pub async fn single(
    policy: RetryPolicy,
    scope: &Scope,
    script: impl Fn(u32) -> Result<(), ProviderError>,
) -> (Outcome, Vec<Duration>) {
    let t0 = Instant::now();
    let (s, log) = retrying(policy, None, 0);
    let out = call(&s, t0, Duration::ZERO, scope, Duration::ZERO, script).await;
    (out, sent_times(&log, t0, None))
}

/// Send times (from `t0`) of every attempt of `only` (or of every call).
pub fn sent_times(log: &EventLog, t0: Instant, only: Option<u64>) -> Vec<Duration> {
    log.events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Sent { .. }) && only.is_none_or(|c| c == e.call))
        .map(|e| e.at - t0)
        .collect()
}

pub fn gave_up(out: Outcome) -> (GiveUp, u32) {
    match out {
        Err(CallError::Failed {
            reason, attempts, ..
        }) => (reason, attempts),
        other => panic!("expected a give-up, got {other:?}"),
    }
}
