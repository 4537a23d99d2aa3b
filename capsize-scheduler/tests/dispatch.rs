//! Tool dispatch for one turn: the per-turn cap (truncate answers the rest "not run", batch runs
//! sequential batches), writes one at a time in the order given while reads run in parallel,
//! results in call order, and `max_parallel: 0` meaning no cap.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capsize_scheduler::dispatch::{CapPolicy, Tool, TurnPolicy};
use capsize_scheduler::observe::{EventLog, NotRunReason};
use capsize_scheduler::{
    CallError, CallSpec, EventKind, ProviderError, Scheduler, SchedulerConfig,
};
use tokio::time::{sleep, Instant};

mod common;
use common::{logged, ms};

type Res = Result<usize, CallError<ProviderError>>;

fn scheduler() -> (Scheduler, Arc<EventLog>) {
    logged(SchedulerConfig::default())
}

/// When each tool call ran, in the order they finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    index: usize,
    start: Duration,
    end: Duration,
}

impl Run {
    fn overlaps(&self, other: &Run) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// Runs one turn of `calls` by `policy`; call `i` takes `latencies[i]` ms and answers `Ok(i)`.
async fn turn(
    sched: &Scheduler,
    policy: TurnPolicy,
    calls: &[Tool],
    latencies: &[u64],
    t0: Instant,
) -> (Vec<Res>, Vec<Run>) {
    let trace = Arc::new(Mutex::new(Vec::new()));
    let results = sched
        .dispatch(&policy, calls, |i, _tool| {
            let (sched, trace, latency) = (sched.clone(), trace.clone(), latencies[i]);
            async move {
                sched
                    .call(CallSpec::new(0), |_| {
                        let trace = trace.clone();
                        async move {
                            let start = t0.elapsed();
                            sleep(ms(latency)).await;
                            let end = t0.elapsed();
                            trace.lock().unwrap().push(Run {
                                index: i,
                                start,
                                end,
                            });
                            Ok::<_, ProviderError>(i)
                        }
                    })
                    .await
            }
        })
        .await;
    let runs = trace.lock().unwrap().clone();
    (results, runs)
}

/// Times (since `t0`) of every `Sent` event.
fn send_times(log: &EventLog, t0: Instant) -> Vec<Duration> {
    let events = log.events().into_iter();
    let sent = events.filter(|e| matches!(e.kind, EventKind::Sent { .. }));
    sent.map(|e| e.at - t0).collect()
}

fn reads(n: usize) -> Vec<Tool> {
    (0..n).map(|i| Tool::read(format!("read_{i}"))).collect()
}

fn policy(max_parallel: usize, over_cap: CapPolicy) -> TurnPolicy {
    TurnPolicy {
        max_parallel,
        over_cap,
    }
}

fn assert_all_ran(results: &[Res]) {
    let values: Vec<usize> = results.iter().map(|r| *r.as_ref().unwrap()).collect();
    assert_eq!(values, (0..results.len()).collect::<Vec<_>>());
}

#[tokio::test(start_paused = true)]
async fn truncate_runs_the_cap_and_tells_the_model_about_the_rest() {
    let t0 = Instant::now();
    let (sched, log) = scheduler();
    let calls = reads(30);
    let truncate = policy(8, CapPolicy::Truncate);
    let (results, _) = turn(&sched, truncate, &calls, &[350; 30], t0).await;
    assert_eq!(t0.elapsed(), ms(350));
    assert_all_ran(&results[..8]);
    let over_cap = NotRunReason::OverCap { cap: 8, asked: 30 };
    for r in &results[8..] {
        let Err(CallError::NotRun(reason)) = r else {
            panic!("expected NotRun, got {r:?}");
        };
        assert_eq!(*reason, over_cap);
        let msg = reason.to_string();
        assert!(msg.contains("at most 8") && msg.contains("30"), "{msg:?}");
    }
    let not_run = log.count(|k| {
        *k == EventKind::NotRun {
            reason: over_cap.clone(),
        }
    });
    assert_eq!(not_run, 22);
    assert_eq!(send_times(&log, t0), vec![Duration::ZERO; 8]);
}

#[tokio::test(start_paused = true)]
async fn batch_runs_every_call_in_sequential_batches_of_the_cap() {
    let t0 = Instant::now();
    let (sched, log) = scheduler();
    let calls = reads(30);
    let batch = policy(8, CapPolicy::Batch);
    let (results, _) = turn(&sched, batch, &calls, &[350; 30], t0).await;
    assert_eq!(t0.elapsed(), ms(1_400));
    assert_all_ran(&results);
    let mut expected = Vec::new();
    for (at, n) in [(0, 8), (350, 8), (700, 8), (1_050, 6)] {
        expected.extend(std::iter::repeat_n(ms(at), n));
    }
    assert_eq!(send_times(&log, t0), expected);
    assert_eq!(log.count(|k| matches!(k, EventKind::NotRun { .. })), 0);
}

#[tokio::test(start_paused = true)]
async fn writes_run_alone_in_order_while_reads_run_in_parallel() {
    let t0 = Instant::now();
    let (sched, _log) = scheduler();
    let calls = [
        Tool::read("search"),
        Tool::write("edit_a"),
        Tool::read("grep"),
        Tool::write("edit_b"),
        Tool::write("edit_c"),
        Tool::read("ls"),
    ];
    let latencies = [500, 300, 400, 100, 200, 450];
    let (results, runs) = turn(&sched, TurnPolicy::default(), &calls, &latencies, t0).await;
    assert_all_ran(&results);
    let run = |i: usize| *runs.iter().find(|r| r.index == i).unwrap();

    for i in [0, 2, 5] {
        assert_eq!(
            run(i).start,
            Duration::ZERO,
            "read {i} did not start at once"
        );
    }
    // Writes finish in the order given, each alone: nothing else in flight beside it.
    let writes: Vec<Run> = runs
        .iter()
        .copied()
        .filter(|r| [1, 3, 4].contains(&r.index))
        .collect();
    let order: Vec<usize> = writes.iter().map(|r| r.index).collect();
    assert_eq!(order, vec![1, 3, 4]);
    for w in &writes {
        let beside: Vec<&Run> = runs.iter().filter(|r| r != &w && r.overlaps(w)).collect();
        assert!(beside.is_empty(), "write {w:?} overlapped {beside:?}");
    }
    let ends: Vec<Duration> = writes.iter().map(|w| w.end).collect();
    assert_eq!(ends, vec![ms(800), ms(900), ms(1_100)]);
    assert_eq!(t0.elapsed(), ms(1_100));
}

#[tokio::test(start_paused = true)]
async fn max_parallel_zero_means_no_cap() {
    for over_cap in [CapPolicy::Truncate, CapPolicy::Batch] {
        let t0 = Instant::now();
        let (sched, log) = scheduler();
        let calls = reads(30);
        let (results, _) = turn(&sched, policy(0, over_cap), &calls, &[350; 30], t0).await;
        assert_eq!(t0.elapsed(), ms(350), "{over_cap:?}");
        assert_all_ran(&results);
        assert_eq!(
            send_times(&log, t0),
            vec![Duration::ZERO; 30],
            "{over_cap:?}"
        );
        assert_eq!(log.count(|k| matches!(k, EventKind::NotRun { .. })), 0);
    }
}
