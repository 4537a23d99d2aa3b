//! One call's way through the scheduler, as its steps: acquire a permit, charge the budget,
//! wait for the limiter, make an attempt, and after a failure report it, pause the limiter for
//! a Retry-After and back off (or give up).
//!
//! Each step reads the clock once after each of its awaits and passes the reading on, so the
//! events of one instant carry that instant and nothing reads the clock twice for one decision.
//! The call folds its own events into a breakdown as it goes, and reports its end to the
//! observer when it is dropped: after its last event, or unfinished if its future was dropped.

use std::future::Future;
use std::sync::PoisonError;

use tokio::sync::SemaphorePermit;

use crate::adaptive::AdaptiveLimit;
use crate::clock::Moment;
use crate::limit::Reservation;
use crate::observe::{Breakdown, CallEnd, CallId, Event, EventKind, LimitChange, RetryCause};
use crate::retry::{Classify, Decision, FailureKind};
use crate::{Attempt, CallError, CallSpec, Clock, Interrupt, Scheduler, Stage, Work};

/// A call in progress: where it is, what it holds, the last clock reading, and what the
/// observer is told when it ends.
pub(crate) struct Call<'a, C: Clock> {
    scheduler: &'a Scheduler<C>,
    spec: &'a CallSpec<C::Instant>,
    id: CallId,
    now: C::Instant,
    /// Charged to the budget and not sent yet: a stop now refunds the charge.
    refundable: bool,
    queued_at: C::Instant,
    breakdown: Breakdown<C::Instant>,
    rate_limited: u32,
    retries: u32,
    timed_out: u32,
    /// The event that ended the call, once it has.
    end: Option<Event<C::Instant>>,
    /// The adaptive limit's window its last attempt was sent in.
    window: u64,
}

/// A call's concurrency permit, given back (or, to an adaptive limit that owes permits,
/// forgotten) when the call ends.
pub(crate) struct Held<'a, I: Moment> {
    permit: Option<SemaphorePermit<'a>>,
    adaptive: Option<&'a AdaptiveLimit<I>>,
}

impl<I: Moment> Drop for Held<'_, I> {
    fn drop(&mut self) {
        if let (Some(a), Some(p)) = (self.adaptive, self.permit.take()) {
            a.release(p);
        }
    }
}

impl<'a, C: Clock> Call<'a, C> {
    /// Opens the call: takes its id and reports it queued. (Always inlined: the call is then
    /// built where the caller's future keeps it, not built here and copied there.)
    #[inline(always)]
    pub(crate) fn open(scheduler: &'a Scheduler<C>, spec: &'a CallSpec<C::Instant>) -> Self {
        let now = scheduler.clock().now();
        let mut call = Call {
            scheduler,
            spec,
            id: scheduler.next_id(),
            now,
            refundable: false,
            queued_at: now,
            breakdown: Breakdown::default(),
            rate_limited: 0,
            retries: 0,
            timed_out: 0,
            end: None,
            window: 0,
        };
        let tokens = spec.tokens;
        call.emit(EventKind::Queued { tokens });
        call
    }

    /// Notes an event at the last clock reading.
    #[inline(always)]
    fn emit(&mut self, kind: EventKind) {
        self.emit_at(kind, self.now);
    }

    /// Notes an event at `at`: folds it into the breakdown and passes it to an observer that
    /// wants events. Always inlined, so each kind's bookkeeping is decided where it is emitted
    /// (a call site's kind is known there: what it counts, whether it ends the call), and no
    /// event is built for an observer that wants none unless it ends the call.
    #[inline(always)]
    fn emit_at(&mut self, kind: EventKind, at: C::Instant) {
        let inner = &self.scheduler.inner;
        let Some(observer) = &inner.observer else {
            return;
        };
        self.breakdown.step(&kind, at);
        match kind {
            EventKind::RateLimited { .. } => self.rate_limited += 1,
            EventKind::RetryScheduled { .. } => self.retries += 1,
            _ => {}
        }
        if inner.events {
            let event = Event {
                at,
                call: self.id,
                kind,
            };
            observer.on_event(&event);
            if event.kind.is_terminal() {
                self.end = Some(event);
            }
        } else if kind.is_terminal() {
            self.end = Some(Event {
                at,
                call: self.id,
                kind,
            });
        }
    }

    /// Ends the call as stopped from outside at `stage`, refunding an unsent charge.
    fn stop<E>(&mut self, stage: Stage, cause: Interrupt) -> CallError<E> {
        if self.refundable {
            if let Some(b) = self.spec.scope.budget() {
                b.refund(self.spec.tokens);
            }
        }
        let kind = EventKind::Cancelled {
            stage,
            cause: cause.clone(),
        };
        // A stop can come from a wait that did not read the clock: read it now.
        if self.scheduler.inner.observer.is_some() {
            let at = self.scheduler.clock().now();
            self.emit_at(kind, at);
        }
        CallError::Interrupted { stage, cause }
    }

