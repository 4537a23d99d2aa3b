//! What the clients did, as the server saw it, beside what the model decided: requests in
//! flight (now, at the most, and on average), retries the official SDKs announce with their
//! `x-stainless-retry-count` header, and orphans (charged requests whose client hung up before
//! the answer). Kept as counters and one running sum: no request log.
//!
//! [`TrafficReport`] adds what `capsize exec` writes: the per-second series and the busiest
//! 60 s ([`super::series`]), and the wait before each retry. A retry is linked to its previous
//! attempt by the `Idempotency-Key` header, which a client sends unchanged on every attempt of
//! one request (the official SDKs do when it is set: `extra_headers`); the wait is from the
//! previous attempt's end (answered, or abandoned by its client) to the retry's arrival. A
//! retry that arrives while the previous attempt is still in flight (its client gave up on it
//! before the server noticed) has no wait to measure and records none. Keys are kept as 64-bit
//! hashes; at most [`MAX_LINKED`] are remembered, the least recently used forgotten first.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;
use hyper::HeaderMap;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::series::{Decided, Series, Tally};
use crate::price::Bill;

/// The header the official SDKs send with each attempt: 0 on the first, n on the n-th retry.
pub const RETRY_COUNT_HEADER: &str = "x-stainless-retry-count";
/// The header that links the attempts of one request: the same value on each.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// The most idempotency keys remembered for linking retries.
pub const MAX_LINKED: usize = 65_536;
/// The longest idempotency key kept (longer ones are not linked).
const MAX_KEY_BYTES: usize = 256;
/// The longest wait a retry-wait histogram holds, in microseconds (a year).
const MAX_WAIT_US: u64 = 365 * 86_400 * 1_000_000;

/// What the clients did so far (real time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Model requests in flight now (received, not yet answered or abandoned).
    pub in_flight: u64,
    /// The most in flight at once.
    pub in_flight_peak: u64,
    /// The mean in flight since the server started (request-seconds over seconds).
    pub in_flight_mean: f64,
    /// Requests that said they were a retry (`x-stainless-retry-count` of 1 or more).
    pub retried: u64,
    /// Charged requests whose client closed the connection before the answer (a request the
    /// model never answers is a timeout, counted by the model, not an orphan).
    pub orphaned: u64,
    /// What the orphans were billed (a priced provider's; written only when something was).
    #[serde(default, skip_serializing_if = "Bill::is_empty")]
    pub orphaned_billed: Bill,
}

/// Everything [`Traffic`] holds, and the series, busiest minute and retry waits. As data
/// (`GET /report`), the retry waits are their recorded values, `[[µs, count], ...]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrafficReport {
    /// The counters.
    pub traffic: Traffic,
    /// Model requests over time.
    pub series: Series,
    /// The most requests charged in any 60 whole seconds.
    pub peak_requests_per_60s: u64,
    /// The most tokens charged in any 60 whole seconds.
    pub peak_tokens_per_60s: u64,
    /// The wait before each retry linked to its previous attempt, in microseconds.
    #[serde(with = "recorded")]
    pub retry_waits: Histogram<u64>,
}

/// A retry-wait histogram as its recorded values, `[[value, count], ...]` lowest first: read
/// back into a histogram of the same bounds, it is the same histogram.
mod recorded {
    use hdrhistogram::Histogram;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value())),
        )
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let pairs: Vec<(u64, u64)> = Vec::deserialize(d)?;
        let mut h = super::waits();
        for (value, count) in pairs {
            h.record_n(value, count)
                .map_err(|e| D::Error::custom(format!("retry wait {value} µs: {e:?}")))?;
        }
        Ok(h)
    }
}

/// An empty retry-wait histogram: 1 µs to a year, 3 significant digits.
fn waits() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_WAIT_US, 3).expect("valid histogram bounds")
}

