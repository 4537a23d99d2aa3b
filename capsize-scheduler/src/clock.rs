//! The scheduler's only source of time.
//!
//! Everything in this crate that reads the time or waits for it goes through a [`Clock`]:
//! [`TokioClock`] (the default, tokio's clock, paused or not) in production, or a simulator's
//! virtual clock. Instants are `tokio::time::Instant`s either way, so no type an agent sees
//! changes with the clock.

use std::future::Future;

use tokio::time::Instant;

/// A source of time: what it is now, and a timer until an instant.
pub trait Clock: Clone + 'static {
    /// The timer [`Clock::sleep_until`] returns.
    type Sleep: Future<Output = ()>;

    /// The time now.
    fn now(&self) -> Instant;

    /// A future that completes at `deadline` (at once if it has passed).
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;
}

/// tokio's clock: real time under a normal runtime, virtual under a paused one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokioClock;

#[allow(clippy::disallowed_methods)] // the one place the scheduler reads tokio's clock
impl Clock for TokioClock {
    type Sleep = tokio::time::Sleep;

    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    #[inline]
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline)
    }
}