    /// Tells the observer the adaptive limit moved.
    fn limit_moved(&self, change: Option<LimitChange<C::Instant>>) {
        if let (Some(change), Some(o)) = (change, &self.scheduler.inner.observer) {
            o.on_limit(&change);
        }
    }

    /// Waits for a concurrency permit (none when unbounded); held until the call ends.
    pub(crate) async fn acquire_permit<E>(
        &mut self,
    ) -> Result<Option<Held<'a, C::Instant>>, CallError<E>> {
        let adaptive = self.scheduler.inner.adaptive.as_ref();
        let held = |permit| {
            Some(Held {
                permit: Some(permit),
                adaptive,
            })
        };
        let permit = self.acquire_semaphore().await?;
        Ok(permit.and_then(held))
    }

    /// Waits for a permit of the fixed or the adaptive limit (none when unbounded).
    async fn acquire_semaphore<E>(&mut self) -> Result<Option<SemaphorePermit<'a>>, CallError<E>> {
        let scope = &self.spec.scope;
        if let Some(cause) = scope.interrupted_at(Work::Unsent, self.now) {
            return Err(self.stop(Stage::Queued, cause));
        }
        let inner = &self.scheduler.inner;
        let sem = match (&inner.permits, &inner.adaptive) {
            (Some(sem), _) => sem,
            (None, Some(a)) => a.semaphore(),
            (None, None) => return Ok(None),
        };
        if let Ok(permit) = sem.try_acquire() {
            return Ok(Some(permit));
        }
        // A scope that can stop nothing is not watched. Watched waits are boxed: kept out of
        // the call's own future, which stays small to move.
        let acquired = if scope.watches(Work::Unsent) {
            Box::pin(scope.run_on(self.scheduler.clock(), Work::Unsent, sem.acquire())).await
        } else {
            Ok(sem.acquire().await)
        };
        match acquired {
            Ok(Ok(permit)) => {
                self.now = self.scheduler.clock().now();
                Ok(Some(permit))
            }
            // The semaphore is never closed, so `acquire` cannot fail; treat it as a cancel.
            Ok(Err(_)) => Err(self.stop(Stage::Queued, Interrupt::Cancelled)),
            Err(cause) => Err(self.stop(Stage::Queued, cause)),
        }
    }

    /// Draws the call's tokens from the scope's budget, if it has one.
    pub(crate) fn charge_budget<E>(&mut self) -> Result<(), CallError<E>> {
        if let Some(b) = self.spec.scope.budget() {
            if let Err(e) = b.charge(self.spec.tokens) {
                return Err(self.stop(Stage::Queued, Interrupt::BudgetExhausted(e)));
            }
            self.refundable = true;
        }
        Ok(())
    }

    /// Before attempt `number`: checks the scope still wants it, then reserves one request and
    /// the call's tokens in the limiter (unless the policy sends retries around it). Returns the
    /// reservation if it must be waited for ([`Call::wait_for_limiter`]); a reservation the
    /// buckets hold already goes at once.
    #[inline]
    pub(crate) fn reserve<E>(
        &mut self,
        number: u32,
    ) -> Result<Option<Reservation<'a, C>>, CallError<E>> {
        // Nothing is reserved or sent for a call its scope has stopped already.
        if let Some(cause) = self.spec.scope.interrupted_at(Work::Unsent, self.now) {
            return Err(self.stop(waited_in(number), cause));
        }
        let inner = &self.scheduler.inner;
        let Some(limiter) = self
            .scheduler
            .limiter_for(self.spec.via)
            .filter(|_| inner.retry.through_limiter(number))
        else {
            return Ok(None);
        };
        let place = inner.retry.place(number);
        let reservation = limiter.reserve_at(self.spec.tokens, place, self.now);
        if reservation.is_ready() {
            reservation.admit();
            return Ok(None);
        }
        Ok(Some(reservation))
    }

    /// Waits until `reservation` is paid for (or the scope stops the call).
    pub(crate) async fn wait_for_limiter<E>(
        &mut self,
        mut reservation: Reservation<'a, C>,
    ) -> Result<(), CallError<E>> {
        let scope = &self.spec.scope;
        self.emit(EventKind::LimiterWaitStart);
        let ready =
            Box::pin(scope.run_on(self.scheduler.clock(), Work::Unsent, reservation.ready())).await;
        self.now = self.scheduler.clock().now();
        // Ready at the very instant the scope stopped: stopped wins, and the reservation (not
        // yet taken) is refunded when dropped.
        if let Some(cause) = ready
            .err()
            .or_else(|| scope.interrupted_at(Work::Unsent, self.now))
        {
            drop(reservation);
            return Err(self.stop(Stage::Limiter, cause));
        }
        self.emit(EventKind::LimiterWaitEnd);
        reservation.admit();
        Ok(())
    }

    /// Sends attempt `number` and waits for its answer (or for the scope to stop it, if the
    /// scope watches work at the provider).
    pub(crate) async fn send<T, E, F, Fut>(&mut self, number: u32, attempt: &mut F) -> Sent<T, E>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.emit(EventKind::Sent { attempt: number });
        self.refundable = false;
        let sent_at = self.now;
        // Each attempt belongs to the window it is sent in: a retry's 429 after a cut is news.
        let in_flight = match &self.scheduler.inner.adaptive {
            Some(a) => {
                self.window = a.epoch();
                a.in_use()
            }
            None => 0,
        };
        let this = Attempt {
            call: self.id,
            number,
        };
        let scope = &self.spec.scope;
        // The attempt's future is made where it is awaited: bound first, it would be built
        // and then copied into this future's state.
        let outcome = if scope.watches(Work::Sent) {
            let work = attempt(this);
            match Box::pin(scope.run_on(self.scheduler.clock(), Work::Sent, work)).await {
                Ok(outcome) => outcome,
                Err(cause) => return Err(self.stop(Stage::InFlight, cause)),
            }
        } else {
            attempt(this).await
        };
        self.now = self.scheduler.clock().now();
        if outcome.is_ok() {
            if let Some(a) = &self.scheduler.inner.adaptive {
                let rtt = self.now.saturating_duration_since(sent_at);
                self.limit_moved(a.on_success(self.now, rtt, in_flight));
            }
            self.emit(EventKind::Completed { attempts: number });
        }
        Ok(outcome)
    }

    /// After attempt `number` failed with `error`: reports a 429, pauses the limiter for its
    /// Retry-After, and either gives up (the error) or backs off until the next attempt.
    pub(crate) async fn after_failure<E: Classify>(
        &mut self,
        error: E,
        number: u32,
    ) -> Result<(), CallError<E>> {
        let kind = error.classify();
        self.timed_out += u32::from(matches!(kind, FailureKind::Timeout));
        if let FailureKind::RateLimited { retry_after } = kind {
            self.emit(EventKind::RateLimited {
                attempt: number,
                retry_after,
            });
        }
        let inner = &self.scheduler.inner;
        if let (Some(a), FailureKind::RateLimited { .. } | FailureKind::Timeout) =
            (&inner.adaptive, &kind)
        {
            self.limit_moved(a.on_drop(self.window, self.now));
        }
        let policy = &inner.retry;
        let limiter = self.scheduler.limiter_for(self.spec.via);
        if let (Some(limiter), Some(wait)) = (limiter, policy.limiter_pause(&kind)) {
            limiter.pause_until(self.now + wait);
        }
        let decision = {
            let mut rng = inner.rng.lock().unwrap_or_else(PoisonError::into_inner);
            let deadline = self.spec.scope.deadline();
            policy.decide(&kind, number - 1, self.now, deadline, &mut **rng)
        };
        let delay = match decision {
            Decision::GiveUp(reason) => {
                self.emit(EventKind::Failed {
                    attempts: number,
                    reason,
                });
                return Err(CallError::Failed {
                    error,
                    attempts: number,
                    reason,
                });
            }
            Decision::Retry { delay } => delay,
        };
        let cause = retry_cause(&kind);
        self.emit(EventKind::RetryScheduled {
            attempt: number,
            delay,
            cause,
        });
        let backoff = self.scheduler.clock().sleep_until(self.now + delay);
        if let Err(cause) = Box::pin(self.spec.scope.run_on(
            self.scheduler.clock(),
            Work::Unsent,
            backoff,
        ))
        .await
        {
            return Err(self.stop(Stage::Backoff, cause));
        }
        self.now = self.scheduler.clock().now();
        Ok(())
    }
}