#[derive(Debug)]
struct State {
    in_flight: u64,
    peak: u64,
    /// Request-seconds in flight up to `since`.
    area: f64,
    since: Duration,
    retried: u64,
    orphaned: u64,
    orphaned_billed: Bill,
    tally: Tally,
    /// The last attempt under each idempotency key (by its hash).
    links: HashMap<u64, Link>,
    /// Each attempt's (key, arrival), oldest first: a key is forgotten when its last attempt
    /// leaves this queue.
    order: VecDeque<(u64, Duration)>,
    waits: Histogram<u64>,
}

impl Default for State {
    fn default() -> Self {
        State {
            in_flight: 0,
            peak: 0,
            area: 0.0,
            since: Duration::ZERO,
            retried: 0,
            orphaned: 0,
            orphaned_billed: Bill::default(),
            tally: Tally::default(),
            links: HashMap::new(),
            order: VecDeque::new(),
            waits: waits(),
        }
    }
}

impl State {
    /// Brings the running sums to `now` (time since the server started).
    fn advance(&mut self, now: Duration) {
        if now > self.since {
            self.area += self.in_flight as f64 * (now - self.since).as_secs_f64();
            self.tally.held(self.since, now, self.in_flight);
            self.since = now;
        }
    }

    /// An attempt under `key` arrives at `now`: the wait since the previous one ended, if it
    /// has ended.
    fn arrived(&mut self, key: u64, now: Duration) -> Option<Duration> {
        let previous = self.links.insert(
            key,
            Link {
                arrived: now,
                ended: None,
            },
        );
        self.order.push_back((key, now));
        if self.order.len() > MAX_LINKED {
            if let Some((old, at)) = self.order.pop_front() {
                // Only if that attempt is still the key's last: a reused key stays.
                if self.links.get(&old).is_some_and(|l| l.arrived == at) {
                    self.links.remove(&old);
                }
            }
        }
        previous
            .and_then(|l| l.ended)
            .map(|end| now.saturating_sub(end))
    }

    /// The attempt under `key` that arrived at `arrived` ended at `now` (ignored if a later
    /// attempt under the key has arrived since).
    fn ended(&mut self, key: u64, arrived: Duration, now: Duration) {
        if let Some(link) = self.links.get_mut(&key) {
            if link.arrived == arrived {
                link.ended = Some(now);
            }
        }
    }
}

/// The last attempt under one idempotency key: when it arrived, and when it ended.
#[derive(Debug, Clone, Copy)]
struct Link {
    arrived: Duration,
    ended: Option<Duration>,
}

