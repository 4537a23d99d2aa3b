//! Cancellation under tokio's paused clock: a cancelled call is never sent afterwards, its
//! rate-limiter reservation is refunded, in-flight attempts are dropped at the cancel instant,
//! each call reports the stage it was stopped in, a parent deadline bounds every child, and a
//! child's cancel stays below it.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capsize_scheduler::observe::EventLog;
use capsize_scheduler::{
    CallError, CallSpec, EventKind, FanOut, Interrupt, Limit, LimiterConfig, ProviderError,
    Scheduler, SchedulerConfig, Scope, Stage, Work,
};
use futures_util::future::join_all;
use tokio::time::{sleep, Instant};

mod common;
use common::{bounded, logged as scheduler, ms};

type Res = Result<usize, CallError<ProviderError>>;
type BoxRes = Pin<Box<dyn Future<Output = Res>>>;

/// 60 requests a minute with a burst of one: one token now, the next at 1 s, 2 s, ...
fn one_rps() -> SchedulerConfig {
    SchedulerConfig {
        limits: Some(LimiterConfig {
            requests: Some(Limit::per_minute(60.0).with_burst(1.0)),
            ..LimiterConfig::default()
        }),
        ..SchedulerConfig::default()
    }
}

/// Records when each attempt future is dropped and how many ran to the end.
#[derive(Clone)]
struct Probe {
    t0: Instant,
    drops: Arc<Mutex<Vec<Duration>>>,
    finished: Arc<AtomicUsize>,
}

struct DropClock(Probe);

impl Drop for DropClock {
    fn drop(&mut self) {
        let at = self.0.t0.elapsed();
        self.0.drops.lock().unwrap().push(at);
    }
}

impl Probe {
    fn new(t0: Instant) -> Self {
        Probe {
            t0,
            drops: Arc::default(),
            finished: Arc::default(),
        }
    }

    fn drops(&self) -> Vec<Duration> {
        self.drops.lock().unwrap().clone()
    }
}

/// One call in `scope` whose attempt takes `latency_ms`, then answers `Ok(tag)`.
async fn call(sched: Scheduler, probe: Probe, scope: Scope, tag: usize, latency_ms: u64) -> Res {
    let spec = CallSpec::new(0).in_scope(&scope);
    sched
        .call(spec, |_| {
            let probe = probe.clone();
            async move {
                let _clock = DropClock(probe.clone());
                sleep(ms(latency_ms)).await;
                probe.finished.fetch_add(1, Ordering::SeqCst);
                Ok(tag)
            }
        })
        .await
}

/// `latencies.len()` jobs, job `i` a call of `latencies[i]` ms answering `Ok(i)`.
fn jobs(sched: &Scheduler, probe: &Probe, latencies: &[u64]) -> Vec<impl FnOnce(Scope) -> BoxRes> {
    let jobs = latencies.iter().enumerate().map(|(i, &lat)| {
        let (sched, probe) = (sched.clone(), probe.clone());
        move |scope: Scope| -> BoxRes { Box::pin(call(sched, probe, scope, i, lat)) }
    });
    jobs.collect()
}

async fn cancel_at(fan: &FanOut, at_ms: u64) {
    sleep(ms(at_ms)).await;
    fan.cancel();
}

fn sends(log: &EventLog) -> usize {
    log.count(|k| matches!(k, EventKind::Sent { .. }))
}

/// Times (since `t0`) of the `Cancelled` events with this stage and cause.
fn cancel_times(log: &EventLog, t0: Instant, stage: Stage, cause: Interrupt) -> Vec<Duration> {
    let wanted = EventKind::Cancelled { stage, cause };
    let events = log.events().into_iter().filter(|e| e.kind == wanted);
    events.map(|e| e.at - t0).collect()
}

