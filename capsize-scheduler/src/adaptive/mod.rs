//! Adaptive concurrency: a limit on calls in flight that moves with what the provider says,
//! instead of a fixed `max_concurrency`. Two policies, one file each:
//!
//! - [`Aimd`] (`aimd.rs`): additive increase, multiplicative decrease;
//! - [`Gradient`] (`gradient.rs`): a latency gradient after Netflix's Gradient2, that also
//!   backs off on drops.
//!
//! What they share lives here. A drop is a 429 or a timeout; it multiplies the limit by
//! `backoff` (down to `min`) once per window: a drop of an attempt sent before the last
//! decrease is the same congestion, already answered, and is ignored (so a burst of 429s
//! halves the limit once, not to the floor); a retry sent after a cut that is refused again
//! cuts again. The limit is a number; the permits are its floor. Permits removed while in use
//! are owed: the next ones released are forgotten instead of returned. The limit's time
//! average is kept as it moves (on the scheduler's clock), and each move of its floor is
//! reported to the scheduler's observer ([`crate::observe::Observer::on_limit`]).

mod aimd;
mod gradient;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

pub use self::aimd::Aimd;
pub use self::gradient::Gradient;
use self::gradient::Rtts;
use crate::clock::Moment;
use crate::observe::LimitChange;

/// An adaptive limit on calls in flight: one of the policies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Adaptive {
    /// Additive increase, multiplicative decrease.
    Aimd(Aimd),
    /// A latency gradient that also backs off on drops.
    Gradient(Gradient),
}

impl From<Aimd> for Adaptive {
    fn from(a: Aimd) -> Self {
        Adaptive::Aimd(a)
    }
}

impl From<Gradient> for Adaptive {
    fn from(g: Gradient) -> Self {
        Adaptive::Gradient(g)
    }
}

impl Adaptive {
    /// Whether the policy's settings hold together.
    pub fn is_valid(&self) -> bool {
        match self {
            Adaptive::Aimd(a) => a.is_valid(),
            Adaptive::Gradient(g) => g.is_valid(),
        }
    }

    fn bounds(&self) -> Bounds {
        match self {
            Adaptive::Aimd(a) => a.bounds(),
            Adaptive::Gradient(g) => g.bounds(),
        }
    }

    fn backoff(&self) -> f64 {
        match self {
            Adaptive::Aimd(a) => a.backoff,
            Adaptive::Gradient(g) => g.backoff,
        }
    }
}

/// The bounds every policy has.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    initial: usize,
    min: usize,
    max: usize,
}

impl Bounds {
    fn is_valid(&self, backoff: f64) -> bool {
        self.min >= 1
            && self.min <= self.initial
            && self.initial <= self.max
            && self.max <= Semaphore::MAX_PERMITS
            && backoff > 0.0
            && backoff < 1.0
    }
}

/// What the limit has been, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LimitStats {
    /// The limit now.
    pub current: usize,
    /// The lowest it has been.
    pub min: usize,
    /// The highest it has been.
    pub max: usize,
    /// Times it was cut (a drop at `min` cuts nothing and is not counted).
    pub decreases: u64,
    /// Its average over time, from the scheduler's start to now.
    pub mean: f64,
}

#[derive(Debug)]
struct State<I> {
    limit: f64,
    /// Permits that exist once the owed ones are forgotten: `floor(limit)`.
    granted: usize,
    /// Permits in use that are to be forgotten when released.
    owed: usize,
    /// Cuts so far: a call's window is the count when it got its permit.
    epoch: u64,
    /// The gradient's long-run round trip (unused by AIMD).
    long: Rtts,
    stats: LimitStats,
    /// Permit-seconds up to `last`.
    area: f64,
    since: I,
    last: I,
}

/// An [`Adaptive`] limit over a semaphore of permits.
#[derive(Debug)]
pub(crate) struct AdaptiveLimit<I> {
    policy: Adaptive,
    permits: Semaphore,
    state: Mutex<State<I>>,
}

