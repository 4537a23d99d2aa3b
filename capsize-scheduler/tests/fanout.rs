//! Fan-out under tokio's paused clock: `gather` is bounded only by the scheduler's permits and
//! returns every result in job order; `as_completed` yields in completion order; and
//! `all_or_nothing` cancels the siblings at the first failure, leaving nothing behind.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capsize_scheduler::fanout::Failures;
use capsize_scheduler::observe::EventLog;
use capsize_scheduler::{
    CallError, CallSpec, EventKind, FailureKind, FanOut, GiveUp, Interrupt, ProviderError,
    Scheduler, Scope, Stage,
};
use futures_util::StreamExt;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, Instant};

mod common;
use common::{bounded, logged, ms};

type Res = Result<usize, CallError<ProviderError>>;

fn scheduler(max_concurrency: usize) -> (Scheduler, Arc<EventLog>) {
    logged(bounded(max_concurrency))
}

/// Watches attempt futures: how many are alive now, the most at once, and when each started.
#[derive(Clone)]
struct Probe {
    t0: Instant,
    live: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    starts: Arc<Mutex<Vec<(usize, Duration)>>>,
}

/// Alive while an attempt future is: counted in on creation, out on Drop.
struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Probe {
    fn new(t0: Instant) -> Self {
        Probe {
            t0,
            live: Arc::default(),
            peak: Arc::default(),
            starts: Arc::default(),
        }
    }

    fn enter(&self, tag: usize) -> Guard {
        let now = self.live.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.starts.lock().unwrap().push((tag, self.t0.elapsed()));
        Guard(self.live.clone())
    }
}

/// One scheduler call whose attempt takes `latency_ms` and then answers `Ok(tag)` or `error`.
fn job(
    sched: &Scheduler,
    probe: &Probe,
    tag: usize,
    latency_ms: u64,
    error: Option<ProviderError>,
) -> impl FnOnce(Scope) -> std::pin::Pin<Box<dyn Future<Output = Res>>> {
    let (sched, probe) = (sched.clone(), probe.clone());
    move |scope: Scope| {
        Box::pin(async move {
            let spec = CallSpec::new(0).in_scope(&scope);
            sched
                .call(spec, |_| {
                    let (probe, error) = (probe.clone(), error.clone());
                    async move {
                        let _alive = probe.enter(tag);
                        sleep(ms(latency_ms)).await;
                        error.map_or(Ok(tag), Err)
                    }
                })
                .await
        })
    }
}

async fn gather_fixed(max_concurrency: usize) -> Duration {
    let t0 = Instant::now();
    let (sched, log) = scheduler(max_concurrency);
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    let results = fan
        .gather((0..10).map(|i| job(&sched, &probe, i, 350, None)))
        .await;
    let values: Vec<usize> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(values, (0..10).collect::<Vec<_>>());
    assert_eq!(log.count(|k| matches!(k, EventKind::Sent { .. })), 10);
    t0.elapsed()
}

#[tokio::test(start_paused = true)]
async fn gather_of_ten_is_one_latency_unbounded_and_ten_at_concurrency_one() {
    assert_eq!(gather_fixed(0).await, ms(350));
    assert_eq!(gather_fixed(1).await, ms(3_500));
}

/// Makespan of list scheduling in submission order on `workers` (a FIFO semaphore): each job
/// starts on the worker that frees first. Returns each job's start and the total.
fn list_schedule(latencies: &[u64], workers: usize) -> (Vec<u64>, u64) {
    let mut free = vec![0u64; workers];
    let mut starts = Vec::new();
    for &lat in latencies {
        let w = (0..workers).min_by_key(|&w| free[w]).unwrap();
        starts.push(free[w]);
        free[w] += lat;
    }
    (starts, free.into_iter().max().unwrap())
}

#[tokio::test(start_paused = true)]
async fn bounded_gather_never_exceeds_its_cap_and_matches_a_fifo_semaphore() {
    let t0 = Instant::now();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let latencies: Vec<u64> = (0..8).map(|_| rng.random_range(200..=900)).collect();
    let (expected_starts, makespan) = list_schedule(&latencies, 4);
    let (sched, _log) = scheduler(4);
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    let jobs = latencies
        .iter()
        .enumerate()
        .map(|(i, &lat)| job(&sched, &probe, i, lat, None));
    let results = fan.gather(jobs).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(probe.peak.load(Ordering::SeqCst), 4, "at most 4 in flight");
    assert_eq!(t0.elapsed(), ms(makespan), "latencies {latencies:?}");
    let mut starts = probe.starts.lock().unwrap().clone();
    starts.sort_unstable();
    let starts: Vec<Duration> = starts.into_iter().map(|(_, at)| at).collect();
    let expected: Vec<Duration> = expected_starts.into_iter().map(ms).collect();
    assert_eq!(starts, expected, "latencies {latencies:?}");
}

