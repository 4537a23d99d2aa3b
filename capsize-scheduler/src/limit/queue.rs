//! The limiter's queue: one line of reservations across the request and token buckets,
//! first-in first-out at each [`Place`] (the front before the back), as a clockless state
//! machine (every method is told the time).
//!
//! Implementation details. A reservation is debited in every bucket the moment it is made and
//! is *pending* in all of them until it goes, even if only one of them makes it wait, so no
//! bucket banks credit for it or for those behind it while another bucket holds it. It becomes
//! *due* at the instant the last bucket has paid for it; [`Queue::advance`] marks reservations
//! due in order, each at its own instant, before any bucket is brought past that instant. The
//! task holding a due reservation may run later (a timer fires on its tick, a runtime is busy):
//! that costs no credit, because the buckets counted it as gone when it was due.

use super::bucket::{Bucket, Place, Ticket};
use crate::clock::Moment;

/// The request and token buckets and the reservations waiting in them.
#[derive(Debug)]
pub(crate) struct Queue<I> {
    requests: Option<Bucket<I>>,
    tokens: Option<Bucket<I>>,
    next_seq: u64,
}

impl<I: Moment> Queue<I> {
    /// A queue over the given buckets (either may be absent).
    pub(crate) fn new(requests: Option<Bucket<I>>, tokens: Option<Bucket<I>>) -> Self {
        Queue {
            requests,
            tokens,
            next_seq: 0,
        }
    }

    fn buckets(&mut self) -> impl Iterator<Item = &mut Bucket<I>> {
        self.requests.iter_mut().chain(self.tokens.iter_mut())
    }

    /// A bucket to ask about the queue: every bucket holds the same pending reservations.
    fn any(&self) -> Option<&Bucket<I>> {
        self.requests.as_ref().or(self.tokens.as_ref())
    }

    /// The request and token buckets.
    pub(crate) fn parts(&self) -> (Option<&Bucket<I>>, Option<&Bucket<I>>) {
        (self.requests.as_ref(), self.tokens.as_ref())
    }

    /// Marks due, first-in first-out, every reservation that all buckets have paid for by
    /// `now`, each at the instant the last of them paid it, then brings the buckets to `now`.
    /// Every operation starts here, so no bucket is brought past a reservation's due instant
    /// before it is marked due (which would cap credit under the old ceiling).
    fn advance(&mut self, now: I) {
        while let Some(ticket) = self.any().and_then(Bucket::first_waiting) {
            let Some(at) = self.buckets().filter_map(|b| b.paid_at(ticket)).max() else {
                break;
            };
            if at > now {
                break;
            }
            for b in self.buckets() {
                b.refill(at);
                b.mark_due(ticket);
            }
        }
        for b in self.buckets() {
            b.refill(now);
        }
    }

    /// Reserves one request and `tokens` tokens at `now`, joining the line at `place`: its
    /// ticket, and whether it waits (`false`: it has gone already).
    pub(crate) fn reserve(&mut self, tokens: u64, place: Place, now: I) -> (Ticket, bool) {
        self.advance(now);
        let ticket = Ticket::new(place, self.next_seq);
        self.next_seq += 1;
        let requests = self.requests.as_mut().map(|b| b.debit(1.0, place, now));
        let token_debit = self
            .tokens
            .as_mut()
            .map(|b| b.debit(tokens as f64, place, now));
        let waits = requests.iter().chain(&token_debit).any(|d| d.waits);
        let debits = [requests, token_debit];
        for (bucket, debit) in self.buckets().zip(debits.into_iter().flatten()) {
            if waits {
                bucket.enqueue(ticket, debit);
            } else {
                bucket.admit_now(debit);
            }
        }
        (ticket, waits)
    }

    /// When reservation `ticket` may go, or `None` if it may go at `now`. For a reservation
    /// behind others it is a lower bound (credit not yet bankable is not counted, and others may
    /// join ahead of it at the front): ask again then. Always later than `now` when not `None`.
    pub(crate) fn ready_at(&mut self, ticket: Ticket, now: I) -> Option<I> {
        self.advance(now);
        if self.any()?.is_due(ticket) {
            // Paid for, but held while a pause lasts.
            return self.buckets().filter_map(|b| b.paused_until(now)).max();
        }
        self.buckets().filter_map(|b| b.paid_at(ticket)).max()
    }

