//! The virtual-time simulator: the real scheduler against the in-process provider model on a
//! paused current-thread tokio runtime.
//!
//! Rules it follows (see DESIGN.md): the model runs under a time scale (one model millisecond is
//! one virtual second, so tokio's 1 ms timer tick is a model microsecond); every wait is to an
//! absolute instant; a virtual-time watchdog turns a run that cannot finish into an error; no
//! task is spawned per call (queries are polled in place; only work left running after its
//! caller gave up, with `transport_cancel = false`, gets a task of its own); every random
//! stream is seeded from the scenario's seed.

mod provider;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use capsize_mock::ProviderModel;
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use thiserror::Error;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use crate::recorder::{Recorder, Recording};
use crate::scenario::Subagents;
use crate::scenario::{Arrivals, ModelTurn, Scenario, Stop};
use crate::scheduler::{
    Budget, CallError, CallSpec, ConfigError, FanOut, Limit, LimiterConfig, ProviderError,
    RetryPolicy, Scheduler, SchedulerConfig, Scope, TurnPolicy,
};
use crate::workload::{stream_seed, streams, PlannedCall, Planner, QueryPlan};
use provider::VirtualProvider;

/// Virtual time runs this many times slower than model time.
pub const SCALE: u32 = 1000;

/// The longest a run may take, in model time, before the watchdog stops it: a year. (Waits
/// this long are fine for tokio's timer wheel, which re-files entries beyond its 2-year span.)
pub const HORIZON: Duration = Duration::from_secs(365 * 86_400);

/// Why a simulation could not produce results.
#[derive(Debug, Error)]
pub enum SimError {
    /// The scheduler configuration derived from the scenario is invalid.
    #[error("scheduler: {0}")]
    Config(#[from] ConfigError),
    /// The run did not finish within the horizon (a deadlock, or a scenario far too long).
    #[error("the run did not finish within {0:?} of model time (deadlock, or a scenario too long to simulate)")]
    Watchdog(Duration),
    /// The runtime could not be built.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// What a simulation produced.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    /// Histograms and counters.
    pub recording: Recording,
    /// The provider's own counters.
    pub provider: capsize_mock::Counters,
    /// Model time from the start to the last query's end.
    pub elapsed: Duration,
    /// Queries started.
    pub queries_started: u64,
}

/// The scheduler configuration for a scenario, in virtual time (durations × scale, rates ÷ scale).
pub fn scheduler_config(s: &Scenario, scale: u32) -> SchedulerConfig {
    let sc = &s.scheduler;
    let f = f64::from(scale);
    let limit = |per_minute: Option<f64>| {
        per_minute.map(|pm| {
            // Capacity in tokens does not depend on the scale: `burst_s` of the scaled refill.
            let burst = (pm * sc.headroom / 60.0 * sc.burst_s).max(1.0);
            Limit::per_minute(pm / f).with_burst(burst)
        })
    };
    let limits = sc.rate_limit.then(|| LimiterConfig {
        requests: limit(s.provider.rpm),
        tokens: limit(s.provider.tpm),
        headroom: sc.headroom,
    });
    SchedulerConfig {
        max_concurrency: sc.max_concurrency,
        limits,
        retry: RetryPolicy {
            base: sc.retry.base * scale,
            cap: sc.retry.cap * scale,
            retry_after_cap: sc.retry.retry_after_cap * scale,
            ..sc.retry.clone()
        },
    }
}

struct Ctx {
    scheduler: Scheduler,
    provider: VirtualProvider,
    recorder: Arc<Recorder>,
    planner: RefCell<Planner>,
    turn: TurnPolicy,
    model_turn: Option<ModelTurn>,
    subagents: Option<Subagents>,
    t0: Instant,
    stop: Stop,
    parent_timeout: Option<Duration>,
    transport_cancel: bool,
    /// Cancelled at the user's stop time.
    root: Scope,
    started: Cell<u64>,
    last_end: Cell<Instant>,
    detached: Cell<usize>,
    detached_done: Notify,
}

impl Ctx {
    /// Whether another query may start now.
    fn take_ticket(&self) -> bool {
        if self.root.interrupted(false).is_some() {
            return false;
        }
        let ok = match self.stop {
            Stop::Queries(n) => self.started.get() < n,
            Stop::Duration(d) => Instant::now() < self.t0 + d * SCALE,
        };
        if ok {
            self.started.set(self.started.get() + 1);
        }
        ok
    }

