//! The scheduler an LLM agent puts between its tool and model calls and a rate-limited
//! provider: bounded fan-out, RPM/TPM token buckets, retries with jitter and Retry-After,
//! cancellation and deadlines, read/write tool dispatch, and token budgets for subagents.
//!
//! It is the product of capsize (the workspace this crate lives in), which runs it unchanged
//! against a simulated provider in virtual time and against an HTTP provider in real time, to
//! size `max_concurrency` and the headroom. It depends on nothing of the simulator.
//!
//! # A tutorial in five steps
//!
//! ## 1. Configure
//!
//! A [`SchedulerConfig`] says how many calls may be in flight at once, which client-side rate
//! limits to keep (a share, the *headroom*, of the provider's RPM and TPM), and how to retry.
//! [`Scheduler::builder`] checks it ([`ConfigError`] names the setting that cannot work) and
//! seeds the jitter RNG, so two schedulers built alike retry alike.
//!
//! ```
//! use capsize_scheduler::{Limit, LimiterConfig, Scheduler, SchedulerConfig};
//!
//! // 600 RPM and 10M TPM at 70 % headroom, at most 4 calls in flight.
//! let config = SchedulerConfig {
//!     max_concurrency: 4,
//!     limits: Some(LimiterConfig {
//!         requests: Some(Limit::per_minute(600.0)),
//!         tokens: Some(Limit::per_minute(10_000_000.0)),
//!         headroom: 0.7,
//!     }),
//!     ..SchedulerConfig::default()
//! };
//! let scheduler = Scheduler::builder(config).seed(42).build().unwrap();
//! # let _ = scheduler;
//! ```
//!
//! ## 2. Make a call
//!
//! [`Scheduler::call`] takes a [`CallSpec`] (the call's token cost and the [`Scope`] that may
//! stop it) and an attempt function, called once per attempt. The call waits for a permit,
//! charges its budget, waits for the limiter, then sends; a failure the [`RetryPolicy`] retries
//! (a 429, a 5xx, a timeout: see [`Classify`]) backs off and goes round again. A Retry-After
//! from the provider is waited out in full, and pauses the limiter for every call.
//!
//! ```
//! # use std::time::Duration;
//! # use capsize_scheduler::{CallSpec, ProviderError, Scheduler, SchedulerConfig};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let scheduler = Scheduler::builder(SchedulerConfig::default()).build().unwrap();
//! let started = tokio::time::Instant::now();
//! let answer = scheduler
//!     .call(CallSpec::new(2_000), |attempt| async move {
//!         if attempt.number == 1 {
//!             // The provider says 429, come back in 2 s.
//!             return Err(ProviderError::rate_limited(Some(Duration::from_secs(2))));
//!         }
//!         Ok("42")
//!     })
//!     .await;
//! assert_eq!(answer.unwrap(), "42");
//! assert!(started.elapsed() >= Duration::from_secs(2)); // never sooner than Retry-After
//! # }
//! ```
//!
//! ## 3. Fan out
//!
//! [`FanOut`] runs a turn's calls concurrently in one scope: [`FanOut::gather`] returns every
//! result in order, [`FanOut::as_completed`] yields them as they finish, and
//! [`FanOut::all_or_nothing`] cancels the rest at the first failure. The permits, not the
//! fan-out, bound how many are in flight.
//!
//! ```
//! # use std::time::Duration;
//! # use capsize_scheduler::{CallSpec, FanOut, ProviderError, Scheduler, SchedulerConfig, Scope};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let config = SchedulerConfig { max_concurrency: 4, ..SchedulerConfig::default() };
//! let scheduler = Scheduler::builder(config).build().unwrap();
//! let started = tokio::time::Instant::now();
//! // Eight tool calls of 400 ms, four at a time: two waves, 800 ms of virtual time.
//! let results = FanOut::new(&Scope::new())
//!     .gather((0..8).map(|i| {
//!         let scheduler = &scheduler;
//!         move |scope: Scope| async move {
//!             let spec = CallSpec::new(2_000).in_scope(&scope);
//!             scheduler
//!                 .call(spec, |_attempt| async move {
//!                     tokio::time::sleep(Duration::from_millis(400)).await; // the request
//!                     Ok::<_, ProviderError>(i)
//!                 })
//!                 .await
//!         }
//!     }))
//!     .await;
//! assert!(results.iter().all(|r| r.is_ok()));
//! assert_eq!(started.elapsed(), Duration::from_millis(800));
//! # }
//! ```
//!
//! ## 4. Stop work: scopes, deadlines, budgets
//!
//! A [`Scope`] carries a cancellation token, a deadline, a stop time and a [`Budget`]; a
//! [`Scope::child`] inherits all of them, so cancelling an agent cancels its subagents. A call
//! stopped before it is sent refunds its tokens and its limiter reservation; a call at the
//! provider is stopped by a cancel or a deadline but not by a spent budget (its tokens are
//! spent either way). [`Budget::child`] lends a subagent part of its parent's tokens.
//!
//! ```
//! # use capsize_scheduler::{Budget, CallError, CallSpec, Interrupt, ProviderError, Scheduler,
//! #     SchedulerConfig, Scope};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let scheduler = Scheduler::builder(SchedulerConfig::default()).build().unwrap();
//! let agent = Budget::new("agent", 10_000, None);
//! let subagent = Scope::new().with_budget(agent.child("researcher", 3_000, None));
//! let call = |tokens| scheduler.call(CallSpec::new(tokens).in_scope(&subagent), |_| async {
//!     Ok::<_, ProviderError>(())
//! });
//! assert!(call(2_000).await.is_ok());
//! // 1,000 tokens left of the subagent's 3,000: the next call is refused before it is sent.
//! let refused = call(2_000).await.unwrap_err();
//! assert!(matches!(refused.interrupt(), Some(Interrupt::BudgetExhausted(_))));
//! # }
//! ```
//!
//! ## 5. Dispatch a model turn's tool calls
//!
//! [`Scheduler::dispatch`] runs one turn's tool calls by a [`TurnPolicy`]: tools declared
//! [`Access::Read`] run in parallel, [`Access::Write`] ones one at a time in the model's order,
//! and beyond `max_parallel` the rest are answered "not run" ([`CapPolicy::Truncate`]) or run
//! in batches ([`CapPolicy::Batch`]).
//!
//! ```
//! # use std::time::Duration;
//! # use capsize_scheduler::dispatch::Tool;
//! # use capsize_scheduler::{CallSpec, ProviderError, Scheduler, SchedulerConfig, TurnPolicy};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let scheduler = Scheduler::builder(SchedulerConfig::default()).build().unwrap();
//! let turn = [Tool::read("search"), Tool::write("save"), Tool::read("fetch"), Tool::write("mail")];
//! let started = tokio::time::Instant::now();
//! let results = scheduler
//!     .dispatch(&TurnPolicy::default(), &turn, |_, _tool| {
//!         scheduler.call(CallSpec::new(500), |_| async {
//!             tokio::time::sleep(Duration::from_millis(100)).await;
//!             Ok::<_, ProviderError>(())
//!         })
//!     })
//!     .await;
//! assert_eq!(results.len(), 4);
//! // Both reads together (100 ms), then each write alone (100 ms each).
//! assert_eq!(started.elapsed(), Duration::from_millis(300));
//! # }
//! ```
//!
//! # Time, and ties
//!
//! The scheduler reads time only through its [`Clock`] (tokio's, [`TokioClock`], unless
//! [`Builder::clock`] or [`Scheduler::builder_on`] gives another) and draws randomness only
//! from the RNG it is given. Its instants are the clock's own ([`Clock::Instant`]):
//! `tokio::time::Instant` on tokio's clock, so scopes, events and observers read tokio's
//! instants unless a scheduler is built on another clock, such as a virtual one counting
//! [`Nanos`]. Under
//! tokio's paused clock (`start_paused = true`, as in the examples above) or a discrete-event
//! executor's clock it is an exact, repeatable simulation; under a normal runtime it is
//! production code. When things happen at one instant, one rule decides: a result that arrives at the
//! instant its caller stops waiting is kept, and nothing starts at or after a stop or deadline.
//!
//! [`observe`] reports every step of every call as an [`Event`] to an [`Observer`], which is how
//! capsize measures where the time went.
//!
//! `examples/http_agent.rs` is a runnable agent that fans tool calls out over HTTP with
//! reqwest: `cargo run -p capsize-scheduler --example http_agent`.

