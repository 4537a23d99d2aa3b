//! One test body, two clocks: the scheduler on tokio's paused clock and on capsize-des's
//! virtual clock sends at the same instants and finishes at the same time.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use capsize_des::{Executor, Handle};
use capsize_scheduler::fanout::Interruption;
use capsize_scheduler::{
    CallSpec, Clock, FanOut, Limit, LimiterConfig, Nanos, ProviderError, Scheduler,
    SchedulerConfig, Scope, TokioClock,
};

mod common;
use common::paused_runtime;

/// capsize-des's clock as a scheduler clock: instants are the executor's own count of
/// nanoseconds.
#[derive(Clone)]
struct DesClock {
    handle: Handle,
}

impl Clock for DesClock {
    type Instant = Nanos;
    type Sleep = capsize_des::Sleep;

    fn now(&self) -> Nanos {
        Nanos::from_nanos(self.handle.now_ns())
    }

    fn sleep_until(&self, deadline: Nanos) -> Self::Sleep {
        self.handle.sleep_until_ns(deadline.as_nanos())
    }
}

fn config() -> SchedulerConfig {
    SchedulerConfig {
        max_concurrency: 4,
        // 600 RPM at full headroom with a burst of 1: one send every 100 ms.
        limits: Some(LimiterConfig {
            requests: Some(Limit::per_minute(600.0).with_burst(1.0)),
            tokens: None,
            headroom: 1.0,
        }),
        ..SchedulerConfig::default()
    }
}

/// Ten calls of 250 ms; the first attempt of call 3 is a 429 with a 1 s Retry-After. Returns
/// each call's completion time since the start, in ms, in call order, and the total.
fn body<C: Clock>(scheduler: Scheduler<C>) -> Pin<Box<dyn Future<Output = (Vec<u128>, u128)>>> {
    Box::pin(async move {
        let clock = scheduler.clock().clone();
        let t0 = clock.now();
        let results = FanOut::on(clock.clone(), &Scope::default())
            .gather((0..10).map(|i| {
                let (scheduler, clock) = (&scheduler, &clock);
                move |scope: Scope<C::Instant>| async move {
                    scheduler
                        .call(CallSpec::of(100).in_scope(&scope), |attempt| async move {
                            if i == 3 && attempt.number == 1 {
                                return Err(ProviderError::rate_limited(Some(
                                    Duration::from_secs(1),
                                )));
                            }
                            clock
                                .sleep_until(clock.now() + Duration::from_millis(250))
                                .await;
                            Ok(clock.now())
                        })
                        .await
                }
            }))
            .await;
        let done: Vec<u128> = results
            .into_iter()
            .map(|r| (r.expect("every call succeeds") - t0).as_millis())
            .collect();
        let total = (clock.now() - t0).as_millis();
        (done, total)
    })
}

fn on_tokio() -> (Vec<u128>, u128) {
    let rt = paused_runtime();
    rt.block_on(async {
        let scheduler = Scheduler::builder(config()).seed(3).build().unwrap();
        let _: &TokioClock = scheduler.clock();
        body(scheduler).await
    })
}

fn on_des() -> (Vec<u128>, u128) {
    let exec = Executor::new();
    let clock = DesClock {
        handle: exec.handle(),
    };
    let scheduler = Scheduler::builder_on(config(), clock)
        .seed(3)
        .build()
        .unwrap();
    exec.block_on(body(scheduler)).unwrap()
}

#[test]
fn the_scheduler_runs_alike_on_tokios_clock_and_on_a_discrete_event_executor() {
    let des = on_des();
    assert_eq!(des, on_tokio());
    // Sends every 100 ms (a burst of 1), each answered 250 ms later: calls 0-2 are sent at
    // 0, 100 and 200 ms. Call 3's first attempt, sent at 300 ms, gets a 429 with Retry-After
    // 1 s: the limiter is paused to 1,300 ms with its balance forfeited, so the next send is at
    // 1,400. Calls 4-6 were waiting in the limiter (FIFO) before call 3's retry joined it at
    // 1,300: they go at 1,400, 1,500, 1,600, the retry at 1,700, calls 7-9 at 1,800-2,000.
    let (done, total) = des;
    assert_eq!(
        done,
        [250, 350, 450, 1950, 1650, 1750, 1850, 2050, 2150, 2250]
    );
    assert_eq!(total, 2250);
}

/// A job's error that says whether it was an interruption.
#[derive(Debug, PartialEq)]
struct JobError {
    interrupt: bool,
}

impl Interruption for JobError {
    fn is_interrupt(&self) -> bool {
        self.interrupt
    }
}

#[test]
fn a_fan_out_on_a_virtual_clock_reads_that_clock_to_tell_a_stop_from_outside() {
    // The parent's deadline is at 300 ms. Job 0 fails at 100 ms, so the fan-out cancels job 1;
    // job 1 ignores its scope and reports an interruption at 400 ms, after the deadline: on the
    // virtual clock that is a stop from outside (a failure), not the fan-out's own cancel.
    // On any other clock (the wall clock has barely moved) it would count as cancelled.
    let exec = Executor::new();
    let clock = DesClock {
        handle: exec.handle(),
    };
    let parent = Scope::default().with_deadline(clock.now() + Duration::from_millis(300));
    let fan = FanOut::on(clock.clone(), &parent);
    let failures = exec
        .block_on(async move {
            let jobs = [100u64, 400].map(|ms| {
                let clock = clock.clone();
                move |_scope: Scope<Nanos>| async move {
                    let at = clock.now() + Duration::from_millis(ms);
                    clock.sleep_until(at).await;
                    Err::<(), _>(JobError {
                        interrupt: ms == 400,
                    })
                }
            });
            fan.all_or_nothing(jobs).await
        })
        .unwrap()
        .unwrap_err();
    assert_eq!(
        failures.failures,
        [
            (0, JobError { interrupt: false }),
            (1, JobError { interrupt: true })
        ]
    );
    assert!(failures.cancelled.is_empty());
}
