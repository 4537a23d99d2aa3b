//! Pins the scheduler's named limiters (one per provider) in virtual time: each call waits only
//! in the limiter it names, a Retry-After pauses only the limiter of the provider that sent it,
//! an unlimited call waits in none, and names are checked when the scheduler is built.

#![allow(clippy::disallowed_methods)] // runs on tokio's paused clock on purpose

use std::time::Duration;

use capsize_scheduler::{
    CallSpec, ConfigError, Jitter, Limit, LimiterConfig, ProviderError, RetryPolicy, Scheduler,
    SchedulerConfig, Via,
};
use futures_util::future::join_all;
use tokio::time::Instant;

mod common;
use common::paused_runtime;

/// Requests only, `per_minute` at full headroom, a burst of one.
fn rpm(per_minute: f64) -> LimiterConfig {
    LimiterConfig {
        requests: Some(Limit::per_minute(per_minute).with_burst(1.0)),
        tokens: None,
        headroom: 1.0,
    }
}

/// "llm" at 60 RPM and "tools" at 600 RPM, each with a burst of one; no default limiter.
fn two_providers(retry: RetryPolicy) -> Scheduler {
    Scheduler::builder(SchedulerConfig {
        named_limits: vec![("llm".into(), rpm(60.0)), ("tools".into(), rpm(600.0))],
        retry,
        ..SchedulerConfig::default()
    })
    .build()
    .expect("valid config")
}

/// Sends one succeeding call per `via`, all at once; returns when each was sent, from `t0`.
async fn send_times(s: &Scheduler, vias: &[Via]) -> Vec<Duration> {
    let t0 = Instant::now();
    let calls = vias.iter().map(|&via| {
        s.call(CallSpec::new(1).via(via), move |_| async move {
            Ok::<_, ProviderError>(Instant::now() - t0)
        })
    });
    join_all(calls)
        .await
        .into_iter()
        .map(|r| r.expect("call succeeds"))
        .collect()
}

#[test]
fn each_call_waits_only_in_the_limiter_it_names() {
    paused_runtime().block_on(async {
        let s = two_providers(RetryPolicy::default());
        let llm = Via::Named(s.limit_id("llm").expect("llm is named"));
        let tools = Via::Named(s.limit_id("tools").expect("tools is named"));
        assert_eq!(s.limit_id("search"), None);
        // Three model calls at 1/s and three tool calls at 10/s, interleaved: each line is
        // paced by its own bucket, unaffected by the other's.
        let sent = send_times(&s, &[llm, tools, llm, tools, llm, tools]).await;
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            sent,
            [ms(0), ms(0), ms(1000), ms(100), ms(2000), ms(200)],
            "llm at 0, 1, 2 s; tools at 0, 100, 200 ms"
        );
        // An unlimited call and a call through the (absent) default limiter wait for nothing.
        let sent = send_times(&s, &[Via::Unlimited, Via::Unlimited, Via::Default]).await;
        assert_eq!(sent, [ms(0), ms(0), ms(0)]);
    });
}

#[test]
fn a_retry_after_pauses_only_the_limiter_of_the_provider_that_sent_it() {
    paused_runtime().block_on(async {
        let policy = RetryPolicy {
            jitter: Jitter::None,
            ..RetryPolicy::default()
        };
        let s = two_providers(policy);
        let llm = Via::Named(s.limit_id("llm").expect("llm is named"));
        let tools = Via::Named(s.limit_id("tools").expect("tools is named"));
        let t0 = Instant::now();
        // The model call is refused once with a Retry-After of 5 s: its limiter is paused until
        // then, its credit forfeited. A second model call made at 10 ms gets the first token
        // after the pause (6 s), the retry the next (7 s); a tool call made at 10 ms goes then.
        let refused = s.call(CallSpec::new(1).via(llm), |attempt| async move {
            if attempt.number == 1 {
                Err(ProviderError::rate_limited(Some(Duration::from_secs(5))))
            } else {
                Ok(Instant::now() - t0)
            }
        });
        let later = |via| {
            let s = &s;
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                s.call(CallSpec::new(1).via(via), move |_| async move {
                    Ok::<_, ProviderError>(Instant::now() - t0)
                })
                .await
                .expect("call succeeds")
            }
        };
        let (retried, next_llm, tool) = tokio::join!(refused, later(llm), later(tools));
        assert_eq!(next_llm, Duration::from_secs(6), "held by the llm's pause");
        assert_eq!(retried.expect("retried"), Duration::from_secs(7));
        assert_eq!(
            tool,
            Duration::from_millis(10),
            "the tools' limiter is not paused"
        );
    });
}

#[test]
fn named_limits_are_checked_when_the_scheduler_is_built() {
    let build = |named_limits: Vec<(String, LimiterConfig)>| {
        Scheduler::builder(SchedulerConfig {
            named_limits,
            ..SchedulerConfig::default()
        })
        .build()
        .err()
    };
    let twice = vec![("llm".into(), rpm(60.0)), ("llm".into(), rpm(600.0))];
    assert_eq!(build(twice), Some(ConfigError::LimitName("llm".into())));
    assert_eq!(
        build(vec![(String::new(), rpm(60.0))]),
        Some(ConfigError::LimitName(String::new()))
    );
    let bad = build(vec![("llm".into(), rpm(-1.0))]).expect("refused");
    assert!(
        bad.to_string().starts_with("named limit \"llm\": "),
        "names the limit: {bad}"
    );
}

#[test]
fn schedulers_that_share_limiters_keep_one_limit_between_them() {
    paused_runtime().block_on(async {
        // Two replicas of a client on one key: the second shares the first's limiters (and
        // ignores the 6,000 RPM of its own configuration).
        let a = two_providers(RetryPolicy::default());
        let b = Scheduler::builder(SchedulerConfig {
            named_limits: vec![("llm".into(), rpm(6000.0))],
            ..SchedulerConfig::default()
        })
        .share_limiters(&a)
        .build()
        .expect("valid config");
        let llm = Via::Named(b.limit_id("llm").expect("shared names"));
        assert_eq!(b.limit_id("tools"), a.limit_id("tools"));
        // Alternating between the replicas, the calls are paced at 60 RPM together: 0, 1, 2, 3 s.
        let t0 = Instant::now();
        let sent = join_all([&a, &b, &a, &b].into_iter().map(|s| {
            s.call(CallSpec::new(1).via(llm), move |_| async move {
                Ok::<_, ProviderError>(Instant::now() - t0)
            })
        }))
        .await;
        let secs: Vec<u64> = sent.into_iter().map(|r| r.unwrap().as_secs()).collect();
        assert_eq!(secs, [0, 1, 2, 3]);
        // Built on its own, the same configuration has a limiter of its own.
        let c = Scheduler::builder(SchedulerConfig {
            named_limits: vec![("llm".into(), rpm(6000.0))],
            ..SchedulerConfig::default()
        })
        .build()
        .expect("valid config");
        let own = c
            .limiter_for(Via::Named(c.limit_id("llm").unwrap()))
            .unwrap();
        assert_eq!(own.rates().0, Some(100.0));
    });
}
