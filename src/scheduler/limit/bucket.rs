//! One token bucket as a clockless state machine: every method is told the time.
//!
//! Implementation details. A caller's cost is debited the moment it asks, even into a negative
//! balance, and it may go once the refill has paid back its own share of the debt. The bucket
//! keeps three running totals: tokens ever credited (`credited`), tokens ever debited
//! (`debited`, pending reservations included) and tokens debited by reservations that have gone
//! (`admitted`). A pending reservation remembers `debited` just after its own debit (its
//! *position*) and is ready when `credited` reaches it. Positions grow in arrival order, so
//! reservations are served first-in, first-out whatever their sizes: a large request is never
//! overtaken by small ones that came after it.
//!
//! Why the promise holds (no window of `w` seconds admits more than `rate × w + burst`): credit
//! is capped at `admitted + max(capacity, cost of the first pending reservation)`. The cap counts
//! what has *gone*, not what is pending, so a reservation held up elsewhere (in the limiter's
//! other bucket, or by a Retry-After pause) does not bank credit for those queued behind it; and
//! it makes room for the first pending reservation's whole cost, so a call larger than the
//! capacity still goes once the bucket has saved up for it (the burst is then that call's size).
//! Every reservation goes with `admitted ≤ credited`, so over any window the tokens admitted are
//! at most the credit earned in it (`rate × w`) plus what was banked at its start (the cap).
//!
//! A reservation that gives up is refunded: its cost leaves `debited` and the positions of
//! everyone behind it move forward by the same amount, so nobody keeps waiting for tokens nobody
//! will use.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

/// Tolerance, in tokens, below which a remaining debt counts as paid (absorbs float rounding).
const EPSILON_TOKENS: f64 = 1e-6;

/// Ready times are kept to the nanosecond; a debt the bucket refills within one is paid.
const NANO: f64 = 1e-9;

/// A reservation still pending: where it stands and what it costs here.
#[derive(Debug, Clone, Copy)]
struct Pending {
    position: f64,
    cost: f64,
}

/// A token bucket: `rate` tokens a second up to `capacity`, starting full.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    rate: f64,
    capacity: f64,
    /// Tokens ever credited up to `last` (excess over the cap is discarded).
    credited: f64,
    /// Tokens ever debited, pending reservations included, refunds removed.
    debited: f64,
    /// Tokens debited by reservations that have gone.
    admitted: f64,
    /// Time up to which `credited` is brought. During a pause it lies in the future.
    last: Instant,
    /// The reservations still pending, by sequence number.
    pending: BTreeMap<u64, Pending>,
}

