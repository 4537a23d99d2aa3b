//! The context a piece of work runs in: a cancellation token, a deadline and a budget.
//!
//! A [`Scope`] is passed down a fan-out. A child scope's token is a child of its parent's (a
//! parent's cancel reaches every child, a child's cancel stays below it) and its deadline is
//! never later than its parent's, so a parent deadline cancels its children.
//!
//! Ties at one instant follow one rule, decided by the clock and not by which task the runtime
//! happens to poll first: work that finishes at the instant its scope stops keeps its result
//! ([`Scope::run`] looks at the work first), and nothing *starts* at or after that instant
//! ([`Scope::interrupted`] compares the clock with the deadline or stop time, so a query, a send
//! or a retry due at the stop instant is not made). A stop known in advance (the user's stop at
//! a set time) is therefore given as [`Scope::with_stop_at`], not as a token cancelled by a
//! timer in another task.

use std::future::{pending, Future};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::budget::Budget;
use super::clock::{Clock, Moment, TokioClock};
use super::error::Interrupt;

/// Which work a scope is asked about: an exhausted budget stops work not yet sent, not work
/// already at the provider (its tokens are spent either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Work {
    /// Not sent yet (queued, waiting for the limiter, backing off): a cancel, a stop, a
    /// deadline or an exhausted budget stops it.
    Unsent,
    /// Sent: a cancel, a stop or a deadline stops it; the budget no longer does.
    Sent,
}

impl Work {
    fn budget_counts(self) -> bool {
        self == Work::Unsent
    }
}

/// Cancellation token, deadline and budget shared by a piece of work and everything it spawns.
/// Its instants are those of the clock the work runs on (`tokio::time::Instant` unless it is
/// another [`Clock`]'s: `Scope::default()` makes an empty one for any clock).
#[derive(Debug, Clone)]
pub struct Scope<I = Instant> {
    cancel: Option<CancellationToken>,
    stop_at: Option<I>,
    deadline: Option<I>,
    budget: Option<Budget>,
}

impl<I> Default for Scope<I> {
    fn default() -> Self {
        Scope {
            cancel: None,
            stop_at: None,
            deadline: None,
            budget: None,
        }
    }
}

impl Scope {
    /// A scope that nothing can stop: no token, no deadline, no budget.
    pub fn new() -> Self {
        Scope::default()
    }

    /// What has stopped `work` in this scope already, if anything (on tokio's clock).
    pub fn interrupted(&self, work: Work) -> Option<Interrupt> {
        self.interrupted_at(work, TokioClock.now())
    }

    /// Runs `fut`, work of kind `work`, until it finishes or the scope stops it (dropping it),
    /// on tokio's clock. Work that finishes at the same instant the scope stops keeps its
    /// result.
    pub async fn run<F: Future>(&self, work: Work, fut: F) -> Result<F::Output, Interrupt> {
        self.run_on(&TokioClock, work, fut).await
    }
}

impl<I: Moment> Scope<I> {
    /// The same scope stopped by `token`.
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// The same scope cancelled at `at` (or at its current stop time, if earlier): as if a token
    /// were cancelled then, but decided by the clock, so ties at that instant follow the rule
    /// above whatever the order tasks run in.
    pub fn with_stop_at(mut self, at: I) -> Self {
        self.stop_at = Some(self.stop_at.map_or(at, |s| s.min(at)));
        self
    }

    /// The same scope with a deadline at `at`, or its current deadline if that is earlier.
    pub fn with_deadline(mut self, at: I) -> Self {
        self.deadline = Some(self.deadline.map_or(at, |d| d.min(at)));
        self
    }

    /// The same scope drawing on `budget`.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// A child scope: a token of its own that the parent's cancels, the same deadline and budget.
    pub fn child(&self) -> Scope<I> {
        Scope {
            cancel: Some(match &self.cancel {
                Some(t) => t.child_token(),
                None => CancellationToken::new(),
            }),
            stop_at: self.stop_at,
            deadline: self.deadline,
            budget: self.budget.clone(),
        }
    }

    /// Cancels this scope and its children (no-op for a scope without a token).
    pub fn cancel(&self) {
        if let Some(t) = &self.cancel {
            t.cancel();
        }
    }

    /// The cancellation token, if any.
    pub fn token(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<I> {
        self.deadline
    }

    /// The budget, if any.
    pub fn budget(&self) -> Option<&Budget> {
        self.budget.as_ref()
    }

    /// What had stopped `work` in this scope at `now`, if anything.
    pub fn interrupted_at(&self, work: Work, now: I) -> Option<Interrupt> {
        if self.cancel.as_ref().is_some_and(|t| t.is_cancelled())
            || self.stop_at.is_some_and(|s| now >= s)
        {
            return Some(Interrupt::Cancelled);
        }
        if self.deadline.is_some_and(|d| now >= d) {
            return Some(Interrupt::DeadlineExceeded);
        }
        if work.budget_counts() {
            if let Some(e) = self.budget.as_ref().and_then(Budget::exhausted) {
                return Some(Interrupt::BudgetExhausted(e));
            }
        }
        None
    }

    /// Whether anything can stop `work` in this scope: a token, a stop time, a deadline, or
    /// (for unsent work) a budget. Work in a scope that watches nothing can simply be awaited.
    pub fn watches(&self, work: Work) -> bool {
        self.cancel.is_some()
            || self.stop_at.is_some()
            || self.deadline.is_some()
            || (work.budget_counts() && self.budget.is_some())
    }

    /// As [`Scope::run`], with deadlines and stop times kept on `clock`.
    pub async fn run_on<C: Clock<Instant = I>, F: Future>(
        &self,
        clock: &C,
        work: Work,
        fut: F,
    ) -> Result<F::Output, Interrupt> {
        if let Some(i) = self.interrupted_at(work, clock.now()) {
            return Err(i);
        }
        if !self.watches(work) {
            return Ok(fut.await);
        }
        let watch_budget = self.budget.as_ref().filter(|_| work.budget_counts());
        let cancelled = async {
            match &self.cancel {
                Some(t) => t.cancelled().await,
                None => pending().await,
            }
        };
        let stopped = async {
            match self.stop_at {
                Some(s) => clock.sleep_until(s).await,
                None => pending().await,
            }
        };
        let expired = async {
            match self.deadline {
                Some(d) => clock.sleep_until(d).await,
                None => pending().await,
            }
        };
        let spent = async {
            match watch_budget {
                Some(b) => b.spent().await,
                None => pending().await,
            }
        };
        tokio::select! {
            biased;
            out = fut => Ok(out),
            _ = cancelled => Err(Interrupt::Cancelled),
            _ = stopped => Err(Interrupt::Cancelled),
            _ = expired => Err(Interrupt::DeadlineExceeded),
            why = spent => Err(Interrupt::BudgetExhausted(why)),
        }
    }
}
