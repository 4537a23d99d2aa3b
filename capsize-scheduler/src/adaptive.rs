//! Adaptive concurrency: a limit on calls in flight that moves with what the provider says,
//! instead of a fixed `max_concurrency`.
//!
//! [`Aimd`] is additive increase, multiplicative decrease, as TCP does it: every call that
//! succeeds adds `1 / limit` (one permit a window of `limit` successes); a 429 or a timeout
//! multiplies the limit by `backoff` (down to `min`), once per window: a drop of an attempt
//! sent before the last decrease is the same congestion, already answered, and is ignored (so a
//! burst of 429s halves the limit once, not to the floor); a retry sent after a cut that is
//! refused again cuts again. The limit is a number;
//! the permits are its floor. Permits removed while in use are owed: the next ones released are
//! forgotten instead of returned.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Additive-increase, multiplicative-decrease limits on calls in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aimd {
    /// The limit at the start.
    pub initial: usize,
    /// The lowest it goes.
    pub min: usize,
    /// The highest it goes.
    pub max: usize,
    /// What a drop (a 429 or a timeout) multiplies it by, in (0, 1).
    pub backoff: f64,
}

impl Aimd {
    /// Whether the bounds hold together: `1 <= min <= initial <= max` and `backoff` in (0, 1).
    pub fn is_valid(&self) -> bool {
        self.min >= 1
            && self.min <= self.initial
            && self.initial <= self.max
            && self.max <= Semaphore::MAX_PERMITS
            && self.backoff > 0.0
            && self.backoff < 1.0
    }
}

/// What the limit has been, for reports: the lowest, the highest, and how often it moved.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LimitStats {
    /// The limit now.
    pub current: usize,
    /// The lowest it has been.
    pub min: usize,
    /// The highest it has been.
    pub max: usize,
    /// Times it was cut.
    pub decreases: u64,
}

#[derive(Debug)]
struct State {
    limit: f64,
    /// Permits that exist once the owed ones are forgotten: `floor(limit)`.
    granted: usize,
    /// Permits in use that are to be forgotten when released.
    owed: usize,
    /// Cuts so far: a call's window is the count when it got its permit.
    epoch: u64,
    stats: LimitStats,
}

/// An [`Aimd`] limit over a semaphore of permits.
#[derive(Debug)]
pub(crate) struct AdaptiveLimit {
    config: Aimd,
    permits: Semaphore,
    state: Mutex<State>,
}

impl AdaptiveLimit {
    pub(crate) fn new(config: Aimd) -> Self {
        AdaptiveLimit {
            config,
            permits: Semaphore::new(config.initial),
            state: Mutex::new(State {
                limit: config.initial as f64,
                granted: config.initial,
                owed: 0,
                epoch: 0,
                stats: LimitStats {
                    current: config.initial,
                    min: config.initial,
                    max: config.initial,
                    decreases: 0,
                },
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
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

    /// A call succeeded: the limit grows by `1 / limit`, up to `max`.
    pub(crate) fn on_success(&self) {
        let mut s = self.lock();
        s.limit = (s.limit + 1.0 / s.limit).min(self.config.max as f64);
        let target = s.limit.floor() as usize;
        if target > s.granted {
            let mut more = target - s.granted;
            // Owed permits still in use are simply not forgotten any more.
            let kept = more.min(s.owed);
            s.owed -= kept;
            more -= kept;
            self.permits.add_permits(more);
            s.granted = target;
            s.stats.current = target;
            s.stats.max = s.stats.max.max(target);
        }
    }

    /// A call whose permit belongs to window `epoch` was refused (429) or timed out: the
    /// limit is cut by `backoff`, down to `min`, unless the window has been answered already.
    pub(crate) fn on_drop(&self, epoch: u64) {
        let mut s = self.lock();
        if epoch < s.epoch {
            return;
        }
        s.epoch += 1;
        s.stats.decreases += 1;
        s.limit = (s.limit * self.config.backoff).max(self.config.min as f64);
        let target = s.limit.floor() as usize;
        if target < s.granted {
            let cut = s.granted - target;
            let removed = self.permits.forget_permits(cut);
            s.owed += cut - removed;
            s.granted = target;
            s.stats.current = target;
            s.stats.min = s.stats.min.min(target);
        }
    }

    /// Gives `permit` back, or forgets it if permits are owed.
    pub(crate) fn release(&self, permit: SemaphorePermit<'_>) {
        let mut s = self.lock();
        if s.owed > 0 {
            s.owed -= 1;
            permit.forget();
        }
    }

    /// The limit's statistics.
    pub(crate) fn stats(&self) -> LimitStats {
        self.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aimd() -> AdaptiveLimit {
        AdaptiveLimit::new(Aimd {
            initial: 4,
            min: 1,
            max: 8,
            backoff: 0.5,
        })
    }

    #[test]
    fn a_window_of_successes_adds_one_permit() {
        let a = aimd();
        // 4 -> 4.25 -> 4.49 -> 4.71 -> 4.92 -> 5.12: the fifth success makes it 5.
        for _ in 0..4 {
            a.on_success();
        }
        assert_eq!(a.semaphore().available_permits(), 4);
        a.on_success();
        assert_eq!(a.semaphore().available_permits(), 5);
        assert_eq!(a.stats().max, 5);
    }

    #[test]
    fn a_burst_of_drops_cuts_once_and_permits_in_use_are_owed() {
        let a = aimd();
        let held: Vec<_> = (0..4)
            .map(|_| a.semaphore().try_acquire().expect("a permit"))
            .collect();
        let epoch = a.epoch();
        // Four calls of one window all see a 429: the limit halves once, to 2.
        for _ in 0..4 {
            a.on_drop(epoch);
        }
        assert_eq!((a.stats().current, a.stats().decreases), (2, 1));
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
        a.on_drop(a.epoch());
        a.on_drop(a.epoch());
        assert_eq!(a.stats().current, 1);
        assert_eq!(a.stats().min, 1);
        assert_eq!(a.semaphore().available_permits(), 1);
    }
}
