//! Client-side rate limiting: a requests-per-minute and a tokens-per-minute bucket behind one lock.
//!
//! A call reserves one request and its tokens in both buckets at once, then waits until both have
//! refilled its share ([`Reservation::wait`]). Reservations go first-in, first-out across both
//! buckets (those made at the [`Place::Front`], a retry jumping the queue, before the rest), and a reservation held by one bucket is pending in the other too, so neither banks
//! credit while it waits: over any 60 s the limiter lets through at most `headroom × limit +
//! burst` requests and tokens (a call larger than the burst counts as the burst; see `bucket`). Dropping a reservation before it is ready (the call
//! was cancelled while queued) refunds it. A provider's Retry-After pauses the whole limiter
//! ([`RateLimiter::pause_until`]): every caller, waiting or new, is held until it ends.

mod bucket;
mod queue;
#[cfg(feature = "redis")]
pub mod shared;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

pub use self::bucket::Place;
use self::bucket::{Bucket, Ticket};
use self::queue::Queue;
use crate::clock::{Clock, Moment, TokioClock};
use crate::error::{ConfigError, InvalidHeadroom, InvalidLimit, LimitField, LimitKind};

/// One provider limit and the bucket that enforces it on the client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// The provider's allowance per minute (requests or tokens).
    pub per_minute: f64,
    /// The largest burst (bucket capacity), in the same unit, taken as given: headroom scales
    /// the refill rate only. `None`: one second's worth of the scaled refill (at least 1).
    pub burst: Option<f64>,
}

impl Limit {
    /// A limit of `per_minute` with the default burst.
    pub fn per_minute(per_minute: f64) -> Self {
        Limit {
            per_minute,
            burst: None,
        }
    }

    /// The same limit with a burst (bucket capacity) of `burst`.
    pub fn with_burst(self, burst: f64) -> Self {
        Limit {
            burst: Some(burst),
            ..self
        }
    }
}

/// What the limiter enforces: the provider's limits scaled by `headroom`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimiterConfig {
    /// Requests per minute, if the provider limits them.
    pub requests: Option<Limit>,
    /// Tokens per minute, if the provider limits them.
    pub tokens: Option<Limit>,
    /// The share of each limit to use, in (0, 1]; 0.7 leaves 30 % for retries and other traffic.
    pub headroom: f64,
}

impl Default for LimiterConfig {
    fn default() -> Self {
        LimiterConfig {
            requests: None,
            tokens: None,
            headroom: 1.0,
        }
    }
}

impl LimiterConfig {
    fn bucket<I: Moment>(
        &self,
        limit: Option<Limit>,
        kind: LimitKind,
        now: I,
    ) -> Result<Option<Bucket<I>>, ConfigError> {
        let Some(limit) = limit else { return Ok(None) };
        if !(limit.per_minute.is_finite() && limit.per_minute > 0.0) {
            return Err(InvalidLimit {
                kind,
                field: LimitField::PerMinute,
                value: limit.per_minute,
            }
            .into());
        }
        let rate = limit.per_minute * self.headroom / 60.0;
        let capacity = match limit.burst {
            Some(b) if b.is_finite() && b > 0.0 => b,
            Some(b) => {
                return Err(InvalidLimit {
                    kind,
                    field: LimitField::Burst,
                    value: b,
                }
                .into())
            }
            None => rate.max(1.0),
        };
        Ok(Some(Bucket::new(rate, capacity, now)))
    }
}

/// Requests-per-minute and tokens-per-minute buckets shared by every call of a scheduler,
/// on the clock `C` (tokio's unless a simulator gives another).
#[derive(Debug)]
pub struct RateLimiter<C: Clock = TokioClock> {
    queue: Mutex<Queue<C::Instant>>,
    /// Woken when a refund lets waiters go earlier.
    changed: Notify,
    clock: C,
    /// Buckets shared with other replicas on Redis; `queue` is then the fallback used while
    /// Redis does not answer (see [`shared`]).
    #[cfg(feature = "redis")]
    remote: Option<shared::Shared<C::Instant>>,
}