    async fn call(
        &self,
        tokens: u64,
        model_turn: bool,
        scope: &Scope,
        abandoned: &Cell<bool>,
    ) -> Result<(), CallError<ProviderError>> {
        let latency = model_turn
            .then(|| self.model_turn.as_ref().and_then(|t| t.latency.as_ref()))
            .flatten();
        let spec = CallSpec::new(tokens).in_scope(scope);
        self.scheduler
            .call(spec, |_| self.provider.request(tokens, latency, abandoned))
            .await
    }
}

/// Runs one agent's rounds in `scope`; returns true if any call failed or was stopped. A budget
/// in the scope counts one iteration per round and stops the agent when it is spent.
async fn run_agent(
    ctx: &Ctx,
    rounds: &[Vec<PlannedCall>],
    scope: &Scope,
    abandoned: &Cell<bool>,
) -> bool {
    let mut failed = false;
    for (round, calls) in rounds.iter().enumerate() {
        if let Some(budget) = scope.budget() {
            if budget.start_iteration().is_err() {
                return true;
            }
        }
        if round > 0 {
            if let Some(turn) = &ctx.model_turn {
                failed |= ctx.call(turn.tokens, true, scope, abandoned).await.is_err();
            }
        }
        let results = ctx
            .scheduler
            .dispatch(&ctx.turn, calls, |_, c| {
                ctx.call(c.tokens, false, scope, abandoned)
            })
            .await;
        // A call over the turn's cap was answered "not run": the query goes on without it.
        failed |= results
            .iter()
            .any(|r| matches!(r, Err(e) if !matches!(e, CallError::NotRun(_))));
        if scope.interrupted(true).is_some() {
            return true;
        }
    }
    failed
}

/// Runs one query: a single agent, or an orchestrator that fans out to budgeted subagents and
/// then synthesises. Returns true if any call failed or was stopped.
async fn run_query(ctx: Rc<Ctx>, plan: QueryPlan, scope: Scope, abandoned: Rc<Cell<bool>>) -> bool {
    let Some(sub) = ctx.subagents else {
        let rounds = plan.agents.first().map_or(&[][..], Vec::as_slice);
        return run_agent(&ctx, rounds, &scope, &abandoned).await;
    };
    let budget = Budget::new("query", sub.orchestrator_budget, None);
    let fan = FanOut::new(&scope);
    let jobs = plan.agents.iter().enumerate().map(|(i, rounds)| {
        let (ctx, budget, abandoned) = (&ctx, &budget, &abandoned);
        move |s: Scope| async move {
            let child = budget.child(
                format!("subagent {i}"),
                sub.budget_tokens,
                sub.max_iterations,
            );
            run_agent(ctx, rounds, &s.with_budget(child), abandoned).await
        }
    });
    let mut failed = fan.gather(jobs).await.into_iter().any(|f| f);
    if sub.synthesis_tokens > 0 && scope.interrupted(false).is_none() {
        let synth = scope.clone().with_budget(budget);
        failed |= ctx
            .call(sub.synthesis_tokens, true, &synth, &abandoned)
            .await
            .is_err();
    }
    failed
}

/// Runs one query that should have started at `intended`, and records how it ended.
async fn one_query(ctx: Rc<Ctx>, intended: Instant) {
    let plan = ctx.planner.borrow_mut().query();
    let abandoned = Rc::new(Cell::new(false));
    // What ends the caller's wait: the user's stop (on the root scope, if any) and the parent
    // timeout. A query is never cancelled on its own, so it needs no token of its own.
    let mut scope = ctx.root.clone();
    if let Some(t) = ctx.parent_timeout {
        scope = scope.with_deadline(intended + t);
    }
    let failed = if ctx.transport_cancel {
        // The scope stops the work itself: queued calls are never sent, in-flight ones dropped.
        run_query(ctx.clone(), plan, scope.clone(), abandoned.clone()).await
    } else {
        // Nothing stops the work: the caller may stop waiting, and the work runs on, detached.
        ctx.detached.set(ctx.detached.get() + 1);
        let work = tokio::task::spawn_local({
            let (ctx, abandoned) = (ctx.clone(), abandoned.clone());
            async move {
                let failed = run_query(ctx.clone(), plan, Scope::new(), abandoned).await;
                ctx.detached.set(ctx.detached.get() - 1);
                ctx.detached_done.notify_waiters();
                failed
            }
        });
        // Dropping the handle when the scope stops the wait leaves the task running.
        match scope.run(false, work).await {
            Ok(failed) => failed.unwrap_or(true),
            Err(_) => true,
        }
    };
    if scope.interrupted(false).is_some() {
        abandoned.set(true);
        ctx.recorder.query_abandoned();
        return;
    }
    let now = Instant::now();
    ctx.last_end.set(ctx.last_end.get().max(now));
    ctx.recorder.query_done(now - intended, failed);
}

async fn session(ctx: Rc<Ctx>) {
    let mut intended = Instant::now();
    while ctx.take_ticket() {
        one_query(ctx.clone(), intended).await;
        let think = ctx.planner.borrow_mut().think();
        intended = Instant::now() + think * SCALE;
        sleep_until(intended).await;
    }
}

async fn open_arrivals(ctx: Rc<Ctx>) {
    // One task per query in flight (bounded by the queries in flight, not by the calls).
    let mut inflight = JoinSet::new();
    let mut next = Some(ctx.t0);
    loop {
        tokio::select! {
            _ = sleep_until(next.unwrap_or(ctx.t0)), if next.is_some() => {
                let at = next.unwrap_or(ctx.t0);
                if ctx.take_ticket() {
                    inflight.spawn_local(one_query(ctx.clone(), at));
                    let gap = ctx.planner.borrow_mut().gap().unwrap_or(Duration::ZERO);
                    next = Some(at + gap * SCALE);
                } else {
                    next = None;
                }
            }
            Some(done) = inflight.join_next(), if !inflight.is_empty() => reraise(done),
            else => break,
        }
    }
}

/// Re-raises a task's panic in the caller (a task is never aborted here).
fn reraise(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// Runs `work` until it finishes, or returns `None` once virtual time reaches `deadline`. The
/// deadline's timer waits in a task of its own, so the work's many wakes never poll it.
async fn within<F: Future>(deadline: Instant, work: F) -> Option<F::Output> {
    let fired = Rc::new(Cell::new(false));
    let waker = Rc::new(RefCell::new(None::<Waker>));
    let dog = tokio::task::spawn_local({
        let (fired, waker) = (fired.clone(), waker.clone());
        async move {
            sleep_until(deadline).await;
            fired.set(true);
            if let Some(w) = waker.borrow_mut().take() {
                w.wake();
            }
        }
    });
    let mut work = std::pin::pin!(work);
    let out = std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if fired.get() {
            return Poll::Ready(None);
        }
        let mut w = waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
        Poll::Pending
    })
    .await;
    dog.abort();
    out
}