/// The 64-bit hash a key is remembered by (SipHash with fixed keys: the same in every run).
fn key_hash(key: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// The server's tally of [`Traffic`], on the server's real-time clock.
#[derive(Debug)]
pub(crate) struct TrafficLog {
    start: Instant,
    state: Mutex<State>,
}

impl TrafficLog {
    /// A tally that starts at `start`.
    pub(crate) fn new(start: Instant) -> Self {
        TrafficLog {
            start,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A model request with `headers` arrives: in flight until the [`Visit`] is dropped.
    pub(crate) fn enter(self: &Arc<Self>, headers: &HeaderMap) -> Visit {
        let retry = headers
            .get(RETRY_COUNT_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0);
        let key = headers
            .get(IDEMPOTENCY_HEADER)
            .filter(|v| !v.is_empty() && v.len() <= MAX_KEY_BYTES)
            .map(|v| key_hash(v.as_bytes()));
        let now = self.start.elapsed();
        let mut s = self.state();
        s.advance(now);
        s.in_flight += 1;
        s.peak = s.peak.max(s.in_flight);
        s.retried += u64::from(retry);
        let in_flight = s.in_flight;
        s.tally.entered(now, in_flight);
        let wait = key.and_then(|k| s.arrived(k, now));
        if let Some(wait) = wait.filter(|_| retry) {
            let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
            s.waits.saturating_record(us);
        }
        Visit {
            log: Arc::clone(self),
            key: key.map(|k| (k, now)),
            charged: false,
            billed: None,
            answered: false,
            pending: None,
        }
    }

    /// The model decided a request in flight.
    pub(crate) fn decided(&self, d: Decided) {
        let now = self.start.elapsed();
        let mut s = self.state();
        s.advance(now);
        let in_flight = s.in_flight;
        s.tally.decided(now, in_flight, d);
    }

    /// The counters, series, busiest minute and retry waits now.
    pub(crate) fn report(&self) -> TrafficReport {
        let traffic = self.now();
        let now = self.start.elapsed();
        let s = self.state();
        let (requests, tokens) = s.tally.busiest();
        TrafficReport {
            traffic,
            series: s.tally.series(now),
            peak_requests_per_60s: requests,
            peak_tokens_per_60s: tokens,
            retry_waits: s.waits.clone(),
        }
    }

    /// The tally now.
    pub(crate) fn now(&self) -> Traffic {
        let now = self.start.elapsed();
        let mut s = self.state();
        s.advance(now);
        let secs = now.as_secs_f64();
        Traffic {
            in_flight: s.in_flight,
            in_flight_peak: s.peak,
            in_flight_mean: if secs > 0.0 { s.area / secs } else { 0.0 },
            retried: s.retried,
            orphaned: s.orphaned,
            orphaned_billed: s.orphaned_billed,
        }
    }
}

/// A request in flight. Dropped answered, it leaves; dropped unanswered (the connection closed
/// while the answer was held), it leaves as an orphan if the model charged it. It holds the
/// tally it entered: a request in flight across a `POST /reset` leaves the old one.
pub(crate) struct Visit {
    log: Arc<TrafficLog>,
    /// Its idempotency key's hash and its arrival, if it sent a key.
    key: Option<(u64, Duration)>,
    /// The model charged it and will answer it.
    pub(crate) charged: bool,
    /// What the model billed it, if anything (boxed: most providers bill nothing).
    pub(crate) billed: Option<Box<Bill>>,
    /// Its answer was handed to the connection.
    pub(crate) answered: bool,
    /// Its record, when a request log is kept: handed over as it leaves.
    pub(crate) pending: Option<Box<super::requests::Pending>>,
}

impl Drop for Visit {
    fn drop(&mut self) {
        let now = self.log.start.elapsed();
        let mut s = self.log.state();
        s.advance(now);
        s.in_flight = s.in_flight.saturating_sub(1);
        s.orphaned += u64::from(self.charged && !self.answered);
        if let Some(b) = self.billed.as_deref().filter(|_| !self.answered) {
            s.orphaned_billed = s.orphaned_billed.plus(*b);
        }
        if let Some((key, arrived)) = self.key.take() {
            s.ended(key, arrived, now);
        }
        drop(s);
        if let Some(p) = self.pending.take() {
            p.finish(self.answered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_retry_waits_from_the_end_of_the_last_attempt_under_its_key() {
        let mut st = State::default();
        let k = key_hash(b"stainless-python-retry-1");
        assert_eq!(st.arrived(k, s(0)), None);
        // The client gave up on the first attempt and retried before the server saw it go:
        // nothing to measure, and the first attempt's late end does not count for the retry.
        assert_eq!(st.arrived(k, s(5)), None);
        st.ended(k, s(0), s(6));
        st.ended(k, s(5), s(7));
        assert_eq!(st.arrived(k, s(10)), Some(s(3)));
        // Another key is its own.
        assert_eq!(st.arrived(key_hash(b"other"), s(11)), None);
    }

    #[test]
    fn a_key_in_use_is_kept_and_the_least_recently_used_forgotten() {
        let mut st = State::default();
        let (a, b) = (key_hash(b"a"), key_hash(b"b"));
        st.arrived(a, s(0));
        st.ended(a, s(0), s(1));
        st.arrived(b, s(1));
        st.ended(b, s(1), s(2));
        // `a` is used again, so it outlives `b` when MAX_LINKED other attempts follow.
        st.arrived(a, s(3));
        st.ended(a, s(3), s(4));
        for n in 0..(MAX_LINKED as u64 - 1) {
            st.arrived(key_hash(&n.to_le_bytes()), s(5));
        }
        assert!(st.links.contains_key(&a));
        assert!(!st.links.contains_key(&b));
        assert!(st.links.len() <= MAX_LINKED);
    }
}