#![warn(missing_docs, unreachable_pub)]

pub mod adaptive;
pub mod budget;
mod builder;
mod call;
pub mod clock;
pub mod dispatch;
mod error;
pub mod fanout;
pub mod limit;
pub mod observe;
pub mod retry;
mod scope;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::Rng;
use tokio::sync::Semaphore;
use tokio::time::Instant;

pub use self::adaptive::{Adaptive, Aimd, Gradient, LimitStats};
pub use self::budget::{Budget, BudgetExhausted};
pub use self::builder::Builder;
pub use self::clock::{Clock, Moment, Nanos, TokioClock};
pub use self::dispatch::{Access, CapPolicy, TurnPolicy};
pub use self::error::{
    CallError, ConfigError, GiveUp, Interrupt, InvalidBackoff, InvalidHeadroom, InvalidLimit,
    LimitField, LimitKind, Stage,
};
pub use self::fanout::FanOut;
pub use self::limit::{Limit, LimiterConfig, RateLimiter};
pub use self::observe::{CallId, Event, EventKind, Observer};
pub use self::retry::{
    Classify, FailureKind, Jitter, ProviderError, RetryAfterMode, RetryPolicy, RetryPreset,
};
pub use self::scope::{Scope, Work};

use self::call::Call;

/// What a scheduler enforces.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchedulerConfig {
    /// Calls in flight at once (a call holds its permit through retries). 0: unbounded; 1: one
    /// at a time.
    pub max_concurrency: usize,
    /// Client-side rate limits, if any: the limiter of every call that names no other
    /// ([`Via::Default`]).
    pub limits: Option<LimiterConfig>,
    /// Further limiters, by name: one per provider when calls go to several (a model's limit
    /// and a tool API's). A call names one with [`CallSpec::through`], after looking its id up
    /// once with [`Scheduler::limit_id`]. Each has its own buckets and its own Retry-After
    /// pause: a 429 from one provider holds only the calls that go to it.
    pub named_limits: Vec<(String, LimiterConfig)>,
    /// The retry policy.
    pub retry: RetryPolicy,
}