#[tokio::test(start_paused = true)]
async fn gather_returns_every_result_in_job_order_including_failures() {
    let t0 = Instant::now();
    let (sched, _log) = scheduler(0);
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    // Later jobs finish first, so completion order is the reverse of job order.
    let jobs = (0..6).map(|i| {
        let error = (i % 2 == 1).then(|| ProviderError::status(400));
        job(&sched, &probe, i, 600 - 100 * i as u64, error)
    });
    let results = fan.gather(jobs).await;
    assert_eq!(t0.elapsed(), ms(600));
    assert_eq!(results.len(), 6);
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => assert!(i % 2 == 0 && v == i, "job {i} returned Ok({v})"),
            Err(CallError::Failed {
                error,
                attempts: 1,
                reason: GiveUp::NotRetryable,
            }) => {
                assert_eq!(i % 2, 1, "job {i} should have succeeded");
                assert!(matches!(error.kind, FailureKind::Status { code: 400, .. }));
            }
            Err(e) => panic!("job {i}: unexpected {e:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn as_completed_yields_in_completion_order_as_each_finishes() {
    let t0 = Instant::now();
    let (sched, _log) = scheduler(0);
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    let jobs = [300, 100, 200]
        .into_iter()
        .enumerate()
        .map(|(i, lat)| job(&sched, &probe, i, lat, None));
    let mut stream = std::pin::pin!(fan.as_completed(jobs));
    let mut seen = Vec::new();
    while let Some((i, r)) = stream.next().await {
        assert_eq!(r.unwrap(), i);
        seen.push((i, t0.elapsed()));
    }
    assert_eq!(seen, vec![(1, ms(100)), (2, ms(200)), (0, ms(300))]);
}

#[tokio::test(start_paused = true)]
async fn all_or_nothing_cancels_siblings_at_first_failure_and_leaves_nothing_behind() {
    let t0 = Instant::now();
    let (sched, log) = scheduler(0);
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    let tasks_before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let jobs = (0..4).map(|i| {
        let (lat, error) = match i {
            0 => (100, Some(ProviderError::status(400))),
            _ => (1_000, None),
        };
        job(&sched, &probe, i, lat, error)
    });
    let outcome = fan.all_or_nothing(jobs).await;
    let returned = t0.elapsed();
    assert_eq!(returned, ms(100));
    let Err(Failures {
        failures,
        cancelled,
    }) = outcome
    else {
        panic!("all_or_nothing succeeded despite a failure");
    };
    assert_eq!(failures.len(), 1);
    assert!(matches!(
        failures[0],
        (
            0,
            CallError::Failed {
                reason: GiveUp::NotRetryable,
                ..
            }
        )
    ));
    assert_eq!(cancelled, vec![1, 2, 3]);
    assert_eq!(
        probe.live.load(Ordering::SeqCst),
        0,
        "an attempt outlived the call"
    );
    let stopped = log
        .events()
        .into_iter()
        .filter(|e| {
            e.kind
                == EventKind::Cancelled {
                    stage: Stage::InFlight,
                    cause: Interrupt::Cancelled,
                }
        })
        .map(|e| e.at - t0)
        .collect::<Vec<_>>();
    assert_eq!(stopped, vec![ms(100); 3]);

    let sent_or_done = |log: &EventLog| {
        log.count(|k| matches!(k, EventKind::Sent { .. } | EventKind::Completed { .. }))
    };
    let before = sent_or_done(&log);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(
        sent_or_done(&log),
        before,
        "work ran after the call returned"
    );
    assert_eq!(log.count(|k| matches!(k, EventKind::Completed { .. })), 0);
    assert_eq!(probe.live.load(Ordering::SeqCst), 0);
    let tasks_after = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(tasks_after, tasks_before);
}

#[tokio::test(start_paused = true)]
async fn all_or_nothing_returns_every_value_in_order_when_all_succeed() {
    let t0 = Instant::now();
    let (sched, _log) = scheduler(0);
    let probe = Probe::new(t0);
    let fan = FanOut::new(&Scope::new());
    let jobs = [300, 100, 200]
        .into_iter()
        .enumerate()
        .map(|(i, lat)| job(&sched, &probe, i, lat, None));
    let values = fan.all_or_nothing(jobs).await.unwrap();
    assert_eq!(values, vec![0, 1, 2]);
    assert_eq!(t0.elapsed(), ms(300));
}

#[tokio::test(start_paused = true)]
async fn all_or_nothing_counts_a_stop_from_outside_as_every_jobs_failure() {
    let t0 = Instant::now();
    let (sched, _log) = scheduler(0);
    let probe = Probe::new(t0);
    let parent = Scope::new().child();
    let fan = FanOut::new(&parent);
    let jobs = (0..3).map(|i| job(&sched, &probe, i, 1_000, None));
    let stopper = async {
        sleep(ms(100)).await;
        parent.cancel();
    };
    let (outcome, ()) = tokio::join!(fan.all_or_nothing(jobs), stopper);
    assert_eq!(t0.elapsed(), ms(100));
    let Err(Failures {
        failures,
        cancelled,
    }) = outcome
    else {
        panic!("all_or_nothing succeeded despite its parent's cancel");
    };
    // The fan-out cancelled nothing itself: the parent stopped all three.
    assert_eq!(cancelled, Vec::<usize>::new());
    let mut stopped: Vec<usize> = failures.iter().map(|(i, _)| *i).collect();
    stopped.sort_unstable();
    assert_eq!(stopped, vec![0, 1, 2]);
    assert!(failures.iter().all(|(_, e)| e.is_interrupt()));
}
