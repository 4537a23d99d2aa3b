//! Drives a scenario's workload through the scheduler to a provider, in either mode.
//!
//! Sessions (closed loop) or arrivals (open loop) start queries; a query runs one agent's rounds,
//! or an orchestrator's budgeted subagents; every call goes through the real scheduler to a
//! [`Provider`]. The code reads time and spawns tasks only through its [`Runtime`] and converts
//! model durations with a [`TimeScale`], so the same driver runs on the virtual clock and on the
//! real one. Tasks are
//! bounded: one per session or per query in flight, never one per call (only work left running
//! after its caller gave up, with `transport_cancel = false`, gets a task of its own).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use futures_util::future::Either;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::Notify;

use super::replica::Slice;
use super::runtime::Runtime;

use crate::engine::provider::{Provider, QueryState};
use crate::engine::recorder::{Recorder, Spent};
use crate::engine::routes::{self, Routes};
use crate::engine::scenario::{Arrivals, ModelTurn, Scenario, Stop, Subagents, TurnPlacement};
use crate::engine::timescale::TimeScale;
use crate::engine::workload::{PlannedCall, Planner, QueryPlan};
use crate::scheduler::{
    Budget, CallError, CallSpec, FanOut, Interrupt, LimitStats, ProviderError, Scheduler, Scope,
    TurnPolicy, Via, Work,
};

/// What the replicas of a run share: the workload, the clock, the provider, the recorder.
struct Ctx<P, R: Runtime> {
    rt: R,
    provider: Rc<P>,
    scale: TimeScale,
    recorder: Arc<Recorder<R::Instant>>,
    planner: RefCell<Planner>,
    turn: TurnPolicy,
    model_turn: Option<ModelTurn>,
    subagents: Option<Subagents>,
    t0: R::Instant,
    stop: Stop,
    /// Queries this process may start, with `Stop::Queries` (its slice's share of a closed
    /// workload's; every arrival of an open one, which it thins itself).
    tickets: u64,
    /// The part of the workload this process drives.
    slice: Slice,
    /// Arrivals of an open workload left to the other replicas' processes.
    skipped: Cell<u64>,
    parent_timeout: Option<Duration>,
    transport_cancel: bool,
    /// The most queries one session runs.
    per_session: Option<u64>,
    /// Cancelled at the user's stop time.
    root: Scope<R::Instant>,
    started: Cell<u64>,
    last_end: Cell<R::Instant>,
    detached: Cell<usize>,
    detached_done: Notify,
}

/// One replica of the client: its own scheduler, and the limiter each route waits in, over
/// the run's shared [`Ctx`]. A run without `[fleet]` has one.
struct Replica<P, R: Runtime> {
    run: Rc<Ctx<P, R>>,
    scheduler: Scheduler<R>,
    /// The limiter each route waits in.
    vias: Vec<Via>,
    /// Its place among the replicas.
    index: usize,
    /// Queries it finished.
    queries: Cell<u64>,
}

impl<P, R: Runtime> Deref for Replica<P, R> {
    type Target = Ctx<P, R>;

    fn deref(&self) -> &Ctx<P, R> {
        &self.run
    }
}

impl<P: Provider, R: Runtime> Ctx<P, R> {
    /// Whether another query may start now.
    fn take_ticket(&self) -> bool {
        if self.stopped(&self.root, Work::Sent) {
            return false;
        }
        let ok = match self.stop {
            Stop::Queries(_) => self.started.get() < self.tickets,
            Stop::Duration(d) => self.rt.now() < self.t0 + self.scale.to_runtime(d),
        };
        if ok {
            self.started.set(self.started.get() + 1);
        }
        ok
    }

    /// Whether `scope` has stopped `work` by now, on the run's clock.
    fn stopped(&self, scope: &Scope<R::Instant>, work: Work) -> bool {
        scope.watches(work) && scope.interrupted_at(work, self.rt.now()).is_some()
    }
}

impl<P: Provider, R: Runtime> Replica<P, R> {
    /// One call of `tokens` along `route` through the scheduler to the provider. (The
    /// scheduler's future itself, not awaited inside another: one layer less to poll; built
    /// inline where it is awaited, so it is not copied on its way there.)
    #[inline(always)]
    fn call<'a>(
        &'a self,
        tokens: u64,
        route: u16,
        scope: &Scope<R::Instant>,
        query: &'a QueryState,
    ) -> impl Future<Output = Result<(), CallError<ProviderError>>> + 'a {
        let spec = CallSpec::of(tokens)
            .in_scope(scope)
            .via(self.vias[usize::from(route)]);
        self.scheduler
            .call(spec, move |_| self.provider.request(tokens, route, query))
    }
}

