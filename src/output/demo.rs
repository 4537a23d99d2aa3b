//! `capsize demo`: the article's scheduler examples, run through the real scheduler in virtual
//! time against tools of fixed latency, with every figure measured (nothing is computed from a
//! formula here; the formula is printed beside it for comparison).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::sim::runtime::{run_virtual, DesRuntime};
use crate::scheduler::dispatch::Tool;
use crate::scheduler::observe::EventLog;
use crate::scheduler::{
    Budget, CallError, CallSpec, CapPolicy, Clock, EventKind, FanOut, Limit, LimiterConfig,
    ProviderError, Scheduler, SchedulerConfig, Scope, TurnPolicy,
};

/// The demo's clock: virtual time, exact to the nanosecond.
type Rt = DesRuntime;

/// One measured example: what was run, what the arithmetic says, what the scheduler did.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The example.
    pub example: &'static str,
    /// The closed-form expectation.
    pub expected: String,
    /// What was measured in virtual time.
    pub measured: String,
}

/// A scheduler for the demo, its events kept in a log.
fn scheduler(
    rt: &Rt,
    max_concurrency: usize,
    limits: Option<LimiterConfig>,
) -> (Scheduler<Rt>, Arc<EventLog>) {
    let config = SchedulerConfig {
        max_concurrency,
        limits,
        ..SchedulerConfig::default()
    };
    let log = Arc::new(EventLog::new());
    // The demo's configurations are fixed and valid; a failure here is a bug worth a loud stop.
    let s = Scheduler::builder(config)
        .clock(rt.clone())
        .observer(log.clone())
        .build()
        .expect("demo scheduler config is valid");
    (s, log)
}

/// A tool call that takes `ms` milliseconds and succeeds.
async fn tool(rt: &Rt, ms: u64) -> Result<(), ProviderError> {
    rt.sleep_until(rt.now() + Duration::from_millis(ms)).await;
    Ok(())
}

async fn quotes(rt: &Rt, max_concurrency: usize) -> Duration {
    let (s, _) = scheduler(rt, max_concurrency, None);
    let t0 = rt.now();
    let fan = FanOut::new(&Scope::new());
    let jobs = (0..10).map(|_| {
        let s = &s;
        move |scope: Scope| async move {
            s.call(CallSpec::new(0).in_scope(&scope), |_| tool(rt, 350))
                .await
        }
    });
    fan.gather(jobs).await;
    rt.now() - t0
}

async fn tpm_burst(rt: &Rt) -> (Duration, Duration) {
    let limits = LimiterConfig {
        tokens: Some(Limit::per_minute(10_000_000.0).with_burst(200_000.0)),
        ..LimiterConfig::default()
    };
    let (s, log) = scheduler(rt, 0, Some(limits));
    let t0 = rt.now();
    let jobs = (0..200).map(|_| {
        let s = &s;
        move |scope: Scope| async move {
            s.call(CallSpec::new(2000).in_scope(&scope), |_| tool(rt, 0))
                .await
        }
    });
    FanOut::new(&Scope::new()).gather(jobs).await;
    let sends: Vec<Duration> = log
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Sent { .. }))
        .map(|e| e.at - t0)
        .collect();
    let first_wait = sends
        .iter()
        .copied()
        .find(|d| !d.is_zero())
        .unwrap_or_default();
    (first_wait, sends.iter().copied().max().unwrap_or_default())
}

async fn capped_turn(rt: &Rt, over_cap: CapPolicy) -> (usize, usize, Duration) {
    let (s, _) = scheduler(rt, 0, None);
    let calls: Vec<Tool> = (0..30).map(|i| Tool::read(format!("search_{i}"))).collect();
    let policy = TurnPolicy {
        max_parallel: 8,
        over_cap,
    };
    let t0 = rt.now();
    let results = s
        .dispatch(&policy, &calls, |_, _| {
            s.call(CallSpec::new(0), |_| tool(rt, 350))
        })
        .await;
    let ran = results.iter().filter(|r| r.is_ok()).count();
    let not_run = results
        .iter()
        .filter(|r| matches!(r, Err(CallError::NotRun(_))))
        .count();
    (ran, not_run, rt.now() - t0)
}

fn budgets() -> (u64, u64, bool) {
    let orchestrator = Budget::new("orchestrator", 50_000, None);
    for (name, used) in [("a", 12_000), ("b", 14_000), ("c", 8_000)] {
        let sub = orchestrator.child(name, 15_000, Some(10));
        // Each subagent spends what the article says it used; within its 15k grant.
        let _ = sub.charge(used);
    }
    let (used, left) = (orchestrator.used(), orchestrator.remaining());
    (used, left, orchestrator.charge(5_000).is_ok())
}

/// Runs every example in virtual time and returns the measured rows.
pub fn rows() -> Vec<Row> {
    // Nothing here waits on anything but timers, so the run cannot stall.
    run_virtual(Duration::from_nanos(1), |rt| async move {
        let rt = &rt;
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
        let mut rows = Vec::new();
        let seq = quotes(rt, 1).await;
        let par = quotes(rt, 0).await;
        rows.push(Row {
            example: "10 quotes x 350 ms, max_concurrency 1",
            expected: "3500 ms".into(),
            measured: ms(seq),
        });
        rows.push(Row {
            example: "10 quotes x 350 ms, gathered",
            expected: "350 ms".into(),
            measured: ms(par),
        });
        let (first, last) = tpm_burst(rt).await;
        rows.push(Row {
            example: "200 x 2000 tokens at once, 10M TPM bucket of 200k: first wait",
            expected: "2000 / 166667 s = 12 ms".into(),
            measured: ms(first),
        });
        rows.push(Row {
            example: "200 x 2000 tokens at once, 10M TPM bucket of 200k: last send",
            expected: "200000 / 166667 s = 1200 ms".into(),
            measured: ms(last),
        });
        let turns = [
            (
                CapPolicy::Truncate,
                "30 tool calls, cap 8, truncate",
                "8 run, 22 not run, 350 ms",
            ),
            (
                CapPolicy::Batch,
                "30 tool calls, cap 8, batch",
                "30 run in 4 batches, 1400 ms",
            ),
        ];
        for (policy, example, expected) in turns {
            let (ran, not_run, took) = capped_turn(rt, policy).await;
            rows.push(Row {
                example,
                expected: expected.into(),
                measured: format!("{ran} run, {not_run} not run, {}", ms(took)),
            });
        }
        let (used, left, fits) = budgets();
        rows.push(Row {
            example: "50k budget, subagents use 12k/14k/8k of 15k each",
            expected: "34000 used, 16000 left, 5k synthesis fits".into(),
            measured: format!(
                "{used} used, {left} left, 5k synthesis {}",
                if fits { "fits" } else { "does not fit" }
            ),
        });
        rows
    })
    .expect("the demo waits only on timers")
}

/// The rows as an aligned text table.
pub fn render(rows: &[Row]) -> String {
    let w0 = rows
        .iter()
        .map(|r| r.example.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let w1 = rows
        .iter()
        .map(|r| r.expected.len())
        .max()
        .unwrap_or(0)
        .max(8);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<w0$}  {:<w1$}  measured (virtual time)",
        "example", "expected"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {}",
            r.example, r.expected, r.measured
        );
    }
    out
}