/// A named limiter of a scheduler, looked up by [`Scheduler::limit_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitId(u32);

/// Which of the scheduler's limiters a call goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Via {
    /// The one of [`SchedulerConfig::limits`] (none if it is not set).
    #[default]
    Default,
    /// A named one of [`SchedulerConfig::named_limits`].
    Named(LimitId),
    /// None: the call goes to something without a rate limit (a local tool).
    Unlimited,
}

/// One call to make: its token cost, the scope that can stop it, and the limiter it goes
/// through. `I` is the scheduler's clock's instant (`tokio::time::Instant` unless it runs on
/// another [`Clock`]).
#[derive(Debug, Clone)]
pub struct CallSpec<I = Instant> {
    /// Tokens the call costs (charged to the TPM bucket and the budget).
    pub tokens: u64,
    /// Cancellation, deadline and budget.
    pub scope: Scope<I>,
    /// The limiter that paces it (the default one unless set).
    pub via: Via,
}

impl<I> Default for CallSpec<I> {
    fn default() -> Self {
        CallSpec {
            tokens: 0,
            scope: Scope::default(),
            via: Via::Default,
        }
    }
}

impl CallSpec {
    /// A call costing `tokens`, in an empty scope (on tokio's clock: [`CallSpec::of`] on
    /// another's).
    pub fn new(tokens: u64) -> Self {
        CallSpec::of(tokens)
    }
}

impl<I: Moment> CallSpec<I> {
    /// A call costing `tokens`, in an empty scope of any clock's instants.
    pub fn of(tokens: u64) -> Self {
        CallSpec {
            tokens,
            scope: Scope::default(),
            via: Via::Default,
        }
    }

    /// The same call through the named limiter `id` (see [`Scheduler::limit_id`]).
    pub fn through(self, id: LimitId) -> Self {
        CallSpec {
            via: Via::Named(id),
            ..self
        }
    }

    /// The same call through limiter `via`.
    pub fn via(self, via: Via) -> Self {
        CallSpec { via, ..self }
    }

    /// The same call in `scope`.
    pub fn in_scope(self, scope: &Scope<I>) -> Self {
        CallSpec {
            scope: scope.clone(),
            ..self
        }
    }
}

/// What an attempt function is told about the attempt it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// The call.
    pub call: CallId,
    /// Attempt number, from 1.
    pub number: u32,
}

type BoxRng = Box<dyn Rng + Send>;

struct Inner<C: Clock> {
    clock: C,
    permits: Option<Semaphore>,
    /// An adaptive limit on calls in flight, instead of `permits`.
    adaptive: Option<adaptive::AdaptiveLimit<C::Instant>>,
    limiter: Option<Arc<RateLimiter<C>>>,
    /// The named limiters, in the order configured (a [`LimitId`] is an index).
    named: Vec<(String, Arc<RateLimiter<C>>)>,
    retry: RetryPolicy,
    rng: Mutex<BoxRng>,
    observer: Option<Arc<dyn Observer<C::Instant>>>,
    /// Whether the observer wants every event (else only call ends).
    events: bool,
    /// Whether the observer wants each call end's limiter balance (asked once, when built).
    balances: bool,
    next_id: AtomicU64,
}