/// Runs one agent's rounds, with its model turns among them, in `scope`; returns true if any call failed or was stopped. A budget
/// in the scope counts one iteration per round and stops the agent when it is spent.
async fn run_agent<P: Provider, R: Runtime>(
    ctx: &Replica<P, R>,
    rounds: &[Vec<PlannedCall>],
    scope: Scope<R::Instant>,
    query: &QueryState,
) -> bool {
    let scope = &scope;
    let mut failed = false;
    for (round, calls) in rounds.iter().enumerate() {
        if let Some(budget) = scope.budget() {
            if budget.start_iteration().is_err() {
                return true;
            }
        }
        if let Some(turn) = ctx.model_turn.as_ref().filter(|t| t.before(round)) {
            failed |= model_turn(ctx, turn, scope, query).await;
        }
        failed |= match calls.as_slice() {
            // One call is never over a turn's cap: dispatching it would only wrap it in a Vec.
            [only] => ctx
                .call(only.tokens, only.route, scope, query)
                .await
                .is_err(),
            _ => ctx
                .scheduler
                .dispatch(&ctx.turn, calls, |_, c| {
                    ctx.call(c.tokens, c.route, scope, query)
                })
                .await
                .iter()
                // A call over the turn's cap was answered "not run": the query goes on
                // without it.
                .any(|r| matches!(r, Err(e) if !matches!(e, CallError::NotRun(_)))),
        };
        if ctx.stopped(scope, Work::Unsent) {
            return true;
        }
    }
    // The loop an agent is built as ends with the model's answer.
    if let Some(turn) = ctx
        .model_turn
        .as_ref()
        .filter(|t| t.at == TurnPlacement::Around)
    {
        failed |= model_turn(ctx, turn, scope, query).await;
    }
    failed
}

/// Takes one model turn; true if it failed or was stopped.
async fn model_turn<P: Provider, R: Runtime>(
    ctx: &Replica<P, R>,
    turn: &ModelTurn,
    scope: &Scope<R::Instant>,
    query: &QueryState,
) -> bool {
    if !ctx.recorder.times_model_turns() {
        return ctx
            .call(turn.tokens, routes::MODEL, scope, query)
            .await
            .is_err();
    }
    let start = ctx.rt.now();
    let failed = ctx
        .call(turn.tokens, routes::MODEL, scope, query)
        .await
        .is_err();
    if !failed {
        ctx.recorder.model_turn_done(ctx.rt.now() - start);
    }
    failed
}

/// Runs one query: a single agent, or an orchestrator that fans out to budgeted subagents and
/// then synthesises. Returns true if any call failed or was stopped. (A single agent's rounds
/// are the future itself, not awaited inside another: one layer less to poll per call.)
fn run_query<'a, P: Provider, R: Runtime>(
    ctx: &'a Replica<P, R>,
    plan: &'a QueryPlan,
    scope: Scope<R::Instant>,
    query: &'a QueryState,
) -> impl Future<Output = bool> + 'a {
    match ctx.subagents {
        None => Either::Left(run_agent(ctx, single_agent(plan), scope, query)),
        Some(sub) => Either::Right(run_orchestrator(ctx, plan, sub, scope, query)),
    }
}

/// The rounds of a query without subagents: its one agent's.
fn single_agent(plan: &QueryPlan) -> &[Vec<PlannedCall>] {
    plan.agents.first().map_or(&[][..], Vec::as_slice)
}

/// An orchestrator's query: budgeted subagents in parallel, then a synthesis turn.
async fn run_orchestrator<P: Provider, R: Runtime>(
    ctx: &Replica<P, R>,
    plan: &QueryPlan,
    sub: Subagents,
    scope: Scope<R::Instant>,
    query: &QueryState,
) -> bool {
    let budget = Budget::new("query", sub.orchestrator_budget, None);
    let fan = FanOut::on(ctx.rt.clone(), &scope);
    let jobs = plan.agents.iter().enumerate().map(|(i, rounds)| {
        let budget = &budget;
        move |s: Scope<R::Instant>| async move {
            let child = budget.child(
                format!("subagent {i}"),
                sub.budget_tokens,
                sub.max_iterations,
            );
            run_agent(ctx, rounds, s.with_budget(child), query).await
        }
    });
    let mut failed = fan.gather(jobs).await.into_iter().any(|f| f);
    if sub.synthesis_tokens > 0 && !ctx.stopped(&scope, Work::Sent) {
        let left = budget.remaining();
        let synth = scope.clone().with_budget(budget);
        let result = ctx
            .call(sub.synthesis_tokens, routes::MODEL, &synth, query)
            .await;
        let refused = matches!(
            result,
            Err(CallError::Interrupted {
                cause: Interrupt::BudgetExhausted(_),
                ..
            })
        );
        ctx.recorder.synthesis(left, refused);
        failed |= result.is_err();
    }
    failed
}