impl RateLimiter {
    /// Builds the limiter on tokio's clock; its buckets start full now.
    pub fn new(config: &LimiterConfig) -> Result<Self, ConfigError> {
        RateLimiter::with_clock(config, TokioClock)
    }
}

impl<C: Clock> RateLimiter<C> {
    /// Builds the limiter on `clock`; its buckets start full now.
    pub fn with_clock(config: &LimiterConfig, clock: C) -> Result<Self, ConfigError> {
        if !(config.headroom > 0.0 && config.headroom <= 1.0) {
            return Err(InvalidHeadroom(config.headroom).into());
        }
        let now = clock.now();
        Ok(RateLimiter {
            queue: Mutex::new(Queue::new(
                config.bucket(config.requests, LimitKind::Requests, now)?,
                config.bucket(config.tokens, LimitKind::Tokens, now)?,
            )),
            changed: Notify::new(),
            clock,
            #[cfg(feature = "redis")]
            remote: None,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Queue<C::Instant>> {
        // The state is plain numbers, consistent after every statement: a panic elsewhere while
        // the lock was held leaves nothing half-done, so a poisoned lock is safe to reuse.
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reserves one request and `tokens` tokens now, behind everyone waiting. The reservation is
    /// already paid for if [`Reservation::is_ready`]; otherwise await [`Reservation::wait`].
    pub fn reserve(&self, tokens: u64) -> Reservation<'_, C> {
        self.reserve_at(tokens, Place::Back, self.clock.now())
    }

    /// As [`RateLimiter::reserve`], joining the line at `place`, with a reading of the clock the
    /// caller already has.
    pub fn reserve_at(&self, tokens: u64, place: Place, now: C::Instant) -> Reservation<'_, C> {
        #[cfg(feature = "redis")]
        if self.remote.is_some() {
            return Reservation {
                limiter: self,
                ticket: None,
                admitted: false,
                remote: Some(shared::Pending::new(tokens, place)),
            };
        }
        let (ticket, waits) = self.lock().reserve(tokens, place, now);
        Reservation {
            limiter: self,
            ticket: Some(ticket),
            admitted: !waits,
            #[cfg(feature = "redis")]
            remote: None,
        }
    }

    /// Holds every caller, waiting or new, until `until`, and forfeits the buckets' balance: the
    /// provider has said the real allowance is spent. Credit starts again at `until`.
    pub fn pause_until(&self, until: C::Instant) {
        #[cfg(feature = "redis")]
        if let Some(remote) = &self.remote {
            shared::pause(
                &remote.buckets,
                until.saturating_duration_since(self.clock.now()),
            );
        }
        self.lock().pause(self.clock.now(), until);
        // No wake-up needed: a pause only delays, and every waiter re-reads the queue when its
        // current sleep ends.
    }

    /// The balances now: (requests, tokens); `None` for a limit that is not set.
    pub fn balances(&self) -> (Option<f64>, Option<f64>) {
        self.lock().balances(self.clock.now())
    }

    /// The balances now, read without refilling the buckets, so that reading changes nothing
    /// a run does (an observer may read it at every call's end): (requests, tokens). `None`
    /// for a limit that is not set, and for buckets kept on Redis (their balance is there).
    pub fn peek_balances(&self) -> (Option<f64>, Option<f64>) {
        #[cfg(feature = "redis")]
        if self.remote.is_some() {
            return (None, None);
        }
        self.lock().peek_balances(self.clock.now())
    }

    /// Refill rates in units per second: (requests, tokens).
    pub fn rates(&self) -> (Option<f64>, Option<f64>) {
        let queue = self.lock();
        let (r, t) = queue.parts();
        (r.map(Bucket::rate), t.map(Bucket::rate))
    }

    /// Bucket capacities: (requests, tokens).
    pub fn capacities(&self) -> (Option<f64>, Option<f64>) {
        let queue = self.lock();
        let (r, t) = queue.parts();
        (r.map(Bucket::capacity), t.map(Bucket::capacity))
    }

    /// The number of reservations waiting (each is pending in every bucket).
    pub fn waiters(&self) -> usize {
        let queue = self.lock();
        let (r, t) = queue.parts();
        r.or(t).map_or(0, Bucket::waiters)
    }

    /// When reservation `ticket` may go, or `None` if it may go now.
    fn ready_at(&self, ticket: Ticket) -> Option<C::Instant> {
        self.lock().ready_at(ticket, self.clock.now())
    }

    /// Reservation `ticket` goes now.
    fn admit(&self, ticket: Ticket) {
        self.lock().admit(ticket, self.clock.now());
    }

    fn refund(&self, ticket: Ticket) {
        let moved = self.lock().refund(ticket, self.clock.now());
        if moved {
            self.changed.notify_waiters();
        }
    }
}

/// A reservation of one request and some tokens. Dropped before it is ready, it is refunded.
#[derive(Debug)]
#[must_use = "a reservation is refunded when dropped; await `wait` to use it"]
pub struct Reservation<'a, C: Clock = TokioClock> {
    limiter: &'a RateLimiter<C>,
    /// Its place in the in-process buckets (`None`: a shared limiter's reservation that has
    /// not fallen back to them).
    ticket: Option<Ticket>,
    admitted: bool,
    /// A shared limiter's reservation, until it is made on Redis or falls back.
    #[cfg(feature = "redis")]
    remote: Option<shared::Pending<C::Instant>>,
}

impl<C: Clock> Reservation<'_, C> {
    /// True if the buckets already hold this reservation's share: no wait is needed.
    pub fn is_ready(&self) -> bool {
        self.admitted
    }