impl<C: Clock> Drop for Call<'_, C> {
    fn drop(&mut self) {
        let Some(observer) = &self.scheduler.inner.observer else {
            return;
        };
        let at = match &self.end {
            Some(event) => event.at,
            None => {
                // Dropped unfinished: the phase it was in ends now.
                let now = self.scheduler.clock().now();
                self.breakdown.close(now);
                now
            }
        };
        observer.on_call_end(&CallEnd {
            call: self.id,
            queued_at: self.queued_at,
            at,
            end: self.end.as_ref().map(|e| &e.kind),
            breakdown: self.breakdown,
            rate_limited: self.rate_limited,
            retries: self.retries,
            timed_out: self.timed_out,
            limiter_balance: (self.scheduler.inner.balances)
                .then(|| self.scheduler.limiter_for(self.spec.via))
                .flatten()
                .and_then(|l| l.peek_balances().0),
        });
    }
}

/// Where a call stopped before attempt `number` was waiting: queued before the first, backing
/// off before a retry.
fn waited_in(number: u32) -> Stage {
    if number == 1 {
        Stage::Queued
    } else {
        Stage::Backoff
    }
}

/// An attempt's answer, or the stop that ended the call while it was in flight.
pub(crate) type Sent<T, E> = Result<Result<T, E>, CallError<E>>;

fn retry_cause(kind: &FailureKind) -> RetryCause {
    match kind {
        FailureKind::RateLimited { .. } => RetryCause::RateLimited,
        FailureKind::Status { code, .. } => RetryCause::Status(*code),
        // `Other` is never retried, so it never reaches here.
        FailureKind::Timeout | FailureKind::Other => RetryCause::Timeout,
    }
}