impl Bucket {
    /// A full bucket at time `now`.
    pub(crate) fn new(rate_per_s: f64, capacity: f64, now: Instant) -> Self {
        Bucket {
            rate: rate_per_s,
            capacity,
            credited: capacity,
            debited: 0.0,
            admitted: 0.0,
            last: now,
            pending: BTreeMap::new(),
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

    /// The most credit the bucket may hold: what has gone, plus the capacity or the first
    /// pending reservation's whole cost, whichever is larger.
    fn ceiling(&self) -> f64 {
        let head = self.pending.values().next().map_or(0.0, |p| p.cost);
        self.admitted + self.capacity.max(head)
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            self.credited += (now - self.last).as_secs_f64() * self.rate;
            self.last = now;
        }
        self.credited = self.credited.min(self.ceiling());
        if self.pending.is_empty() && self.debited > 1e9 {
            // Rebase the running totals so they never grow large enough to lose precision.
            self.credited -= self.debited;
            self.admitted -= self.debited;
            self.debited = 0.0;
        }
    }

    /// A debt this small counts as paid: what the bucket refills in a nanosecond, or float noise.
    fn tolerance(&self) -> f64 {
        (self.rate * NANO).max(EPSILON_TOKENS)
    }

    /// Debits `cost` at `now` and says whether the debit must wait (the bucket has not refilled
    /// it yet, or is paused). The caller then either [`Bucket::admit_now`]s it (no bucket of the
    /// limiter needs a wait) or [`Bucket::enqueue`]s it under its sequence number.
    pub(crate) fn debit(&mut self, cost: f64, now: Instant) -> Debit {
        self.refill(now);
        self.debited += cost;
        let position = self.debited;
        Debit {
            position,
            cost,
            waits: position - self.credited > self.tolerance() || now < self.last,
        }
    }

    /// A debit that goes at once: it is spent.
    pub(crate) fn admit_now(&mut self, debit: Debit) {
        self.admitted += debit.cost;
    }

    /// A debit that waits (here or in another bucket of the limiter) under number `seq`.
    pub(crate) fn enqueue(&mut self, seq: u64, debit: Debit) {
        self.pending.insert(
            seq,
            Pending {
                position: debit.position,
                cost: debit.cost,
            },
        );
    }

    /// When reservation `seq` may go, or `None` if it may go now (or is not pending). A time
    /// for a reservation behind others is a lower bound: credit it cannot bank yet is not
    /// counted, so the caller asks again when it comes.
    pub(crate) fn ready_at(&mut self, seq: u64, now: Instant) -> Option<Instant> {
        self.refill(now);
        let position = self.pending.get(&seq)?.position;
        let debt = position - self.credited;
        if debt <= self.tolerance() {
            if now >= self.last {
                return None;
            }
            return Some(self.last); // paid for, but the bucket is paused until then
        }
        // `last` is at or after `now`. A debt always costs at least one nanosecond, so the
        // caller's sleep moves the clock forward (a zero-length wait would spin forever).
        let nanos = (debt / self.rate / NANO).round().clamp(1.0, u64::MAX as f64);
        Some(self.last + Duration::from_nanos(nanos as u64))
    }

    /// Reservation `seq` goes at `now`: it is spent and can no longer be refunded.
    pub(crate) fn admit(&mut self, seq: u64, now: Instant) {
        // Credit up to now is capped by the ceiling before this admission raises it.
        self.refill(now);
        if let Some(p) = self.pending.remove(&seq) {
            self.admitted += p.cost;
        }
    }

    /// Gives `cost` back for pending reservation `seq`, which will not be sent; moves everyone
    /// behind it forward. Returns true if some reservation may now go earlier.
    pub(crate) fn refund(&mut self, seq: u64, now: Instant) -> bool {
        self.refill(now);
        let Some(gone) = self.pending.remove(&seq) else {
            return false;
        };
        self.debited -= gone.cost;
        let mut moved = false;
        for (_, p) in self.pending.range_mut(seq + 1..) {
            p.position -= gone.cost;
            moved = true;
        }
        // Credit banked for the reservation that left beyond the new ceiling is discarded.
        self.refill(now);
        moved
    }

    /// Pushes the bucket forward: no credit accrues before `until`, and whatever balance was
    /// left over what has gone is forfeited (the provider has just said the real allowance is
    /// spent).
    pub(crate) fn pause(&mut self, now: Instant, until: Instant) {
        self.refill(now);
        self.credited = self.credited.min(self.admitted);
        if until > self.last {
            self.last = until;
        }
    }

    /// The number of reservations still pending.
    pub(crate) fn waiters(&self) -> usize {
        self.pending.len()
    }
}

/// A debit just made: where it stands, what it costs, and whether it must wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Debit {
    position: f64,
    cost: f64,
    /// True if the bucket has not refilled it yet (or is paused).
    pub(crate) waits: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debits `cost` for `seq` as a one-bucket limiter would: admitted at once, or pending.
    fn take(b: &mut Bucket, seq: u64, cost: f64, now: Instant) -> bool {
        let d = b.debit(cost, now);
        if d.waits {
            b.enqueue(seq, d);
        } else {
            b.admit_now(d);
        }
        d.waits
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn reservations_wait_for_their_own_share_in_order() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 10.0, t0);
        // Ten tokens of burst, then one more each 100 ms.
        for seq in 0..10 {
            assert!(!take(&mut b, seq, 1.0, t0));
        }
        assert!(take(&mut b, 10, 1.0, t0));
        assert!(take(&mut b, 11, 1.0, t0));
        assert_eq!(b.ready_at(10, t0), Some(t0 + Duration::from_millis(100)));
        assert_eq!(b.ready_at(11, t0), Some(t0 + Duration::from_millis(200)));
        assert_eq!(b.ready_at(10, t0 + Duration::from_millis(100)), None);
        b.admit(10, t0 + Duration::from_millis(100));
        assert_eq!(b.waiters(), 1);
    }

    #[test]
    fn refund_moves_later_waiters_forward_only() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1.0, 1.0, t0);
        take(&mut b, 0, 1.0, t0); // takes the one token
        take(&mut b, 1, 5.0, t0); // ready at 5 s
        take(&mut b, 2, 1.0, t0); // ready at 6 s
        assert!(b.refund(1, t0));
        assert_eq!(b.ready_at(2, t0), Some(t0 + Duration::from_secs(1)));
        assert_eq!(b.balance(t0), -1.0);
    }

    #[test]
    fn pause_forfeits_the_balance_and_credits_nothing_until_it_ends() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1.0, 5.0, t0);
        b.pause(t0, t0 + Duration::from_secs(7));
        assert_eq!(b.balance(t0 + Duration::from_secs(7)), 0.0);
        assert!(take(&mut b, 0, 1.0, t0 + Duration::from_secs(3)));
        assert_eq!(
            b.ready_at(0, t0 + Duration::from_secs(3)),
            Some(t0 + Duration::from_secs(8))
        );
    }

    #[test]
    fn a_reservation_held_elsewhere_banks_no_credit_for_those_behind_it() {
        // 1 token/s, capacity 1. Five reservations queue at t0 (the first could go here, but
        // the limiter's other bucket holds it: it stays pending). After 100 s nothing has gone,
        // so the bucket holds one token, not a hundred: when the first goes, the second must
        // still wait a whole second.
        let t0 = Instant::now();
        let mut b = Bucket::new(1.0, 1.0, t0);
        for seq in 0..5 {
            let d = b.debit(1.0, t0);
            b.enqueue(seq, d);
        }
        let t = t0 + secs(100.0);
        assert_eq!(b.ready_at(0, t), None);
        assert_eq!(b.balance(t), 1.0 - 5.0);
        b.admit(0, t);
        assert_eq!(b.ready_at(1, t), Some(t + secs(1.0)));
        b.admit(1, t + secs(1.0));
        assert_eq!(b.ready_at(2, t + secs(1.0)), Some(t + secs(2.0)));
    }

    #[test]
    fn a_call_larger_than_the_capacity_goes_once_the_bucket_has_saved_up_its_cost() {
        // Capacity 10, 10 tokens/s: a 50-token call waits 4 s for the 40 it lacks, and the call
        // behind it waits for credit after that (nothing was banked for it meanwhile).
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 10.0, t0);
        assert!(take(&mut b, 0, 50.0, t0));
        assert!(take(&mut b, 1, 10.0, t0));
        assert_eq!(b.ready_at(0, t0), Some(t0 + secs(4.0)));
        b.admit(0, t0 + secs(10.0)); // it went late: the 60 s of credit was capped at 50
        assert_eq!(b.ready_at(1, t0 + secs(10.0)), Some(t0 + secs(11.0)));
    }

    #[test]
    fn a_refunded_large_call_leaves_no_banked_credit_behind() {
        // The 50-token call saved 50 tokens, then gave up: the 10-token call behind it goes at
        // once, but the bucket keeps no more than its capacity after that.
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 10.0, t0);
        assert!(take(&mut b, 0, 50.0, t0));
        assert!(take(&mut b, 1, 10.0, t0));
        let t = t0 + secs(4.0);
        assert!(b.refund(0, t));
        assert_eq!(b.ready_at(1, t), None);
        b.admit(1, t);
        assert_eq!(b.balance(t), 0.0);
    }
}
