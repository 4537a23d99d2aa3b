//! Observation: every step of every call, with its time, delivered to an [`Observer`].
//!
//! With these events a caller can split each call's latency into time queued for a permit, time
//! waiting for the rate limiter, time backing off before retries, and service time
//! ([`Breakdown`]), and count 429s, retries and cancellations.
//!
//! An observer that keeps only aggregates can skip the events: with
//! [`Observer::wants_events`] false it gets one [`CallEnd`] per call, the breakdown and counts
//! already folded by the scheduler, and the scheduler builds no event for it.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::clock::Moment;
use super::error::{GiveUp, Interrupt, Stage};

/// Identifies one call of a scheduler; ids count up from 0 in the order calls start.
pub type CallId = u64;

/// Why a retry was scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryCause {
    /// The provider answered 429.
    RateLimited,
    /// A retryable status (5xx, 529).
    Status(u16),
    /// A timeout.
    Timeout,
}

/// Why a call was never run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotRunReason {
    /// The turn asked for more parallel tool calls than its cap (`truncate` policy).
    OverCap {
        /// The cap.
        cap: usize,
        /// Calls the turn asked for.
        asked: usize,
    },
}

impl std::fmt::Display for NotRunReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRunReason::OverCap { cap, asked } => write!(
                f,
                "this turn asked for {asked} tool calls and at most {cap} run in one turn; \
                 call it again in a later turn if it is still needed"
            ),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventKind {
    /// The call was submitted (it now waits for a permit).
    Queued {
        /// Its token cost.
        tokens: u64,
    },
    /// The call holds a permit and must wait for the rate limiter (not emitted when the
    /// buckets let it go at once).
    LimiterWaitStart,
    /// The rate limiter let it go.
    LimiterWaitEnd,
    /// Attempt number `attempt` (from 1) was sent.
    Sent {
        /// Attempt number.
        attempt: u32,
    },
    /// The provider answered 429.
    RateLimited {
        /// Attempt number.
        attempt: u32,
        /// The provider's Retry-After, if any.
        retry_after: Option<Duration>,
    },
    /// A retry will be sent after `delay`.
    RetryScheduled {
        /// The attempt that failed.
        attempt: u32,
        /// The wait before the next attempt.
        delay: Duration,
        /// What failed.
        cause: RetryCause,
    },
    /// The call succeeded.
    Completed {
        /// Attempts sent.
        attempts: u32,
    },
    /// The call failed for good.
    Failed {
        /// Attempts sent.
        attempts: u32,
        /// Why no retry was made.
        reason: GiveUp,
    },
    /// The call was stopped from outside.
    Cancelled {
        /// Where it was.
        stage: Stage,
        /// What stopped it.
        cause: Interrupt,
    },
    /// The call was never run.
    NotRun {
        /// Why.
        reason: NotRunReason,
    },
}

impl EventKind {
    /// True for the event that ends a call.
    #[inline]
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventKind::Completed { .. }
                | EventKind::Failed { .. }
                | EventKind::Cancelled { .. }
                | EventKind::NotRun { .. }
        )
    }
}

/// One event of one call, at an instant of the scheduler's clock (`tokio::time::Instant`
/// unless the scheduler runs on another [`Clock`](crate::Clock)).
#[derive(Debug, Clone, PartialEq)]
pub struct Event<I = Instant> {
    /// When (tokio time: virtual under a paused clock).
    pub at: I,
    /// Which call.
    pub call: CallId,
    /// What happened.
    pub kind: EventKind,
}

/// How one call ended, with its latency already split into phases.
#[derive(Debug, Clone, PartialEq)]
pub struct CallEnd<'a, I = Instant> {
    /// Which call.
    pub call: CallId,
    /// When it was submitted.
    pub queued_at: I,
    /// When it ended.
    pub at: I,
    /// The event that ended it (`Completed`, `Failed`, `Cancelled` or `NotRun`); `None` if the
    /// call's future was dropped before it ended (then `at` is the drop).
    pub end: Option<&'a EventKind>,
    /// Its time in each phase (a dropped call's phase in progress up to the drop), and the
    /// attempts it sent.
    pub breakdown: Breakdown<I>,
    /// 429s it was answered.
    pub rate_limited: u32,
    /// Retries it scheduled.
    pub retries: u32,
    /// Attempts that timed out (the client's timeout per attempt, or a transport failure
    /// classified as one).
    pub timed_out: u32,
    /// The balance of the request bucket the call went through, when it ended, read without
    /// refilling it: only for an observer that [`Observer::wants_balances`], and `None`
    /// without an RPM limit (or with buckets kept on Redis).
    pub limiter_balance: Option<f64>,
}

/// An adaptive concurrency limit moved (its floor, the permits that exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitChange<I = Instant> {
    /// When.
    pub at: I,
    /// The limit before.
    pub from: usize,
    /// The limit after.
    pub to: usize,
}

/// Receives a scheduler's observations. Called synchronously on the call's task: keep it
/// cheap. `I` is the scheduler's clock's instant (`tokio::time::Instant` unless it runs on
/// another [`Clock`](crate::Clock)).
pub trait Observer<I = Instant>: Send + Sync {
    /// One event (only if [`Observer::wants_events`]).
    fn on_event(&self, _event: &Event<I>) {}

