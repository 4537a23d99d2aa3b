//! Fan-out and join: run many jobs under one shared scope, three ways.
//!
//! - [`FanOut::gather`] waits for every job and returns every result, each `Ok` or `Err`: a
//!   partial failure is there to see, never hidden and never a crash of the caller.
//! - [`FanOut::as_completed`] yields each result as it finishes, to start work on early ones.
//! - [`FanOut::all_or_nothing`] stops at the first failure: it cancels the siblings, waits until
//!   each has finished, and returns the failures.
//!
//! Jobs are closures given the fan-out's [`Scope`]; they are polled in place, never spawned, so
//! nothing a fan-out started can outlive it: when its future is dropped, so are theirs. Bounding
//! how many run at once is the scheduler's semaphore, which every call goes through.
//!
//! A fan-out reads the time (to tell a stop from outside from its own cancel) on tokio's clock,
//! or on the [`Clock`] given to [`FanOut::with_clock`].

use std::future::Future;

use futures_core::Stream;
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::clock::{Clock, TokioClock};
use super::error::CallError;
use super::scope::{Scope, Work};

/// An error that may be an interruption (cancel, deadline, budget) rather than a failure.
pub trait Interruption {
    /// True if the work was stopped from outside.
    fn is_interrupt(&self) -> bool;
}

impl<E> Interruption for CallError<E> {
    fn is_interrupt(&self) -> bool {
        CallError::is_interrupt(self)
    }
}

/// Why [`FanOut::all_or_nothing`] did not return every value.
#[derive(Debug)]
pub struct Failures<E> {
    /// The jobs that failed, by index: real failures, and interruptions that came from outside
    /// before this fan-out cancelled anything.
    pub failures: Vec<(usize, E)>,
    /// The jobs this fan-out cancelled after the first failure, by index.
    pub cancelled: Vec<usize>,
}

/// A group of jobs sharing a scope: one cancel (or deadline) stops them all.
#[derive(Debug, Clone)]
pub struct FanOut<C: Clock = TokioClock> {
    scope: Scope<C::Instant>,
    clock: C,
}

impl FanOut {
    /// A fan-out under `parent`: a token of its own that the parent's cancels, and the parent's
    /// deadline and budget.
    pub fn new(parent: &Scope) -> Self {
        FanOut::on(TokioClock, parent)
    }
}

impl<C: Clock> FanOut<C> {
    /// A fan-out under `parent` on `clock` (the scheduler's, when that is not tokio's): as
    /// [`FanOut::new`], with the scope's instants on that clock.
    pub fn on(clock: C, parent: &Scope<C::Instant>) -> Self {
        FanOut {
            scope: parent.child(),
            clock,
        }
    }

    /// The same fan-out on `clock`, another clock of the same instants (the scheduler's, when
    /// that is not tokio's; see [`FanOut::on`] for a clock of other instants).
    pub fn with_clock<D: Clock<Instant = C::Instant>>(self, clock: D) -> FanOut<D> {
        FanOut {
            scope: self.scope,
            clock,
        }
    }

    /// The same fan-out with a deadline at `at` (or the parent's, if earlier).
    pub fn with_deadline(self, at: C::Instant) -> Self {
        FanOut {
            scope: self.scope.with_deadline(at),
            clock: self.clock,
        }
    }

    /// The scope every job is given.
    pub fn scope(&self) -> &Scope<C::Instant> {
        &self.scope
    }

    /// Cancels every job: queued calls are never sent, in-flight ones are dropped.
    pub fn cancel(&self) {
        self.scope.cancel();
    }

    /// Runs every job and returns every result, in the order the jobs were given.
    pub async fn gather<I, F, Fut>(&self, jobs: I) -> Vec<Fut::Output>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce(Scope<C::Instant>) -> Fut,
        Fut: Future,
    {
        futures_util::future::join_all(jobs.into_iter().map(|job| job(self.scope.clone()))).await
    }

    /// Runs every job and yields `(index, result)` as each finishes.
    pub fn as_completed<I, F, Fut>(&self, jobs: I) -> impl Stream<Item = (usize, Fut::Output)>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce(Scope<C::Instant>) -> Fut,
        Fut: Future,
    {
        jobs.into_iter()
            .enumerate()
            .map(|(i, job)| {
                let work = job(self.scope.clone());
                async move { (i, work.await) }
            })
            .collect::<FuturesUnordered<_>>()
    }

    /// Runs every job; at the first failure, cancels the rest and waits for them to finish.
    /// Returns every value, in order, or the failures.
    pub async fn all_or_nothing<I, F, Fut, T, E>(&self, jobs: I) -> Result<Vec<T>, Failures<E>>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce(Scope<C::Instant>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Interruption,
    {
        let scope = self.scope.child();
        let mut running: FuturesUnordered<_> = jobs
            .into_iter()
            .enumerate()
            .map(|(i, job)| {
                let work = job(scope.clone());
                async move { (i, work.await) }
            })
            .collect();
        let mut values: Vec<Option<T>> = (0..running.len()).map(|_| None).collect();
        let mut failed = Failures {
            failures: Vec::new(),
            cancelled: Vec::new(),
        };
        let mut cancelled = false;
        while let Some((i, result)) = running.next().await {
            match result {
                Ok(v) => values[i] = Some(v),
                // Stopped by this fan-out's own cancel, not by its scope (a parent's cancel or
                // deadline stops every job from outside: those are failures).
                Err(e)
                    if cancelled
                        && e.is_interrupt()
                        && self
                            .scope
                            .interrupted_at(Work::Unsent, self.clock.now())
                            .is_none() =>
                {
                    failed.cancelled.push(i)
                }
                Err(e) => {
                    failed.failures.push((i, e));
                    if !cancelled {
                        cancelled = true;
                        scope.cancel();
                    }
                }
            }
        }
        if cancelled {
            failed.cancelled.sort_unstable();
            return Err(failed);
        }
        // Not cancelled means no job failed, so every slot holds a value.
        Ok(values.into_iter().flatten().collect())
    }
}