async fn simulate(s: &Scenario) -> Result<SimOutcome, SimError> {
    let t0 = Instant::now();
    let recorder = Arc::new(Recorder::new(SCALE));
    let jitter = Xoshiro256PlusPlus::seed_from_u64(stream_seed(s.seed, streams::JITTER));
    let scheduler = Scheduler::builder(scheduler_config(s, SCALE))
        .rng(jitter)
        .observer(recorder.clone())
        .build()?;
    let model = ProviderModel::new(s.provider.clone(), stream_seed(s.seed, streams::PROVIDER));
    let stop = CancellationToken::new();
    let ctx = Rc::new(Ctx {
        scheduler,
        provider: VirtualProvider::new(model, recorder.clone(), t0, SCALE, s.scheduler.timeout),
        recorder: recorder.clone(),
        planner: RefCell::new(Planner::new(&s.workload, s.seed)),
        turn: s.scheduler.turn,
        model_turn: s.workload.model_turn.clone(),
        subagents: s.workload.subagents,
        t0,
        stop: s.workload.stop,
        parent_timeout: s.workload.parent_timeout.map(|t| t * SCALE),
        transport_cancel: s.scheduler.transport_cancel,
        // Without a stop time nothing cancels the root: leave out the token (and the cost of
        // watching it in every call).
        root: match s.workload.stop_at {
            Some(_) => Scope::new().with_cancel(stop.clone()),
            None => Scope::new(),
        },
        started: Cell::new(0),
        last_end: Cell::new(t0),
        detached: Cell::new(0),
        detached_done: Notify::new(),
    });
    let traffic = async {
        match s.workload.arrivals {
            Arrivals::Closed { sessions } => {
                // One task per session (a bounded number, not one per call): a wake reaches
                // only the session it is for.
                let mut all = JoinSet::new();
                for _ in 0..sessions {
                    all.spawn_local(session(ctx.clone()));
                }
                while let Some(done) = all.join_next().await {
                    reraise(done);
                }
            }
            Arrivals::Open { .. } => open_arrivals(ctx.clone()).await,
        }
    };
    let user_stop = async {
        match s.workload.stop_at {
            Some(at) => {
                sleep_until(t0 + at * SCALE).await;
                stop.cancel();
            }
            None => std::future::pending::<()>().await,
        }
    };
    let run = async {
        tokio::pin!(traffic);
        // At a user stop the traffic winds down (queries see the stop through their scope).
        tokio::select! {
            _ = &mut traffic => {}
            _ = user_stop => traffic.await,
        }
        // Then work left running after its caller gave up is let finish (it is still charged).
        while ctx.detached.get() > 0 {
            let done = ctx.detached_done.notified();
            if ctx.detached.get() == 0 {
                break;
            }
            done.await;
        }
    };
    let local = tokio::task::LocalSet::new();
    local
        .run_until(within(t0 + HORIZON * SCALE, run))
        .await
        .ok_or(SimError::Watchdog(HORIZON))?;
    let elapsed = ctx.last_end.get() - t0;
    Ok(SimOutcome {
        recording: recorder.finish(),
        provider: ctx.provider.counters(),
        elapsed: elapsed / SCALE,
        queries_started: ctx.started.get(),
    })
}

/// Simulates `scenario` in virtual time on a fresh paused runtime.
pub fn run(scenario: &Scenario) -> Result<SimOutcome, SimError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    // Boxed: the runtime moves the top future's output on every poll, so keep it small.
    let out = rt.block_on(async { simulate(scenario).await.map(Box::new) })?;
    Ok(*out)
}