    /// Reservation `ticket` goes at `now`: it leaves the queue and can no longer be refunded.
    pub(crate) fn admit(&mut self, ticket: Ticket, now: I) {
        self.advance(now);
        for b in self.buckets() {
            b.admit(ticket);
        }
    }

    /// Reservation `ticket` will not be sent: its cost is given back and everyone behind it
    /// moves forward. Returns true if some reservation may now go earlier.
    pub(crate) fn refund(&mut self, ticket: Ticket, now: I) -> bool {
        self.advance(now);
        let mut moved = false;
        for b in self.buckets() {
            moved |= b.refund(ticket, now);
        }
        // Those behind moved forward: some may be paid for already.
        self.advance(now);
        moved
    }

    /// Until when a pause holds everyone, if one does at `now`.
    #[cfg(feature = "redis")]
    pub(crate) fn paused_until(&mut self, now: I) -> Option<I> {
        self.buckets().filter_map(|b| b.paused_until(now)).max()
    }

    /// Lowers each bucket (requests, tokens) to at most the balance of a bucket that was empty
    /// at its instant in `horizons` (none: unchanged), at `now`: a shared limiter's fallback
    /// share starting where the fleet's debt ends.
    #[cfg(feature = "redis")]
    pub(crate) fn empty_at(&mut self, horizons: [Option<I>; 2], now: I) {
        self.advance(now);
        let buckets = [self.requests.as_mut(), self.tokens.as_mut()];
        for (bucket, horizon) in buckets.into_iter().zip(horizons) {
            if let (Some(b), Some(h)) = (bucket, horizon) {
                b.empty_at(h);
            }
        }
    }

    /// Each bucket's horizon at `now` (requests, tokens; see [`Bucket::horizon`]).
    #[cfg(feature = "redis")]
    pub(crate) fn horizons(&mut self, now: I) -> [Option<I>; 2] {
        self.advance(now);
        let (r, t) = self.parts();
        [r.and_then(Bucket::horizon), t.and_then(Bucket::horizon)]
    }

    /// Holds everyone until `until` and forfeits the balances (a provider's Retry-After).
    pub(crate) fn pause(&mut self, now: I, until: I) {
        self.advance(now);
        for b in self.buckets() {
            b.pause(until);
        }
    }

    /// The balances at `now`, read without bringing the buckets there
    /// ([`Bucket::balance_at`]): (requests, tokens).
    pub(crate) fn peek_balances(&self, now: I) -> (Option<f64>, Option<f64>) {
        let (r, t) = self.parts();
        (r.map(|b| b.balance_at(now)), t.map(|b| b.balance_at(now)))
    }

