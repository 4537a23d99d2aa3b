//! The scheduler: what an agent puts between its tool and model calls and a rate-limited provider.
//!
//! Every call goes through the same steps, each observable and each stoppable by the call's
//! [`Scope`]: wait for a concurrency permit (a FIFO semaphore of `max_concurrency`), draw its
//! tokens from the budget, reserve one request and its tokens in the rate limiter and wait for
//! them, send, and on a retryable failure back off (at least the provider's Retry-After, which
//! also pauses the limiter for everyone) and go round again.
//!
//! The scheduler reads time only through `tokio::time` and draws randomness only from the RNG it
//! is given, so under tokio's paused clock it runs as an exact, repeatable discrete-event
//! simulation, and under a normal runtime it is the production code. It knows nothing of what is
//! on the other side of a call.
//!
//! ```
//! use std::time::Duration;
//! use capsize_scheduler::{
//!     CallSpec, FanOut, Limit, LimiterConfig, ProviderError, Scheduler, SchedulerConfig, Scope,
//! };
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
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
//!
//! // Eight tool calls of 2,000 tokens, gathered: every result comes back, Ok or Err.
//! let fan = FanOut::new(&Scope::new());
//! let results = fan
//!     .gather((0..8).map(|i| {
//!         let scheduler = &scheduler;
//!         move |scope: Scope| async move {
//!             scheduler
//!                 .call(CallSpec::new(2_000).in_scope(&scope), |_attempt| async move {
//!                     tokio::time::sleep(Duration::from_millis(400)).await; // the HTTP request
//!                     Ok::<_, ProviderError>(i)
//!                 })
//!                 .await
//!         }
//!     }))
//!     .await;
//! assert_eq!(results.len(), 8);
//! assert!(results.iter().all(|r| r.is_ok()));
//! # }
//! ```

#![warn(missing_docs, unreachable_pub)]

pub mod budget;
mod call;
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

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::time::Instant;

pub use self::budget::{Budget, BudgetExhausted};
pub use self::dispatch::{Access, CapPolicy, TurnPolicy};
pub use self::error::{
    CallError, ConfigError, GiveUp, Interrupt, InvalidBackoff, InvalidHeadroom, InvalidLimit,
    LimitField, LimitKind, Stage,
};
pub use self::fanout::FanOut;
pub use self::limit::{Limit, LimiterConfig, RateLimiter};
pub use self::observe::{CallId, Event, EventKind, Observer};
pub use self::retry::{Classify, FailureKind, Jitter, ProviderError, RetryPolicy};
pub use self::scope::{Scope, Work};

use self::call::Call;

/// What a scheduler enforces.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchedulerConfig {
    /// Calls in flight at once (a call holds its permit through retries). 0: unbounded; 1: one
    /// at a time.
    pub max_concurrency: usize,
    /// Client-side rate limits, if any.
    pub limits: Option<LimiterConfig>,
    /// The retry policy.
    pub retry: RetryPolicy,
}

/// One call to make: its token cost and the scope that can stop it.
#[derive(Debug, Clone, Default)]
pub struct CallSpec {
    /// Tokens the call costs (charged to the TPM bucket and the budget).
    pub tokens: u64,
    /// Cancellation, deadline and budget.
    pub scope: Scope,
}

impl CallSpec {
    /// A call costing `tokens`, in an empty scope.
    pub fn new(tokens: u64) -> Self {
        CallSpec {
            tokens,
            scope: Scope::new(),
        }
    }

    /// The same call in `scope`.
    pub fn in_scope(self, scope: &Scope) -> Self {
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

struct Inner {
    permits: Option<Semaphore>,
    limiter: Option<RateLimiter>,
    retry: RetryPolicy,
    rng: Mutex<BoxRng>,
    observer: Option<Arc<dyn Observer>>,
    next_id: AtomicU64,
}

/// Builds a [`Scheduler`] from a validated [`SchedulerConfig`].
pub struct Builder {
    config: SchedulerConfig,
    rng: BoxRng,
    observer: Option<Arc<dyn Observer>>,
}

impl Builder {
    /// Seeds the jitter RNG (Xoshiro256++; the default seed is 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = Box::new(Xoshiro256PlusPlus::seed_from_u64(seed));
        self
    }

    /// Uses `rng` for jitter.
    pub fn rng(mut self, rng: impl Rng + Send + 'static) -> Self {
        self.rng = Box::new(rng);
        self
    }

    /// Sends every event to `observer`.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Checks the configuration and builds the scheduler. Rate-limit buckets start full now.
    pub fn build(self) -> Result<Scheduler, ConfigError> {
        self.config.retry.validate()?;
        let limiter = match &self.config.limits {
            Some(l) => Some(RateLimiter::new(l)?),
            None => None,
        };
        let permits = match self.config.max_concurrency {
            0 => None,
            n => Some(Semaphore::new(n.min(Semaphore::MAX_PERMITS))),
        };
        Ok(Scheduler {
            inner: Arc::new(Inner {
                permits,
                limiter,
                retry: self.config.retry,
                rng: Mutex::new(self.rng),
                observer: self.observer,
                next_id: AtomicU64::new(0),
            }),
        })
    }
}

/// Bounded, rate-limited, retrying, cancellable calls. Clones share everything.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl Scheduler {
    /// Starts building a scheduler for `config`.
    pub fn builder(config: SchedulerConfig) -> Builder {
        Builder {
            config,
            rng: Box::new(Xoshiro256PlusPlus::seed_from_u64(0)),
            observer: None,
        }
    }

    /// The rate limiter, if limits are set.
    pub fn limiter(&self) -> Option<&RateLimiter> {
        self.inner.limiter.as_ref()
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.retry
    }

    /// Permits free now (`None` when unbounded).
    pub fn available_permits(&self) -> Option<usize> {
        self.inner
            .permits
            .as_ref()
            .map(Semaphore::available_permits)
    }

    fn emit(&self, call: CallId, kind: EventKind) {
        if self.inner.observer.is_some() {
            self.emit_at(call, kind, Instant::now());
        }
    }

    /// Emits an event at `at`, a clock reading the caller already has (no await since).
    fn emit_at(&self, call: CallId, kind: EventKind, at: Instant) {
        if let Some(o) = &self.inner.observer {
            o.on_event(&Event { at, call, kind });
        }
    }

    fn next_id(&self) -> CallId {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a call that is answered without being run, and returns its id.
    pub fn not_run(&self, reason: observe::NotRunReason) -> CallId {
        let id = self.next_id();
        self.emit(id, EventKind::NotRun { reason });
        id
    }

    /// Makes one call: permit, budget, limiter, then `attempt` until it succeeds, fails for
    /// good, or the scope stops it. `attempt` is called once per attempt; dropping its future
    /// (on cancel or deadline) must abandon the work, as dropping an HTTP request closes it.
    pub async fn call<T, E, F, Fut>(
        &self,
        spec: CallSpec,
        mut attempt: F,
    ) -> Result<T, CallError<E>>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify,
    {
        let mut call = Call::open(self, &spec);
        let _permit = call.acquire_permit().await?;
        call.charge_budget()?;
        let mut number = 1;
        loop {
            call.wait_for_limiter(number).await?;
            let error = match call.send(number, &mut attempt).await? {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            call.after_failure(error, number).await?;
            number += 1;
        }
    }
}