/// Bounded, rate-limited, retrying, cancellable calls, on the clock `C` (tokio's unless a
/// simulator gives another). Clones share everything.
pub struct Scheduler<C: Clock = TokioClock> {
    inner: Arc<Inner<C>>,
}

impl<C: Clock> Clone for Scheduler<C> {
    fn clone(&self) -> Self {
        Scheduler {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C: Clock> Scheduler<C> {
    /// The clock it reads.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// The default rate limiter, if limits are set.
    pub fn limiter(&self) -> Option<&RateLimiter<C>> {
        self.inner.limiter.as_deref()
    }

    /// The id of the named limiter `name`, if there is one.
    pub fn limit_id(&self, name: &str) -> Option<LimitId> {
        let i = self.inner.named.iter().position(|(n, _)| n == name)?;
        u32::try_from(i).ok().map(LimitId)
    }

    /// The limiter a call through `via` waits in, if any.
    pub fn limiter_for(&self, via: Via) -> Option<&RateLimiter<C>> {
        match via {
            Via::Default => self.inner.limiter.as_deref(),
            Via::Named(LimitId(i)) => self.inner.named.get(i as usize).map(|(_, l)| &**l),
            Via::Unlimited => None,
        }
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.retry
    }

    /// The adaptive concurrency limit's statistics, its mean up to now (`None` with a fixed
    /// `max_concurrency`).
    pub fn concurrency_limit(&self) -> Option<LimitStats> {
        let now = self.inner.clock.now();
        self.inner.adaptive.as_ref().map(|a| a.stats(now))
    }

    /// Permits free now (`None` when unbounded).
    pub fn available_permits(&self) -> Option<usize> {
        self.inner
            .permits
            .as_ref()
            .map(Semaphore::available_permits)
    }

    /// The observer, if it wants every event.
    fn event_observer(&self) -> Option<&dyn Observer<C::Instant>> {
        self.inner.observer.as_deref().filter(|_| self.inner.events)
    }

    /// Reports a call's end to the observer, if any.
    fn end_call(&self, end: &observe::CallEnd<'_, C::Instant>) {
        if let Some(o) = &self.inner.observer {
            o.on_call_end(end);
        }
    }

    fn next_id(&self) -> CallId {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a call that is answered without being run, and returns its id.
    pub fn not_run(&self, reason: observe::NotRunReason) -> CallId {
        let id = self.next_id();
        if self.inner.observer.is_some() {
            let at = self.inner.clock.now();
            let kind = EventKind::NotRun { reason };
            let event = Event { at, call: id, kind };
            if let Some(o) = self.event_observer() {
                o.on_event(&event);
            }
            self.end_call(&observe::CallEnd {
                call: id,
                queued_at: at,
                at,
                end: Some(&event.kind),
                breakdown: observe::Breakdown::default(),
                rate_limited: 0,
                retries: 0,
                timed_out: 0,
                limiter_balance: None,
            });
        }
        id
    }

    /// Makes one call: permit, budget, limiter, then `attempt` until it succeeds, fails for
    /// good, or the scope stops it. `attempt` is called once per attempt; dropping its future
    /// (on cancel or deadline) must abandon the work, as dropping an HTTP request closes it.
    // An async block rather than an `async fn`: an async fn's future keeps its arguments twice
    // (as captured, then moved into the body's bindings), a larger future to move per call.
    #[allow(clippy::manual_async_fn)]
    #[inline]
    pub fn call<'s, T, E, F, Fut>(
        &'s self,
        spec: CallSpec<C::Instant>,
        mut attempt: F,
    ) -> impl Future<Output = Result<T, CallError<E>>> + use<'s, C, T, E, F, Fut>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify,
    {
        async move {
            let mut call = Call::open(self, &spec);
            let _permit = call.acquire_permit().await?;
            call.charge_budget()?;
            let mut number = 1;
            loop {
                // The limiter's wait is awaited only when there is one: most reservations go
                // at once, and a future built and dropped for nothing costs more than the
                // reserving. (Bound first: the temporaries of an `if let`'s `?` would be kept
                // across the wait, in every call's future.)
                let reservation = call.reserve(number)?;
                if let Some(reservation) = reservation {
                    call.wait_for_limiter(reservation).await?;
                }
                let error = match call.send(number, &mut attempt).await? {
                    Ok(value) => return Ok(value),
                    Err(error) => error,
                };
                call.after_failure(error, number).await?;
                number += 1;
            }
        }
    }
}