impl<I: Moment> AdaptiveLimit<I> {
    /// A limit at `policy`'s initial value from `now`.
    pub(crate) fn new(policy: Adaptive, now: I) -> Self {
        let initial = policy.bounds().initial;
        AdaptiveLimit {
            policy,
            permits: Semaphore::new(initial),
            state: Mutex::new(State {
                limit: initial as f64,
                granted: initial,
                owed: 0,
                epoch: 0,
                long: Rtts::default(),
                stats: LimitStats {
                    current: initial,
                    min: initial,
                    max: initial,
                    decreases: 0,
                    mean: initial as f64,
                },
                area: 0.0,
                since: now,
                last: now,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<I>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The permits.
    pub(crate) fn semaphore(&self) -> &Semaphore {
        &self.permits
    }

    /// The window a permit taken now belongs to.
    pub(crate) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Calls holding permits now.
    pub(crate) fn in_use(&self) -> usize {
        let s = self.lock();
        (s.granted + s.owed).saturating_sub(self.permits.available_permits())
    }

    /// A call succeeded at `now`, its attempt answered in `rtt` with `in_flight` calls holding
    /// permits when it was sent: the policy's step, up to `max`.
    pub(crate) fn on_success(
        &self,
        now: I,
        rtt: Duration,
        in_flight: usize,
    ) -> Option<LimitChange<I>> {
        let mut guard = self.lock();
        let s = &mut *guard;
        let next = match &self.policy {
            Adaptive::Aimd(a) => a.grow(s.limit),
            Adaptive::Gradient(g) => g.step(&mut s.long, s.limit, rtt, in_flight),
        };
        self.set(s, next, now)
    }

    /// A call whose permit belongs to window `epoch` was refused (429) or timed out at `now`:
    /// the limit is cut by `backoff`, down to `min`, unless the window has been answered
    /// already.
    pub(crate) fn on_drop(&self, epoch: u64, now: I) -> Option<LimitChange<I>> {
        let mut guard = self.lock();
        let s = &mut *guard;
        if epoch < s.epoch {
            return None;
        }
        s.epoch += 1;
        // At the floor there is nothing to cut: not counted.
        if s.limit > self.policy.bounds().min as f64 {
            s.stats.decreases += 1;
        }
        let next = s.limit * self.policy.backoff();
        self.set(s, next, now)
    }

    /// Moves the limit to `next` within the bounds; its floor's permits follow.
    fn set(&self, s: &mut State<I>, next: f64, now: I) -> Option<LimitChange<I>> {
        let b = self.policy.bounds();
        s.limit = next.clamp(b.min as f64, b.max as f64);
        let target = s.limit.floor() as usize;
        let from = s.granted;
        if target == from {
            return None;
        }
        if target > from {
            let mut more = target - from;
            // Owed permits still in use are simply not forgotten any more.
            let kept = more.min(s.owed);
            s.owed -= kept;
            more -= kept;
            self.permits.add_permits(more);
        } else {
            let cut = from - target;
            let removed = self.permits.forget_permits(cut);
            s.owed += cut - removed;
        }
        s.area += from as f64 * now.saturating_duration_since(s.last).as_secs_f64();
        s.last = s.last.max(now);
        s.granted = target;
        s.stats.current = target;
        s.stats.min = s.stats.min.min(target);
        s.stats.max = s.stats.max.max(target);
        Some(LimitChange {
            at: now,
            from,
            to: target,
        })
    }

    /// Gives `permit` back, or forgets it if permits are owed.
    pub(crate) fn release(&self, permit: SemaphorePermit<'_>) {
        let mut s = self.lock();
        if s.owed > 0 {
            s.owed -= 1;
            permit.forget();
        } else {
            // Given back under the lock: a cut in between would owe it and find it free.
            drop(permit);
        }
    }

    /// The limit's statistics, its mean taken up to `now`.
    pub(crate) fn stats(&self, now: I) -> LimitStats {
        let s = self.lock();
        let mut stats = s.stats;
        let span = now.saturating_duration_since(s.since).as_secs_f64();
        if span > 0.0 {
            let open = now.saturating_duration_since(s.last).as_secs_f64();
            stats.mean = (s.area + s.granted as f64 * open) / span;
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // an instant to start from; time is passed in

    use tokio::time::Instant;

    use super::*;

    fn aimd(t0: Instant) -> AdaptiveLimit<Instant> {
        let policy = Aimd {
            initial: 4,
            min: 1,
            max: 8,
            backoff: 0.5,
        };
        AdaptiveLimit::new(policy.into(), t0)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_window_of_successes_adds_one_permit() {
        let t0 = Instant::now();
        let a = aimd(t0);
        // 4 -> 4.25 -> 4.49 -> 4.71 -> 4.92 -> 5.12: the fifth success makes it 5.
        for _ in 0..4 {
            a.on_success(t0, secs(1), 4);
        }
        assert_eq!(a.semaphore().available_permits(), 4);
        a.on_success(t0, secs(1), 4);
        assert_eq!(a.semaphore().available_permits(), 5);
        assert_eq!(a.stats(t0).max, 5);
    }

    #[test]
    fn a_burst_of_drops_cuts_once_and_permits_in_use_are_owed() {
        let t0 = Instant::now();
        let a = aimd(t0);
        let held: Vec<_> = (0..4)
            .map(|_| a.semaphore().try_acquire().expect("a permit"))
            .collect();
        let epoch = a.epoch();
        // Four calls of one window all see a 429: the limit halves once, to 2.
        for _ in 0..4 {
            a.on_drop(epoch, t0);
        }
        assert_eq!((a.stats(t0).current, a.stats(t0).decreases), (2, 1));
        // All four permits are in use: two are owed, forgotten as they come back.
        let mut held = held.into_iter();
        for p in held.by_ref().take(2) {
            a.release(p);
        }
        assert_eq!(a.semaphore().available_permits(), 0);
        for p in held {
            a.release(p);
        }
        assert_eq!(a.semaphore().available_permits(), 2);
        // A drop in the next window cuts again, never below min.
        a.on_drop(a.epoch(), t0);
        a.on_drop(a.epoch(), t0);
        assert_eq!(a.stats(t0).current, 1);
        assert_eq!(a.stats(t0).min, 1);
        // The second of those found the limit at its floor: nothing cut, not counted.
        assert_eq!(a.stats(t0).decreases, 2);
        assert_eq!(a.semaphore().available_permits(), 1);
    }

    #[test]
    fn the_mean_is_over_time_and_changes_are_reported() {
        let t0 = Instant::now();
        let a = aimd(t0);
        // 4 for 10 s, then a cut to 2 for 30 s: (40 + 60) / 40 = 2.5.
        let change = a.on_drop(a.epoch(), t0 + secs(10));
        assert_eq!(
            change,
            Some(LimitChange {
                at: t0 + secs(10),
                from: 4,
                to: 2
            })
        );
        assert_eq!(a.stats(t0 + secs(40)).mean, 2.5);
        // A success that does not move the floor reports nothing.
        assert_eq!(a.on_success(t0 + secs(40), secs(1), 2), None);
        assert_eq!(a.in_use(), 0);
    }
}
