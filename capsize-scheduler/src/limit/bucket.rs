//! One token bucket as a clockless state machine: every method is told the time.
//!
//! Implementation details. A caller's cost is debited the moment it asks, even into a negative
//! balance, and it may go once the refill has paid back its own share of the debt. The bucket
//! keeps three running totals: tokens ever credited (`credited`), tokens ever debited
//! (`debited`, pending reservations included) and tokens of the reservations that are *due*
//! (`admitted`: gone, or paid for in every bucket of the limiter and about to go). A pending
//! reservation remembers `debited` just after its own debit (its *position*): positions grow in
//! arrival order, so reservations are served first-in, first-out whatever their sizes, and a
//! large request is never overtaken by small ones that came after it. A reservation made at the
//! [`Place::Front`] takes the place of the first waiting one at the back and pushes every
//! waiting one at the back later by its cost: it goes before them, after those at the front
//! that came before it. Pending reservations are kept in that order ([`Ticket`]'s). A call
//! larger than the capacity that was saving up at the head of the line loses its savings past
//! the capacity when one jumps ahead of it (the cap is the new head's), so what goes in any
//! window stays within the promise; it saves again once the front is served.
//!
//! Why the promise holds (no window of `w` seconds admits more than `rate × w + burst`): credit
//! is capped at `admitted + max(capacity, cost of the first reservation not yet due)`. The cap
//! counts what is due, not what is pending, so a reservation held up elsewhere (in the
//! limiter's other bucket) banks no credit here for those queued behind it; it makes room for
//! the first waiting reservation's whole cost, so a call larger than the capacity still goes
//! once the bucket has saved up for it (the burst is then that call's size). The limiter marks
//! a reservation due at the instant every bucket has paid for it (not when its task next runs),
//! so a timer that wakes it late costs no credit. Every reservation is due with `admitted ≤
//! credited`, so over any window the tokens due are at most the credit earned in it (`rate × w`)
//! plus what was banked at its start (the cap).
//!
//! A reservation that gives up is refunded: its cost leaves `debited` (and `admitted`, if it
//! was due) and the positions of everyone behind it move forward by the same amount, so nobody
//! keeps waiting for tokens nobody will use.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::clock::Moment;

/// Tolerance, in tokens, below which a remaining debt counts as paid (absorbs float rounding).
const EPSILON_TOKENS: f64 = 1e-6;

/// Ready times are kept to the nanosecond; a debt the bucket refills within one is paid.
const NANO: f64 = 1e-9;

/// Where a reservation joins the line of those waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Place {
    /// Behind everyone: first-in, first-out.
    #[default]
    Back,
    /// Ahead of every reservation waiting at the back, behind those waiting at the front that
    /// came before it (a retry that jumps the queue).
    Front,
}

/// A pending reservation's name: its place and its sequence number. Ordered as the line is
/// served: the front before the back, each in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Ticket {
    /// `false` for the front, so the front sorts first.
    back: bool,
    seq: u64,
}

impl Ticket {
    /// Reservation number `seq`, joining at `place`.
    pub(crate) fn new(place: Place, seq: u64) -> Self {
        Ticket {
            back: place == Place::Back,
            seq,
        }
    }
}

/// A reservation still pending: where it stands, what it costs here, and whether it is due.
#[derive(Debug, Clone, Copy)]
struct Pending {
    position: f64,
    cost: f64,
    due: bool,
}

/// A token bucket: `rate` tokens a second up to `capacity`, starting full.
#[derive(Debug, Clone)]
pub(crate) struct Bucket<I> {
    rate: f64,
    capacity: f64,
    /// Tokens ever credited up to `last` (excess over the cap is discarded).
    credited: f64,
    /// Tokens ever debited, pending reservations included, refunds removed.
    debited: f64,
    /// Tokens of the reservations that are due (gone, or paid for everywhere).
    admitted: f64,
    /// Time up to which `credited` is brought. During a pause it lies in the future.
    last: I,
    /// The reservations still pending, in the order they are served.
    pending: BTreeMap<Ticket, Pending>,
}