/// Runs one query that should have started at `intended`, planned into `plan` (a buffer the
/// caller reuses), and records how it ended.
async fn one_query<P: Provider + 'static, R: Runtime>(
    ctx: &Rc<Replica<P, R>>,
    intended: R::Instant,
    plan: &mut QueryPlan,
) {
    let now = ctx.rt.now();
    // Compared first: a query usually starts on time, and comparing instants is cheap.
    let late = if now > intended {
        now - intended
    } else {
        Duration::ZERO
    };
    ctx.planner.borrow_mut().fill(plan);
    // What ends the caller's wait: the user's stop (on the root scope, if any) and the parent
    // timeout. A query is never cancelled on its own, so it needs no token of its own.
    let mut scope = ctx.root.clone();
    if let Some(t) = ctx.parent_timeout {
        scope = scope.with_deadline(intended + t);
    }
    let (failed, used) = if ctx.transport_cancel || !scope.watches(Work::Sent) {
        // With transport cancellation the scope stops the work itself: queued calls are never
        // sent, in-flight ones dropped. Otherwise nothing stops the work, and nothing stops
        // the caller's wait for it.
        let work = if ctx.transport_cancel {
            scope.clone()
        } else {
            Scope::default()
        };
        let query = QueryState::on_replica(ctx.index);
        // Awaited here rather than through `run_query`'s Either: one layer less to poll.
        let failed = match ctx.subagents {
            None => run_agent(ctx, single_agent(plan), work, &query).await,
            Some(sub) => run_orchestrator(ctx, plan, sub, work, &query).await,
        };
        (failed, query.used())
    } else {
        detachable_query(ctx, std::mem::take(plan), &scope).await
    };
    if ctx.stopped(&scope, Work::Sent) {
        ctx.recorder.query_abandoned(late, used);
        return;
    }
    let now = ctx.rt.now();
    ctx.last_end.set(ctx.last_end.get().max(now));
    ctx.queries.set(ctx.queries.get() + 1);
    ctx.recorder.query_done(late, now - intended, failed, used);
}

/// Runs a query whose caller may stop waiting (`scope` stops the wait) while the work runs
/// on. The work is polled here until then (so work that ends at the instant the wait stops
/// keeps its result, whatever order tasks run in), and handed to a task of its own after, its
/// answers from then on orphaned. Returns true if any call failed, or the wait was stopped,
/// and what the answers it used until then were billed.
async fn detachable_query<P: Provider + 'static, R: Runtime>(
    ctx: &Rc<Replica<P, R>>,
    plan: QueryPlan,
    scope: &Scope<R::Instant>,
) -> (bool, Spent) {
    let query = Rc::new(QueryState::on_replica(ctx.index));
    let mut work = Box::pin({
        let (ctx, query) = (ctx.clone(), query.clone());
        async move { run_query(&ctx, &plan, Scope::default(), &query).await }
    });
    match scope.run_on(&ctx.rt, Work::Sent, work.as_mut()).await {
        Ok(failed) => (failed, query.used()),
        Err(_) => {
            query.abandoned.set(true);
            ctx.detached.set(ctx.detached.get() + 1);
            let ctx2 = ctx.clone();
            R::detach(ctx.rt.spawn(async move {
                work.await;
                ctx2.detached.set(ctx2.detached.get() - 1);
                ctx2.detached_done.notify_waiters();
            }));
            (true, query.used())
        }
    }
}

/// A closed-loop session starts at most one query per model microsecond: a query that takes no
/// time (no calls, or calls of zero latency) with no think time would otherwise start the next
/// at the same instant, for ever, under a duration stop. No query of real latency is affected.
const MIN_QUERY_SPACING: Duration = Duration::from_micros(1);

