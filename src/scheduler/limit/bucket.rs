//! One token bucket as a clockless state machine: every method is told the time.
//!
//! Reservation semantics (the article's): a caller's cost is debited the moment it asks, even into
//! a negative balance, and it may go once the refill has paid back its own share of the debt. The
//! bucket keeps two running totals, tokens ever credited (`credited`) and tokens ever debited
//! (`debited`); the balance is their difference. A waiter remembers `debited` just after its own
//! debit (its *position*) and is ready when `credited` reaches it. Positions grow in arrival order,
//! so waiters are served first-in, first-out whatever their sizes: a large request is never
//! overtaken by small ones that came after it.
//!
//! A waiter that gives up is refunded: its cost leaves `debited` and the positions of everyone
//! behind it move forward by the same amount, so nobody keeps waiting for tokens nobody will use.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

/// Tolerance, in tokens, below which a remaining debt counts as paid (absorbs float rounding).
const EPSILON_TOKENS: f64 = 1e-6;

/// Ready times are kept to the nanosecond; a debt the bucket refills within one is paid.
const NANO: f64 = 1e-9;

/// A token bucket: `rate` tokens a second up to `capacity`, starting full.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    rate: f64,
    capacity: f64,
    /// Tokens ever credited up to `last` (excess over capacity is discarded).
    credited: f64,
    /// Tokens ever debited, refunds removed.
    debited: f64,
    /// Time up to which `credited` is brought. During a pause it lies in the future.
    last: Instant,
    /// Positions of the reservations still waiting, by sequence number.
    waiting: BTreeMap<u64, f64>,
}

impl Bucket {
    /// A full bucket at time `now`.
    pub(crate) fn new(rate_per_s: f64, capacity: f64, now: Instant) -> Self {
        Bucket {
            rate: rate_per_s,
            capacity,
            credited: capacity,
            debited: 0.0,
            last: now,
            waiting: BTreeMap::new(),
        }
    }

    /// Refill rate in tokens per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Capacity (the largest burst) in tokens.
    pub(crate) fn capacity(&self) -> f64 {
        self.capacity
    }

    /// The balance at `now`; negative while reservations are outstanding.
    pub(crate) fn balance(&mut self, now: Instant) -> f64 {
        self.refill(now);
        self.credited - self.debited
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            self.credited += (now - self.last).as_secs_f64() * self.rate;
            self.last = now;
        }
        let excess = self.credited - self.debited - self.capacity;
        if excess > 0.0 {
            self.credited -= excess;
        }
        if self.waiting.is_empty() && self.debited > 1e9 {
            // Rebase the running totals so they never grow large enough to lose precision.
            self.credited -= self.debited;
            self.debited = 0.0;
        }
    }

    /// A debt this small counts as paid: what the bucket refills in a nanosecond, or float noise.
    fn tolerance(&self) -> f64 {
        (self.rate * NANO).max(EPSILON_TOKENS)
    }

    /// Debits `cost` for reservation `seq` and returns its position. A reservation that is
    /// ready at once is not kept in the waiting set (`waits` is false).
    pub(crate) fn debit(&mut self, seq: u64, cost: f64, now: Instant) -> (f64, bool) {
        self.refill(now);
        self.debited += cost;
        let position = self.debited;
        let waits = position - self.credited > self.tolerance() || now < self.last;
        if waits {
            self.waiting.insert(seq, position);
        }
        (position, waits)
    }

    /// When reservation `seq` may go, or `None` if it may go now (or is not waiting here).
    pub(crate) fn ready_at(&mut self, seq: u64, now: Instant) -> Option<Instant> {
        self.refill(now);
        let &position = self.waiting.get(&seq)?;
        let debt = position - self.credited;
        if debt <= self.tolerance() {
            if now >= self.last {
                return None;
            }
            return Some(self.last); // paid for, but the bucket is paused until then
        }
        // `last` is at or after `now`. A debt always costs at least one nanosecond, so the
        // caller's sleep moves the clock forward (a zero-length wait would spin forever).
        let nanos = (debt / self.rate / NANO).round().max(1.0);
        Some(self.last + Duration::from_nanos(nanos as u64))
    }

    /// Marks reservation `seq` as gone: it no longer waits and can no longer be refunded.
    pub(crate) fn admit(&mut self, seq: u64) {
        self.waiting.remove(&seq);
    }

    /// Gives `cost` back for reservation `seq`, which will not be sent (whether it was waiting
    /// here or was paid for here at once and waited in another bucket); moves everyone behind it
    /// forward. The caller refunds a reservation at most once. Returns true if some waiter may
    /// now go earlier.
    pub(crate) fn refund(&mut self, seq: u64, cost: f64) -> bool {
        self.waiting.remove(&seq);
        self.debited -= cost;
        let mut moved = false;
        for (_, position) in self.waiting.range_mut(seq + 1..) {
            *position -= cost;
            moved = true;
        }
        moved
    }

    /// Pushes the bucket forward: no credit accrues before `until`, and whatever balance was
    /// left is forfeited (the provider has just said the real allowance is spent).
    pub(crate) fn pause(&mut self, now: Instant, until: Instant) {
        self.refill(now);
        if self.credited > self.debited {
            self.credited = self.debited;
        }
        if until > self.last {
            self.last = until;
        }
    }

    /// The number of reservations still waiting.
    pub(crate) fn waiters(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_wait_for_their_own_share_in_order() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 10.0, t0);
        // Ten tokens of burst, then one more each 100 ms.
        for seq in 0..10 {
            assert_eq!(b.debit(seq, 1.0, t0), (seq as f64 + 1.0, false));
        }
        let (_, waits) = b.debit(10, 1.0, t0);
        assert!(waits);
        let (_, waits) = b.debit(11, 1.0, t0);
        assert!(waits);
        assert_eq!(b.ready_at(10, t0), Some(t0 + Duration::from_millis(100)));
        assert_eq!(b.ready_at(11, t0), Some(t0 + Duration::from_millis(200)));
        assert_eq!(b.ready_at(10, t0 + Duration::from_millis(100)), None);
        b.admit(10);
        assert_eq!(b.waiters(), 1);
    }

    #[test]
    fn refund_moves_later_waiters_forward_only() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1.0, 1.0, t0);
        b.debit(0, 1.0, t0); // takes the one token
        b.debit(1, 5.0, t0); // ready at 5 s
        b.debit(2, 1.0, t0); // ready at 6 s
        assert!(b.refund(1, 5.0));
        assert_eq!(b.ready_at(2, t0), Some(t0 + Duration::from_secs(1)));
        assert_eq!(b.balance(t0), -1.0);
    }

    #[test]
    fn pause_forfeits_the_balance_and_credits_nothing_until_it_ends() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1.0, 5.0, t0);
        b.pause(t0, t0 + Duration::from_secs(7));
        assert_eq!(b.balance(t0 + Duration::from_secs(7)), 0.0);
        let (_, waits) = b.debit(0, 1.0, t0 + Duration::from_secs(3));
        assert!(waits);
        assert_eq!(
            b.ready_at(0, t0 + Duration::from_secs(3)),
            Some(t0 + Duration::from_secs(8))
        );
    }
}
