//! The scheduler's only source of time.
//!
//! Everything in this crate that reads the time or waits for it goes through a [`Clock`]:
//! [`TokioClock`] (the default, tokio's clock, paused or not) in production, or a simulator's
//! virtual clock. Each clock says what its instants are ([`Clock::Instant`], a [`Moment`]):
//! `tokio::time::Instant` on tokio's clock, so no type an agent on the default clock sees
//! changes; a virtual clock may use [`Nanos`], an integer count of nanoseconds since its start,
//! whose arithmetic is a machine instruction where a timespec's is a function call.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::ops::{Add, Sub};
use std::time::Duration;

use tokio::time::Instant;

/// A point in time on some [`Clock`]: ordered, moved by durations, and a duration apart from
/// another. Implemented by `tokio::time::Instant` and [`Nanos`].
pub trait Moment:
    Copy
    + Ord
    + Hash
    + Debug
    + Send
    + Sync
    + 'static
    + Add<Duration, Output = Self>
    + Sub<Duration, Output = Self>
    + Sub<Self, Output = Duration>
{
    /// The time from `earlier` to this instant, zero if `earlier` is later.
    fn saturating_duration_since(self, earlier: Self) -> Duration;

    /// This instant moved `d` later, if the type can name it.
    fn checked_add(self, d: Duration) -> Option<Self>;

    /// This instant moved `d` earlier, if the type can name it.
    fn checked_sub(self, d: Duration) -> Option<Self>;
}

impl Moment for Instant {
    #[inline]
    fn saturating_duration_since(self, earlier: Self) -> Duration {
        Instant::saturating_duration_since(&self, earlier)
    }

    #[inline]
    fn checked_add(self, d: Duration) -> Option<Self> {
        Instant::checked_add(&self, d)
    }

    #[inline]
    fn checked_sub(self, d: Duration) -> Option<Self> {
        Instant::checked_sub(&self, d)
    }
}

/// An instant of a virtual clock: whole nanoseconds since the clock's start, up to about 584
/// years. Arithmetic saturates: an instant never wraps, and the time since a later instant is
/// zero (as `Instant`'s is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(u64);

impl Nanos {
    /// The clock's start.
    pub const ZERO: Nanos = Nanos(0);

    /// `ns` nanoseconds after the clock's start.
    #[inline]
    pub const fn from_nanos(ns: u64) -> Nanos {
        Nanos(ns)
    }

    /// Nanoseconds since the clock's start.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time since the clock's start.
    #[inline]
    pub const fn since_start(self) -> Duration {
        Duration::from_nanos(self.0)
    }
}

/// `d` in whole nanoseconds, `None` past `u64::MAX`.
#[inline]
fn nanos_of(d: Duration) -> Option<u64> {
    d.as_secs()
        .checked_mul(1_000_000_000)?
        .checked_add(u64::from(d.subsec_nanos()))
}

impl Add<Duration> for Nanos {
    type Output = Nanos;

    /// Saturates at the last instant the type can name.
    #[inline]
    fn add(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_add(nanos_of(d).unwrap_or(u64::MAX)))
    }
}

impl Sub<Duration> for Nanos {
    type Output = Nanos;

    /// Saturates at the clock's start.
    #[inline]
    fn sub(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_sub(nanos_of(d).unwrap_or(u64::MAX)))
    }
}

impl Sub<Nanos> for Nanos {
    type Output = Duration;

    /// Zero if `earlier` is later.
    #[inline]
    fn sub(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Moment for Nanos {
    #[inline]
    fn saturating_duration_since(self, earlier: Self) -> Duration {
        self - earlier
    }

    #[inline]
    fn checked_add(self, d: Duration) -> Option<Self> {
        nanos_of(d).and_then(|n| self.0.checked_add(n)).map(Nanos)
    }

    #[inline]
    fn checked_sub(self, d: Duration) -> Option<Self> {
        nanos_of(d).and_then(|n| self.0.checked_sub(n)).map(Nanos)
    }
}

/// A source of time: what it is now, and a timer until an instant.
pub trait Clock: Clone + 'static {
    /// Its instants (`tokio::time::Instant` on [`TokioClock`]).
    type Instant: Moment;

    /// The timer [`Clock::sleep_until`] returns.
    type Sleep: Future<Output = ()>;

    /// The time now.
    fn now(&self) -> Self::Instant;

    /// A future that completes at `deadline` (at once if it has passed).
    fn sleep_until(&self, deadline: Self::Instant) -> Self::Sleep;
}

/// tokio's clock: real time under a normal runtime, virtual under a paused one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokioClock;

#[allow(clippy::disallowed_methods)] // the one place the scheduler reads tokio's clock
impl Clock for TokioClock {
    type Instant = Instant;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_arithmetic_is_exact_and_saturates() {
        let t = Nanos::from_nanos(1_500);
        assert_eq!(t + Duration::from_nanos(500), Nanos::from_nanos(2_000));
        assert_eq!(t - Duration::from_nanos(500), Nanos::from_nanos(1_000));
        assert_eq!(t - Nanos::from_nanos(500), Duration::from_nanos(1_000));
        assert_eq!(Nanos::from_nanos(500) - t, Duration::ZERO);
        assert_eq!(t - Duration::from_secs(1), Nanos::ZERO);
        assert_eq!(t + Duration::MAX, Nanos::from_nanos(u64::MAX));
        assert_eq!(t.checked_add(Duration::MAX), None);
        assert_eq!(t.checked_sub(Duration::from_micros(2)), None);
        assert_eq!(
            t.checked_add(Duration::from_secs(2)),
            Some(Nanos::from_nanos(2_000_001_500))
        );
        assert_eq!(t.saturating_duration_since(Nanos::ZERO), t.since_start());
    }
}