    /// A call ended (every call, once, after its last event).
    fn on_call_end(&self, _end: &CallEnd<'_, I>) {}

    /// An adaptive concurrency limit moved (whatever [`Observer::wants_events`] says).
    fn on_limit(&self, _change: &LimitChange<I>) {}

    /// Whether to call [`Observer::on_event`] for every event (the default). An observer that
    /// needs only [`Observer::on_call_end`] returns false, and the scheduler builds no events.
    /// Asked once, when the scheduler is built.
    fn wants_events(&self) -> bool {
        true
    }

    /// Whether [`CallEnd::limiter_balance`] should be read at each call's end (a lock of the
    /// limiter per call; off by default). Asked once, when the scheduler is built.
    fn wants_balances(&self) -> bool {
        false
    }
}

impl<I, F: Fn(&Event<I>) + Send + Sync> Observer<I> for F {
    fn on_event(&self, event: &Event<I>) {
        self(event)
    }
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl<I> Observer<I> for NoopObserver {
    fn on_event(&self, _: &Event<I>) {}
}

/// An observer that keeps every event in memory: for tests and debugging, not long runs.
#[derive(Debug)]
pub struct EventLog<I = Instant> {
    events: Mutex<Vec<Event<I>>>,
}

impl<I> Default for EventLog<I> {
    fn default() -> Self {
        EventLog {
            events: Mutex::new(Vec::new()),
        }
    }
}

impl EventLog {
    /// An empty log of events on tokio's clock (`EventLog::default()` for another clock's).
    pub fn new() -> Self {
        EventLog::default()
    }
}

impl<I: Clone> EventLog<I> {
    /// A copy of the events so far, in the order they happened.
    pub fn events(&self) -> Vec<Event<I>> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The events of one call.
    pub fn of_call(&self, call: CallId) -> Vec<Event<I>> {
        self.events()
            .into_iter()
            .filter(|e| e.call == call)
            .collect()
    }

    /// How many events match `pred`.
    pub fn count(&self, pred: impl Fn(&EventKind) -> bool) -> usize {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        events.iter().filter(|e| pred(&e.kind)).count()
    }
}

impl<I: Clone + Send> Observer<I> for EventLog<I> {
    fn on_event(&self, event: &Event<I>) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Queue,
    Limiter,
    Service,
    Backoff,
}

/// One call's latency split into phases, folded from its events in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breakdown<I = Instant> {
    /// Waiting for a concurrency permit.
    pub queue: Duration,
    /// Waiting for the rate limiter (every attempt).
    pub limiter: Duration,
    /// Sleeping before retries.
    pub backoff: Duration,
    /// Sent and waiting for answers (every attempt).
    pub service: Duration,
    /// Attempts sent.
    pub attempts: u32,
    last: Option<(I, Phase)>,
}

impl<I> Default for Breakdown<I> {
    fn default() -> Self {
        Breakdown {
            queue: Duration::ZERO,
            limiter: Duration::ZERO,
            backoff: Duration::ZERO,
            service: Duration::ZERO,
            attempts: 0,
            last: None,
        }
    }
}

impl<I: Moment> Breakdown<I> {
    /// Folds a whole call's events.
    pub fn of(events: &[Event<I>]) -> Self {
        let mut b = Breakdown::default();
        for e in events {
            b.apply(e);
        }
        b
    }

    /// Total time from queued to the last event applied.
    pub fn total(&self) -> Duration {
        self.queue + self.limiter + self.backoff + self.service
    }

    /// Adds one event (of this call, in order).
    pub fn apply(&mut self, event: &Event<I>) {
        self.step(&event.kind, event.at);
    }

    /// Adds one event of kind `kind` at `at` (of this call, in order).
    #[inline(always)]
    pub(crate) fn step(&mut self, kind: &EventKind, at: I) {
        self.close(at);
        let next = match kind {
            EventKind::Queued { .. } => Some(Phase::Queue),
            EventKind::LimiterWaitStart | EventKind::LimiterWaitEnd => Some(Phase::Limiter),
            EventKind::Sent { .. } => {
                self.attempts += 1;
                Some(Phase::Service)
            }
            EventKind::RateLimited { .. } | EventKind::RetryScheduled { .. } => {
                Some(Phase::Backoff)
            }
            _ => None,
        };
        self.last = next.map(|p| (at, p));
    }

    /// Ends the phase in progress at `at`, adding its time (a call dropped mid-phase).
    #[inline(always)]
    pub(crate) fn close(&mut self, at: I) {
        if let Some((since, phase)) = self.last.take() {
            // Compared first: most phases of most calls take no time, and a comparison is
            // far cheaper than a subtraction of instants.
            let spent = if at > since {
                at - since
            } else {
                Duration::ZERO
            };
            match phase {
                Phase::Queue => self.queue += spent,
                Phase::Limiter => self.limiter += spent,
                Phase::Service => self.service += spent,
                Phase::Backoff => self.backoff += spent,
            }
        }
    }
}