async fn session<P: Provider + 'static, R: Runtime>(ctx: Rc<Replica<P, R>>) {
    let mut intended = ctx.rt.now();
    let mut plan = QueryPlan::default();
    let mut mine = 0;
    while ctx.per_session.is_none_or(|m| mine < m) && ctx.take_ticket() {
        mine += 1;
        let started = ctx.rt.now();
        one_query(&ctx, intended, &mut plan).await;
        let think = ctx.planner.borrow_mut().think();
        let earliest = started + ctx.scale.to_runtime(MIN_QUERY_SPACING);
        intended = (ctx.rt.now() + ctx.scale.to_runtime(think)).max(earliest);
        until(&ctx.rt, intended).await;
    }
}

/// Starts queries as they arrive, the `n`-th on replica `n mod K` (a round-robin balancer).
async fn open_arrivals<P: Provider + 'static, R: Runtime>(
    ctx: Rc<Ctx<P, R>>,
    replicas: &[Rc<Replica<P, R>>],
) {
    // One task per query in flight (bounded by the queries in flight, not by the calls).
    let mut inflight = FuturesUnordered::new();
    let mut next = Some(ctx.t0);
    loop {
        // Finished queries are reaped before new ones start, so the set stays as small as the
        // queries in flight. (Either order gives the same run: reaping changes nothing else.)
        tokio::select! {
            biased;
            Some(()) = inflight.next(), if !inflight.is_empty() => {}
            () = until(&ctx.rt, next.unwrap_or(ctx.t0)), if next.is_some() => {
                let at = next.unwrap_or(ctx.t0);
                if ctx.take_ticket() {
                    let n = ctx.started.get() - 1;
                    if ctx.slice.takes(n) {
                        let n = usize::try_from(n / ctx.slice.count).unwrap_or(0);
                        let query = replicas[n % replicas.len()].clone();
                        inflight.push(ctx.rt.spawn(async move {
                            one_query(&query, at, &mut QueryPlan::default()).await;
                        }));
                    } else {
                        ctx.skipped.set(ctx.skipped.get() + 1);
                    }
                    let gap = ctx.planner.borrow_mut().gap().unwrap_or(Duration::ZERO);
                    next = Some(at + ctx.scale.to_runtime(gap));
                } else {
                    next = None;
                }
            }
            else => break,
        }
    }
}

