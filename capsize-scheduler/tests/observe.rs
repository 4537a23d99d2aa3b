//! Pins the observer: every step of a call arrives as an event with its virtual time, in order,
//! and `Breakdown` splits a call's latency into queue, limiter, backoff and service time.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::sync::Arc;
use std::time::Duration;

use capsize_scheduler::observe::{Breakdown, CallEnd, EventLog, RetryCause};
use capsize_scheduler::{
    CallSpec, EventKind, Jitter, Limit, LimiterConfig, Observer, ProviderError, RetryPolicy,
    Scheduler, SchedulerConfig,
};
use tokio::time::{sleep, Instant};

mod common;
use common::ms;

/// One permit, one request a second (burst 1), a fixed 500 ms backoff, Retry-After ignored.
fn scheduler(observer: Arc<dyn Observer>) -> Scheduler {
    let config = SchedulerConfig {
        max_concurrency: 1,
        limits: Some(LimiterConfig {
            requests: Some(Limit::per_minute(60.0).with_burst(1.0)),
            ..LimiterConfig::default()
        }),
        retry: RetryPolicy {
            base: ms(500),
            jitter: Jitter::None,
            honor_retry_after: false,
            ..RetryPolicy::default()
        },
        ..SchedulerConfig::default()
    };
    Scheduler::builder(config)
        .observer(observer)
        .build()
        .unwrap()
}

/// Call 0 holds the permit for 100 ms and spends the only token. Call 1 is queued 100 ms for
/// the permit, waits for the token at 1 s, gets a 429 after 50 ms, backs off 500 ms, waits for
/// the next token at 2 s, then is served in 200 ms. Both succeed.
async fn two_calls(s: &Scheduler) {
    let first = s.call(CallSpec::new(10), |_| async {
        sleep(ms(100)).await;
        Ok::<_, ProviderError>(())
    });
    let second = s.call(CallSpec::new(10), |a| async move {
        if a.number == 1 {
            sleep(ms(50)).await;
            Err(ProviderError::rate_limited(Some(ms(9000))))
        } else {
            sleep(ms(200)).await;
            Ok(())
        }
    });
    let (a, b) = tokio::join!(first, second);
    assert!(a.is_ok() && b.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_call_latency_splits_into_queue_limiter_backoff_and_service() {
    let log = Arc::new(EventLog::new());
    let s = scheduler(log.clone());
    let t0 = Instant::now();
    two_calls(&s).await;
    assert_eq!(t0.elapsed(), ms(2200));

    let events = log.of_call(1);
    let timeline: Vec<(u128, EventKind)> = events
        .iter()
        .map(|e| ((e.at - t0).as_millis(), e.kind.clone()))
        .collect();
    let want = vec![
        (0, EventKind::Queued { tokens: 10 }),
        (100, EventKind::LimiterWaitStart),
        (1000, EventKind::LimiterWaitEnd),
        (1000, EventKind::Sent { attempt: 1 }),
        (
            1050,
            EventKind::RateLimited {
                attempt: 1,
                retry_after: Some(ms(9000)),
            },
        ),
        (
            1050,
            EventKind::RetryScheduled {
                attempt: 1,
                delay: ms(500),
                cause: RetryCause::RateLimited,
            },
        ),
        (1550, EventKind::LimiterWaitStart),
        (2000, EventKind::LimiterWaitEnd),
        (2000, EventKind::Sent { attempt: 2 }),
        (2200, EventKind::Completed { attempts: 2 }),
    ];
    assert_eq!(timeline, want);

    let split = Breakdown::of(&events);
    assert_eq!(split.queue, ms(100));
    assert_eq!(split.limiter, ms(900 + 450));
    assert_eq!(split.backoff, ms(500));
    assert_eq!(split.service, ms(50 + 200));
    assert_eq!(split.attempts, 2);
    assert_eq!(split.total(), ms(2200));
}

#[tokio::test(start_paused = true)]
async fn call_ids_count_up_and_every_call_ends_in_one_terminal_event() {
    let log = Arc::new(EventLog::new());
    let s = scheduler(log.clone());
    for _ in 0..3 {
        let r = s
            .call(CallSpec::new(1), |_| async {
                Err::<(), _>(ProviderError::status(400))
            })
            .await;
        assert!(r.is_err());
    }
    for call in 0..3 {
        let events = log.of_call(call);
        assert_eq!(
            events.first().map(|e| &e.kind),
            Some(&EventKind::Queued { tokens: 1 })
        );
        let terminal: Vec<_> = events.iter().filter(|e| e.kind.is_terminal()).collect();
        assert_eq!(terminal.len(), 1, "call {call}: {events:?}");
        assert!(matches!(
            terminal[0].kind,
            EventKind::Failed { attempts: 1, .. }
        ));
    }
    assert_eq!(log.of_call(3), vec![]);
}

/// A call end as kept: id, queued and ended (since t0), end, breakdown, 429s, retries.
type Ended = (
    u64,
    Duration,
    Duration,
    Option<EventKind>,
    Breakdown,
    u32,
    u32,
);

/// Keeps call ends only, and counts any event it is sent anyway.
#[derive(Default)]
struct Ends {
    ends: std::sync::Mutex<Vec<Ended>>,
    events: std::sync::atomic::AtomicUsize,
    t0: std::sync::OnceLock<Instant>,
}

impl Observer for Ends {
    fn on_event(&self, _: &capsize_scheduler::Event) {
        self.events
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn on_call_end(&self, end: &CallEnd<'_>) {
        let t0 = *self.t0.get().expect("t0 set before any call");
        self.ends.lock().unwrap().push((
            end.call,
            end.queued_at - t0,
            end.at - t0,
            end.end.cloned(),
            end.breakdown,
            end.rate_limited,
            end.retries,
        ));
    }

    fn wants_events(&self) -> bool {
        false
    }
}

#[tokio::test(start_paused = true)]
async fn an_observer_that_wants_no_events_gets_each_call_folded_once_at_its_end() {
    let ends = Arc::new(Ends::default());
    let s = scheduler(ends.clone());
    ends.t0.set(Instant::now()).unwrap();
    // The same two calls as above, then a third whose future is dropped while it waits for
    // the limiter (its token is due at 3 s; it is dropped at 2.5 s).
    two_calls(&s).await;
    let third = s.call(CallSpec::new(10), |_| async { Ok::<_, ProviderError>(()) });
    assert!(tokio::time::timeout(ms(300), third).await.is_err());

    let events = ends.events.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(events, 0, "no event is built for it");
    let got = ends.ends.lock().unwrap().clone();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].0, 0);
    assert_eq!(got[0].3, Some(EventKind::Completed { attempts: 1 }));
    assert_eq!((got[0].1, got[0].2), (ms(0), ms(100)));
    assert_eq!(got[0].4.service, ms(100));
    assert_eq!(
        got[1],
        (
            1,
            ms(0),
            ms(2200),
            Some(EventKind::Completed { attempts: 2 }),
            got[1].4,
            1,
            1
        )
    );
    let b = got[1].4;
    assert_eq!(
        (b.queue, b.limiter, b.backoff, b.service, b.attempts),
        (ms(100), ms(1350), ms(500), ms(250), 2)
    );
    // Dropped before it ended: reported with no end, at the drop, its wait counted so far.
    assert_eq!((got[2].0, got[2].1, got[2].2), (2, ms(2200), ms(2500)));
    assert_eq!(got[2].3, None);
    assert_eq!(got[2].4.limiter, ms(300));
}