    /// The balances at `now`: (requests, tokens).
    pub(crate) fn balances(&mut self, now: I) -> (Option<f64>, Option<f64>) {
        self.advance(now);
        let (r, t) = self.parts();
        (r.map(Bucket::balance), t.map(Bucket::balance))
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // the tests run on tokio's paused clock
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// A queue with only a token bucket of `rate` tokens/s and `capacity`.
    fn tokens(rate: f64, capacity: f64, t0: Instant) -> Queue<Instant> {
        Queue::new(None, Some(Bucket::new(rate, capacity, t0)))
    }

    #[test]
    fn reservations_wait_for_their_own_share_in_order() {
        let t0 = Instant::now();
        let mut q = tokens(10.0, 10.0, t0);
        // Ten tokens of burst, then one more each 100 ms.
        for _ in 0..10 {
            assert!(!q.reserve(1, Place::Back, t0).1);
        }
        let (a, waits) = q.reserve(1, Place::Back, t0);
        assert!(waits);
        let (b, _) = q.reserve(1, Place::Back, t0);
        assert_eq!(q.ready_at(a, t0), Some(t0 + secs(0.1)));
        assert_eq!(q.ready_at(b, t0), Some(t0 + secs(0.2)));
        assert_eq!(q.ready_at(a, t0 + secs(0.1)), None);
        q.admit(a, t0 + secs(0.1));
        assert_eq!(q.parts().1.map(Bucket::waiters), Some(1));
    }

    #[test]
    fn a_reservation_woken_late_costs_those_behind_it_nothing() {
        // 10 tokens/s, capacity 1: the second is due at 100 ms, the third at 200 ms. Their task
        // runs only at 250 ms: both go then, and the fourth is still due at 300 ms.
        let t0 = Instant::now();
        let mut q = tokens(10.0, 1.0, t0);
        let seqs: Vec<Ticket> = (0..4).map(|_| q.reserve(1, Place::Back, t0).0).collect();
        let late = t0 + secs(0.25);
        assert_eq!(q.ready_at(seqs[1], late), None);
        assert_eq!(q.ready_at(seqs[2], late), None);
        q.admit(seqs[1], late);
        q.admit(seqs[2], late);
        assert_eq!(q.ready_at(seqs[3], late), Some(t0 + secs(0.3)));
    }

    #[test]
    fn a_reservation_held_by_the_other_bucket_banks_no_request_credit_behind_it() {
        // 1 request/s (capacity 1) and 10 tokens/s (capacity 10). A 100-token call waits 9 s
        // for tokens; three 1-token calls queue behind it. When it goes at 9 s the request
        // bucket has one request for it, not nine: the next goes at 10 s, then 11 s, 12 s.
        let t0 = Instant::now();
        let mut q = Queue::new(
            Some(Bucket::new(1.0, 1.0, t0)),
            Some(Bucket::new(10.0, 10.0, t0)),
        );
        let (big, waits) = q.reserve(100, Place::Back, t0);
        assert!(waits);
        let small: Vec<Ticket> = (0..3).map(|_| q.reserve(1, Place::Back, t0).0).collect();
        assert_eq!(q.ready_at(big, t0), Some(t0 + secs(9.0)));
        assert_eq!(q.ready_at(big, t0 + secs(9.0)), None);
        q.admit(big, t0 + secs(9.0));
        for (k, &seq) in small.iter().enumerate() {
            let due = t0 + secs(10.0 + k as f64);
            assert_eq!(
                q.ready_at(seq, t0 + secs(9.0)).map(|t| t <= due),
                Some(true)
            );
            assert_eq!(q.ready_at(seq, due), None);
            q.admit(seq, due);
        }
    }

    #[test]
    fn a_call_larger_than_the_capacity_goes_once_the_bucket_has_saved_up_its_cost() {
        // Capacity 10, 10 tokens/s: a 50-token call waits 4 s for the 40 it lacks; the one
        // behind it gets no credit banked meanwhile and goes 1 s after it.
        let t0 = Instant::now();
        let mut q = tokens(10.0, 10.0, t0);
        let (big, _) = q.reserve(50, Place::Back, t0);
        let (next, _) = q.reserve(10, Place::Back, t0);
        assert_eq!(q.ready_at(big, t0), Some(t0 + secs(4.0)));
        assert_eq!(q.ready_at(next, t0 + secs(4.5)), Some(t0 + secs(5.0)));
    }

    #[test]
    fn a_refunded_large_call_leaves_no_banked_credit_behind() {
        // The 50-token call saved 40 tokens, then gave up: the 10-token call behind it goes at
        // once, and the bucket keeps nothing over its capacity after that.
        let t0 = Instant::now();
        let mut q = tokens(10.0, 10.0, t0);
        let (big, _) = q.reserve(50, Place::Back, t0);
        let (next, _) = q.reserve(10, Place::Back, t0);
        let t = t0 + secs(3.9);
        assert!(q.refund(big, t));
        assert_eq!(q.ready_at(next, t), None);
        q.admit(next, t);
        assert_eq!(q.balances(t).1, Some(0.0));
    }

    #[test]
    fn refund_moves_later_waiters_forward_only() {
        let t0 = Instant::now();
        let mut q = tokens(1.0, 1.0, t0);
        q.reserve(1, Place::Back, t0); // takes the one token
        let (five, _) = q.reserve(5, Place::Back, t0); // due at 5 s
        let (one, _) = q.reserve(1, Place::Back, t0); // due at 6 s
        assert!(q.refund(five, t0));
        assert_eq!(q.ready_at(one, t0), Some(t0 + secs(1.0)));
        assert_eq!(q.balances(t0).1, Some(-1.0));
    }

    #[test]
    fn pause_forfeits_the_balance_and_credits_nothing_until_it_ends() {
        let t0 = Instant::now();
        let mut q = tokens(1.0, 5.0, t0);
        q.pause(t0, t0 + secs(7.0));
        assert_eq!(q.balances(t0 + secs(7.0)).1, Some(0.0));
        let (seq, waits) = q.reserve(1, Place::Back, t0 + secs(3.0));
        assert!(waits);
        assert_eq!(q.ready_at(seq, t0 + secs(3.0)), Some(t0 + secs(8.0)));
    }

    #[test]
    fn a_reservation_at_the_front_goes_before_those_waiting_at_the_back() {
        // 1 token/s, capacity 1, spent. Three wait at the back (due at 1, 2, 3 s); at 0.5 s a
        // retry joins at the front: it takes the token of 1 s, the back ones move to 2, 3, 4 s.
        // A second front reservation at 0.6 s goes behind the first (2 s), the back at 3, 4, 5 s.
        let t0 = Instant::now();
        let mut q = tokens(1.0, 1.0, t0);
        q.reserve(1, Place::Back, t0);
        let back: Vec<Ticket> = (0..3).map(|_| q.reserve(1, Place::Back, t0).0).collect();
        let (first, waits) = q.reserve(1, Place::Front, t0 + secs(0.5));
        assert!(waits);
        assert_eq!(q.ready_at(first, t0 + secs(0.5)), Some(t0 + secs(1.0)));
        let (second, _) = q.reserve(1, Place::Front, t0 + secs(0.6));
        assert_eq!(q.ready_at(second, t0 + secs(0.6)), Some(t0 + secs(2.0)));
        for (k, &b) in back.iter().enumerate() {
            assert_eq!(
                q.ready_at(b, t0 + secs(0.6)),
                Some(t0 + secs(3.0 + k as f64))
            );
        }
        // Served in that order, each at its instant.
        q.admit(first, t0 + secs(1.0));
        q.admit(second, t0 + secs(2.0));
        assert_eq!(q.ready_at(back[0], t0 + secs(3.0)), None);
    }

    #[test]
    fn a_front_reservation_does_not_overtake_one_already_due() {
        // The back one was paid for at 1 s but its task runs at 1.5 s; a front reservation made
        // at 1.2 s waits for the next token (2 s), not the one already spent.
        let t0 = Instant::now();
        let mut q = tokens(1.0, 1.0, t0);
        q.reserve(1, Place::Back, t0);
        let (back, _) = q.reserve(1, Place::Back, t0);
        let (front, _) = q.reserve(1, Place::Front, t0 + secs(1.2));
        assert_eq!(q.ready_at(back, t0 + secs(1.5)), None);
        assert_eq!(q.ready_at(front, t0 + secs(1.5)), Some(t0 + secs(2.0)));
    }

    #[test]
    fn refunding_a_front_reservation_gives_its_place_back_to_those_behind() {
        let t0 = Instant::now();
        let mut q = tokens(1.0, 1.0, t0);
        q.reserve(1, Place::Back, t0);
        let (back, _) = q.reserve(1, Place::Back, t0);
        let (front, _) = q.reserve(1, Place::Front, t0);
        assert_eq!(q.ready_at(back, t0), Some(t0 + secs(2.0)));
        assert!(q.refund(front, t0 + secs(0.5)));
        assert_eq!(q.ready_at(back, t0 + secs(0.5)), Some(t0 + secs(1.0)));
    }

    #[test]
    fn a_front_reservation_cannot_spend_what_a_large_call_saved_past_the_capacity() {
        // Capacity 10, 10 tokens/s. A 50-token call has saved 49 by 3.9 s; four retries of 10
        // jumping ahead of it get the capacity's worth, not its savings: the first goes at
        // once, the rest a second apart, and the large call saves again behind them.
        let t0 = Instant::now();
        let mut q = tokens(10.0, 10.0, t0);
        let (big, _) = q.reserve(50, Place::Back, t0);
        let t = t0 + secs(3.9);
        let fronts: Vec<(Ticket, bool)> = (0..4).map(|_| q.reserve(10, Place::Front, t)).collect();
        assert!(!fronts[0].1, "the first goes on the capacity it finds");
        assert!(
            fronts[1..].iter().all(|f| f.1),
            "the others wait for refills"
        );
        assert_eq!(q.ready_at(fronts[1].0, t), Some(t + secs(1.0)));
        assert_eq!(q.ready_at(fronts[3].0, t), Some(t + secs(3.0)));
        assert_eq!(q.ready_at(big, t), Some(t + secs(8.0)));
    }
}