impl<I: Moment> Bucket<I> {
    /// A full bucket at time `now`.
    pub(crate) fn new(rate_per_s: f64, capacity: f64, now: I) -> Self {
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

    /// Credit minus debit at the time the bucket was last brought to (see [`Bucket::refill`]);
    /// negative while reservations are outstanding.
    pub(crate) fn balance(&self) -> f64 {
        self.credited - self.debited
    }

    /// The balance at `now` as [`Bucket::refill`] then [`Bucket::balance`] would read it,
    /// with nothing changed: a read must not split the bucket's refills (and their rounding)
    /// differently from a run that does not read it. Reservations that fall due by `now` are
    /// not marked, which can only lower the cap of a full bucket.
    pub(crate) fn balance_at(&self, now: I) -> f64 {
        let mut credited = self.credited;
        if now > self.last {
            credited += (now - self.last).as_secs_f64() * self.rate;
        }
        credited.min(self.ceiling()) - self.debited
    }

    /// The first pending reservation that is not due yet.
    pub(crate) fn first_waiting(&self) -> Option<Ticket> {
        self.pending
            .iter()
            .find(|(_, p)| !p.due)
            .map(|(&ticket, _)| ticket)
    }

    /// The most credit the bucket may hold: what is due, plus the capacity or the first
    /// waiting reservation's whole cost, whichever is larger.
    fn ceiling(&self) -> f64 {
        let head = self
            .pending
            .values()
            .find(|p| !p.due)
            .map_or(0.0, |p| p.cost);
        self.admitted + self.capacity.max(head)
    }

    /// Brings the credit to `now` (no-op for a time before `last`). The limiter marks due what
    /// is due before it brings a bucket past that instant, so the cap is the one in force.
    pub(crate) fn refill(&mut self, now: I) {
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

    /// `last` plus the time the bucket takes to refill `debt` (at least a nanosecond, so a
    /// sleep until it always moves the clock: a zero-length wait would spin forever).
    fn refilled(&self, debt: f64) -> I {
        let nanos = (debt / self.rate / NANO)
            .round()
            .clamp(1.0, u64::MAX as f64);
        self.last + Duration::from_nanos(nanos as u64)
    }

    /// Debits `cost` at `now` for a reservation joining at `place`, and says whether the debit
    /// must wait (the bucket has not refilled it yet, or is paused). The caller then either
    /// [`Bucket::admit_now`]s it (no bucket of the limiter needs a wait) or
    /// [`Bucket::enqueue`]s it under its ticket.
    pub(crate) fn debit(&mut self, cost: f64, place: Place, now: I) -> Debit {
        let position = match place {
            Place::Back => self.debited + cost,
            Place::Front => {
                // It goes before the first call waiting at the back, so that call's savings
                // past the capacity (for a call larger than it) are not this one's to spend:
                // the ceiling is now the first front reservation's (this one if it is alone).
                let head = self
                    .pending
                    .iter()
                    .find(|(t, p)| !t.back && !p.due)
                    .map_or(cost, |(_, p)| p.cost);
                self.credited = self.credited.min(self.admitted + self.capacity.max(head));
                // Where the first one waiting at the back starts; each of them moves back.
                let mut start = self.debited;
                for (_, p) in self.waiting_at_back() {
                    start = start.min(p.position - p.cost);
                    p.position += cost;
                }
                start + cost
            }
        };
        self.debited += cost;
        Debit {
            position,
            cost,
            waits: position - self.credited > self.tolerance() || now < self.last,
        }
    }

    /// The reservations waiting (not due) at the back, in order.
    fn waiting_at_back(&mut self) -> impl Iterator<Item = (&Ticket, &mut Pending)> {
        self.pending.iter_mut().filter(|(t, p)| t.back && !p.due)
    }

    /// A debit that goes at once: it is spent.
    pub(crate) fn admit_now(&mut self, debit: Debit) {
        self.admitted += debit.cost;
    }

    /// A debit that waits (here or in another bucket of the limiter) under `ticket`.
    pub(crate) fn enqueue(&mut self, ticket: Ticket, debit: Debit) {
        let pending = Pending {
            position: debit.position,
            cost: debit.cost,
            due: false,
        };
        self.pending.insert(ticket, pending);
    }

    /// The earliest time this bucket has paid for pending reservation `ticket`, as far as it
    /// can tell now: exact for the first waiting reservation, a lower bound for those behind it
    /// (credit it cannot bank yet is not counted, nor reservations that may join ahead of it).
    /// `last` if it is paid for already.
    pub(crate) fn paid_at(&self, ticket: Ticket) -> Option<I> {
        let p = self.pending.get(&ticket)?;
        let debt = p.position - self.credited;
        Some(if debt <= self.tolerance() {
            self.last
        } else {
            self.refilled(debt)
        })
    }

    /// Whether pending reservation `ticket` is due.
    pub(crate) fn is_due(&self, ticket: Ticket) -> bool {
        self.pending.get(&ticket).is_some_and(|p| p.due)
    }

    /// The instant the bucket's pause ends, if it is paused at `now`.
    pub(crate) fn paused_until(&self, now: I) -> Option<I> {
        (self.last > now).then_some(self.last)
    }

    /// Marks pending reservation `ticket` due: paid for in every bucket, its cost now counts
    /// as gone.
    pub(crate) fn mark_due(&mut self, ticket: Ticket) {
        if let Some(p) = self.pending.get_mut(&ticket) {
            if !p.due {
                p.due = true;
                self.admitted += p.cost;
            }
        }
    }

    /// Reservation `ticket` goes: it is spent and can no longer be refunded.
    pub(crate) fn admit(&mut self, ticket: Ticket) {
        self.mark_due(ticket);
        self.pending.remove(&ticket);
    }

    /// Gives the cost back for pending reservation `ticket`, which will not be sent; moves
    /// everyone behind it forward. Returns true if some reservation may now go earlier.
    pub(crate) fn refund(&mut self, ticket: Ticket, now: I) -> bool {
        let Some(gone) = self.pending.remove(&ticket) else {
            return false;
        };
        self.debited -= gone.cost;
        if gone.due {
            self.admitted -= gone.cost;
        }
        let mut moved = false;
        for p in self.pending.values_mut() {
            // Those behind it (a free reservation right behind shares its position).
            if p.position >= gone.position {
                p.position -= gone.cost;
                moved = true;
            }
        }
        // Credit banked for the reservation that left, beyond the new ceiling, is discarded.
        self.refill(now);
        moved
    }

    /// Pushes the bucket forward: no credit accrues before `until`, and whatever balance was
    /// left is forfeited (the provider has just said the real allowance is spent).
    pub(crate) fn pause(&mut self, until: I) {
        self.credited = self.credited.min(self.debited);
        if until > self.last {
            self.last = until;
        }
    }

    /// The instant the balance is (or was) zero on the line it follows from `last` (ahead
    /// while reservations are owed, behind once credit has built up); `None` if no instant
    /// names it.
    #[cfg(feature = "redis")]
    pub(crate) fn horizon(&self) -> Option<I> {
        let secs = (self.debited - self.credited) / self.rate;
        let d = Duration::try_from_secs_f64(secs.abs()).ok()?;
        if secs >= 0.0 {
            self.last.checked_add(d)
        } else {
            self.last.checked_sub(d)
        }
    }

    /// Lowers the balance to that of a bucket that was empty at `horizon`, if that is less
    /// (reservations pending here are part of the debt: they are paid by then).
    #[cfg(feature = "redis")]
    pub(crate) fn empty_at(&mut self, horizon: I) {
        let behind = if self.last >= horizon {
            (self.last - horizon).as_secs_f64()
        } else {
            -(horizon - self.last).as_secs_f64()
        };
        self.credited = self.credited.min(self.debited + behind * self.rate);
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