    /// Waits until this reservation's share has been refilled (and any pause has ended), then
    /// takes it. Cancel-safe: dropping the future before it completes refunds the reservation.
    pub async fn wait(mut self) {
        self.ready().await;
        self.admit();
    }

    /// Waits until this reservation may go, without taking it: the caller can still drop it
    /// (refunded) or [`Reservation::admit`] it. Cancel-safe.
    pub async fn ready(&mut self) {
        if self.admitted {
            return;
        }
        #[cfg(feature = "redis")]
        if self.remote.is_some() && self.ready_remote().await {
            return;
        }
        let Some(ticket) = self.ticket else { return };
        loop {
            let changed = self.limiter.changed.notified();
            tokio::pin!(changed);
            // Register for wake-ups before reading the state, so none is missed in between.
            changed.as_mut().enable();
            match self.limiter.ready_at(ticket) {
                None => return,
                Some(at) => {
                    tokio::select! {
                        biased;
                        _ = self.limiter.clock.sleep_until(at) => {}
                        _ = &mut changed => {}
                    }
                }
            }
        }
    }

    /// Takes the reservation: it is spent and can no longer be refunded. Call it when the
    /// reservation is ready (see [`Reservation::ready`]).
    pub fn admit(mut self) {
        if !self.admitted {
            if let Some(ticket) = self.ticket {
                self.limiter.admit(ticket);
            }
            self.admitted = true;
        }
    }

    /// How long this reservation would wait from now, if nothing changes.
    pub fn wait_time(&self) -> Duration {
        if self.admitted {
            return Duration::ZERO;
        }
        #[cfg(feature = "redis")]
        if let Some(at) = self.remote.as_ref().and_then(shared::Pending::due) {
            return at.saturating_duration_since(self.limiter.clock.now());
        }
        match self.ticket.and_then(|t| self.limiter.ready_at(t)) {
            Some(at) => at.saturating_duration_since(self.limiter.clock.now()),
            None => Duration::ZERO,
        }
    }
}

impl<C: Clock> Drop for Reservation<'_, C> {
    fn drop(&mut self) {
        if self.admitted {
            return;
        }
        if let Some(ticket) = self.ticket {
            self.limiter.refund(ticket);
        }
        #[cfg(feature = "redis")]
        if let (Some(remote), Some(pending)) = (&self.limiter.remote, &self.remote) {
            pending.refund(&remote.buckets);
        }
    }
}