fn assert_interrupted(r: &Res, stage: Stage, cause: Interrupt) {
    match r {
        Err(CallError::Interrupted { stage: s, cause: c }) if *s == stage && *c == cause => {}
        other => panic!("expected {cause:?} while {stage:?}, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn cancel_before_send_sends_nothing_and_refunds_the_limiter() {
    let t0 = Instant::now();
    let (sched, log) = scheduler(one_rps());
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    // Call 0 takes the only token; calls 1..3 wait for 1 s, 2 s, 3 s.
    let (results, ()) = tokio::join!(
        biased;
        fan.gather(jobs(&sched, &probe, &[350; 4])),
        cancel_at(&fan, 500),
    );
    assert_eq!(t0.elapsed(), ms(500));
    assert_eq!(results[0].as_ref().unwrap(), &0);
    for r in &results[1..] {
        assert_interrupted(r, Stage::Limiter, Interrupt::Cancelled);
    }
    let stopped = cancel_times(&log, t0, Stage::Limiter, Interrupt::Cancelled);
    assert_eq!(stopped, vec![ms(500); 3]);
    assert_eq!(sends(&log), 1);

    // Only the sent call is debited: 1 token at the start, 1 spent, 0.5 refilled since.
    let limiter = sched.limiter().unwrap();
    let (requests, _) = limiter.balances();
    assert!(
        (requests.unwrap() - 0.5).abs() < 1e-9,
        "balance {requests:?}"
    );
    assert_eq!(limiter.waiters(), 0);
    // So a new call waits only for its own token, at 1 s, not behind the cancelled ones.
    let fresh = call(sched.clone(), probe.clone(), Scope::new(), 9, 0).await;
    assert_eq!(fresh.unwrap(), 9);
    assert_eq!(t0.elapsed(), ms(1_000));

    sleep(Duration::from_secs(10)).await;
    assert_eq!(sends(&log), 2, "a cancelled call was sent later");
    assert_eq!(probe.finished.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn calls_queued_for_a_permit_are_cancelled_as_queued_and_never_sent() {
    let t0 = Instant::now();
    let (sched, log) = scheduler(bounded(1));
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    // A call outside the fan-out holds the only permit for 1 s.
    let holder = call(sched.clone(), probe.clone(), Scope::new(), 99, 1_000);
    let (held, results, ()) = tokio::join!(
        biased;
        holder,
        fan.gather(jobs(&sched, &probe, &[100; 3])),
        cancel_at(&fan, 500),
    );
    assert_eq!(held.unwrap(), 99);
    assert_eq!(t0.elapsed(), ms(1_000));
    for r in &results {
        assert_interrupted(r, Stage::Queued, Interrupt::Cancelled);
    }
    let stopped = cancel_times(&log, t0, Stage::Queued, Interrupt::Cancelled);
    assert_eq!(stopped, vec![ms(500); 3]);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(sends(&log), 1, "a cancelled call was sent");
    assert_eq!(sched.available_permits(), Some(1));
}

#[tokio::test(start_paused = true)]
async fn cancel_drops_in_flight_attempts_at_the_cancel_instant() {
    let t0 = Instant::now();
    let (sched, log) = scheduler(bounded(0));
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    let (results, ()) = tokio::join!(
        biased;
        fan.gather(jobs(&sched, &probe, &[1_000, 2_000, 3_000])),
        cancel_at(&fan, 400),
    );
    assert_eq!(t0.elapsed(), ms(400));
    for r in &results {
        assert_interrupted(r, Stage::InFlight, Interrupt::Cancelled);
    }
    assert_eq!(probe.drops(), vec![ms(400); 3]);
    let stopped = cancel_times(&log, t0, Stage::InFlight, Interrupt::Cancelled);
    assert_eq!(stopped, vec![ms(400); 3]);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(probe.finished.load(Ordering::SeqCst), 0);
    assert_eq!(log.count(|k| matches!(k, EventKind::Completed { .. })), 0);
}

/// Runs `n` calls of 10 s directly in `scope`.
async fn slow_calls(sched: &Scheduler, probe: &Probe, scope: &Scope, n: usize) -> Vec<Res> {
    let calls = (0..n).map(|i| call(sched.clone(), probe.clone(), scope.clone(), i, 10_000));
    join_all(calls).await
}

#[tokio::test(start_paused = true)]
async fn a_parent_deadline_stops_every_child_and_cannot_be_extended() {
    let t0 = Instant::now();
    let (sched, log) = scheduler(bounded(0));
    let probe = Probe::new(t0);
    let parent = Scope::new().with_deadline(t0 + ms(5_000));
    let child = parent.child().with_deadline(t0 + ms(8_000));
    assert_eq!(child.deadline(), Some(t0 + ms(5_000)));
    let fan = FanOut::new(&parent).with_deadline(t0 + ms(20_000));
    assert_eq!(fan.scope().deadline(), Some(t0 + ms(5_000)));
    let (direct, fanned) = tokio::join!(
        slow_calls(&sched, &probe, &child, 2),
        fan.gather(jobs(&sched, &probe, &[10_000; 3])),
    );
    assert_eq!(t0.elapsed(), ms(5_000));
    for r in direct.iter().chain(&fanned) {
        assert_interrupted(r, Stage::InFlight, Interrupt::DeadlineExceeded);
    }
    assert_eq!(probe.drops(), vec![ms(5_000); 5]);
    let stopped = cancel_times(&log, t0, Stage::InFlight, Interrupt::DeadlineExceeded);
    assert_eq!(stopped.len(), 5);

    // An earlier deadline of the child's own does take effect.
    let t1 = Instant::now();
    let parent = Scope::new().with_deadline(t1 + ms(5_000));
    let early = parent.child().with_deadline(t1 + ms(2_000));
    let results = slow_calls(&sched, &probe, &early, 1).await;
    assert_interrupted(&results[0], Stage::InFlight, Interrupt::DeadlineExceeded);
    assert_eq!(t1.elapsed(), ms(2_000));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_child_spares_the_parent_and_its_siblings() {
    let t0 = Instant::now();
    let (sched, _log) = scheduler(bounded(0));
    let probe = Probe::new(t0);
    let parent = Scope::new().child();
    let (a, b) = (FanOut::new(&parent), FanOut::new(&parent));
    let (in_a, in_b, in_parent, ()) = tokio::join!(
        a.gather(jobs(&sched, &probe, &[1_000; 2])),
        b.gather(jobs(&sched, &probe, &[1_000; 2])),
        call(sched.clone(), probe.clone(), parent.clone(), 7, 1_000),
        cancel_at(&a, 200),
    );
    assert_eq!(t0.elapsed(), ms(1_000));
    for r in &in_a {
        assert_interrupted(r, Stage::InFlight, Interrupt::Cancelled);
    }
    let values: Vec<usize> = in_b.into_iter().map(Result::unwrap).collect();
    assert_eq!(values, vec![0, 1]);
    assert_eq!(in_parent.unwrap(), 7);
    assert_eq!(parent.interrupted(Work::Unsent), None);
    assert_eq!(b.scope().interrupted(Work::Unsent), None);
    let mut drops = probe.drops();
    drops.sort_unstable();
    assert_eq!(
        drops,
        vec![ms(200), ms(200), ms(1_000), ms(1_000), ms(1_000)]
    );

    // The link is there, downward only: the parent's cancel does reach the sibling.
    parent.cancel();
    assert_eq!(
        b.scope().interrupted(Work::Unsent),
        Some(Interrupt::Cancelled)
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_at_the_instant_the_limiter_is_ready_wins_and_refunds() {
    let t0 = Instant::now();
    let (sched, log) = scheduler(one_rps());
    let probe = Probe::new(t0);
    // The first call takes the only token; the second's turn comes at exactly 1 s, which is
    // also its deadline: it must not be sent, and its reservation must be given back.
    let first = call(sched.clone(), probe.clone(), Scope::new(), 0, 100);
    let late = Scope::new().with_deadline(t0 + ms(1_000));
    let second = call(sched.clone(), probe.clone(), late, 1, 100);
    let (a, b) = tokio::join!(first, second);
    assert!(a.is_ok());
    assert_interrupted(&b, Stage::Limiter, Interrupt::DeadlineExceeded);
    assert_eq!(t0.elapsed(), ms(1_000));
    assert_eq!(sends(&log), 1);
    let limiter = sched.limiter().unwrap();
    assert_eq!(
        limiter.balances().0,
        Some(1.0),
        "the refund leaves the 1 s token unspent"
    );
    assert_eq!(limiter.waiters(), 0);
}