/// Runs `work` until it finishes, or returns `None` once virtual time reaches `deadline`. The
/// deadline's timer waits in a task of its own, so the work's many wakes never poll it.
async fn within<R: Runtime, F: Future>(rt: &R, deadline: R::Instant, work: F) -> Option<F::Output> {
    let fired = Rc::new(Cell::new(false));
    let waker = Rc::new(RefCell::new(None::<Waker>));
    let dog = rt.spawn({
        let (fired, waker) = (fired.clone(), waker.clone());
        let sleep = rt.sleep_until(deadline);
        async move {
            sleep.await;
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
    drop(dog);
    out
}

/// Waits for a planned instant (a query's arrival, the end of a think time) on the runtime's
/// clock: exact on the virtual clock, within tens of µs on the real one.
async fn until<R: Runtime>(rt: &R, at: R::Instant) {
    // Already there (a closed-loop session with no think time): no timer to build.
    if rt.now() < at {
        rt.sleep_until(at).await;
    }
}

/// The limiter each route of `s` waits in: its provider's (the default limiter in the
/// one-provider form, the one named after it otherwise), none for the tools sent to none.
fn vias<R: Runtime>(s: &Scenario, scheduler: &Scheduler<R>) -> Vec<Via> {
    let routes = Routes::of(s);
    routes
        .routes
        .iter()
        .map(|r| match routes.endpoints[r.endpoint].provider {
            None => Via::Unlimited,
            Some(_) if !s.named_providers => Via::Default,
            Some(p) => scheduler
                .limit_id(&s.providers[p].name)
                .map_or(Via::Unlimited, Via::Named),
        })
        .collect()
}

/// How a driven workload went, in model time.
pub(super) struct Driven {
    /// From the start to the last query's end.
    pub elapsed: Duration,
    /// From the start to the end of the run, work left running after its caller gave up
    /// included: the time the provider was sent traffic.
    pub span: Duration,
    /// Queries started.
    pub queries_started: u64,
    /// Queries each replica finished, in replica order.
    pub replica_queries: Vec<u64>,
    /// Each replica's adaptive concurrency limit, in replica order (empty with fixed limits).
    pub limits: Vec<LimitStats>,
}

/// Runs `s`'s workload through `scheduler` to `provider` until it is done: every query ended
/// and every detached piece of work finished. `None` if `horizon` (model time) passes first.
pub(super) async fn drive<P: Provider + 'static, R: Runtime>(
    s: &Scenario,
    slice: Slice,
    schedulers: Vec<Scheduler<R>>,
    provider: Rc<P>,
    recorder: Arc<Recorder<R::Instant>>,
    scale: TimeScale,
    horizon: Duration,
) -> Option<Driven> {
    let rt = schedulers.first()?.clock().clone();
    let t0 = rt.now();
    recorder.begin(t0);
    let limits: Vec<_> = schedulers
        .iter()
        .filter_map(Scheduler::concurrency_limit)
        .collect();
    if !limits.is_empty() {
        recorder.limits_from(t0, limits.iter().map(|l| l.current).sum());
    }
    let ctx = Rc::new(Ctx {
        rt: rt.clone(),
        provider,
        scale,
        recorder,
        planner: RefCell::new(Planner::new(&s.workload, s.seed)),
        turn: s.scheduler.turn,
        model_turn: s.workload.model_turn.clone(),
        subagents: s.workload.subagents,
        t0,
        stop: s.workload.stop,
        tickets: match (s.workload.stop, s.workload.arrivals) {
            (Stop::Queries(n), Arrivals::Closed { .. }) => slice.share(n),
            (Stop::Queries(n), Arrivals::Open { .. }) => n,
            (Stop::Duration(_), _) => u64::MAX,
        },
        slice,
        skipped: Cell::new(0),
        parent_timeout: s.workload.parent_timeout.map(|t| scale.to_runtime(t)),
        transport_cancel: s.scheduler.transport_cancel,
        per_session: s.workload.per_session,
        // The user's stop is known in advance: a stop time on the root scope, decided by the
        // clock (nothing starts at or after it; work ending at it keeps its result).
        root: match s.workload.stop_at {
            Some(at) => Scope::default().with_stop_at(t0 + scale.to_runtime(at)),
            None => Scope::default(),
        },
        started: Cell::new(0),
        last_end: Cell::new(t0),
        detached: Cell::new(0),
        detached_done: Notify::new(),
    });
    let replicas: Vec<_> = schedulers
        .into_iter()
        .enumerate()
        .map(|(index, scheduler)| {
            Rc::new(Replica {
                run: ctx.clone(),
                vias: vias(s, &scheduler),
                index,
                scheduler,
                queries: Cell::new(0),
            })
        })
        .collect();
    let traffic = async {
        match s.workload.arrivals {
            Arrivals::Closed { sessions } => {
                // One task per session: a wake reaches only the session it is for. Sessions
                // beyond the number of queries would never get one: they are not started, so
                // memory follows the work, not the configured count.
                let busy = match s.workload.stop {
                    Stop::Queries(n) => sessions.min(n),
                    Stop::Duration(_) => sessions,
                };
                // Session `j` runs on replica `j mod K` (this process's slice: those of its
                // replica).
                let k = replicas.len() as u64;
                let mut all: FuturesUnordered<_> = (0..busy)
                    .filter(|&j| slice.takes(j))
                    .map(|j| {
                        let at = (j / slice.count) % k;
                        let replica = replicas[usize::try_from(at).unwrap_or(0)].clone();
                        rt.spawn(session(replica))
                    })
                    .collect();
                while all.next().await.is_some() {}
            }
            Arrivals::Open { .. } => open_arrivals(ctx.clone(), &replicas).await,
        }
    };
    let run = async {
        // At a user stop the traffic winds down (queries see the stop through their scope).
        traffic.await;
        // Then work left running after its caller gave up is let finish (it is still charged).
        while ctx.detached.get() > 0 {
            let done = ctx.detached_done.notified();
            if ctx.detached.get() == 0 {
                break;
            }
            done.await;
        }
    };
    within(&rt, t0 + scale.to_runtime(horizon), run).await?;
    ctx.recorder.limits_until(rt.now());
    Some(Driven {
        limits: replicas
            .iter()
            .filter_map(|r| r.scheduler.concurrency_limit())
            .collect(),
        elapsed: scale.to_model(ctx.last_end.get() - t0),
        span: scale.to_model(rt.now() - t0),
        queries_started: ctx.started.get() - ctx.skipped.get(),
        replica_queries: replicas.iter().map(|r| r.queries.get()).collect(),
    })
}
