//! Additive increase, multiplicative decrease, as TCP does it: every call that succeeds adds
//! `1 / limit` (one permit a window of `limit` successes); a drop multiplies the limit by
//! `backoff`.

use super::Bounds;

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
        self.bounds().is_valid(self.backoff)
    }

    pub(super) fn bounds(&self) -> Bounds {
        Bounds {
            initial: self.initial,
            min: self.min,
            max: self.max,
        }
    }

    /// The limit after a success.
    pub(super) fn grow(&self, limit: f64) -> f64 {
        limit + 1.0 / limit
    }
}
