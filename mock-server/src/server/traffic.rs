//! What the clients did, as the server saw it, beside what the model decided: requests in
//! flight (now, at the most, and on average), retries the official SDKs announce with their
//! `x-stainless-retry-count` header, and orphans (charged requests whose client hung up before
//! the answer). Kept as counters and one running sum: no request log.
//!
//! [`TrafficReport`] adds what `capsize exec` writes: the per-second series and the busiest
//! 60 s ([`super::series`]), and the wait before each retry. A retry is linked to its previous
//! attempt by the `Idempotency-Key` header, which a client sends unchanged on every attempt of
//! one request (the official SDKs do when it is set: `extra_headers`); the wait is from the
//! previous attempt's end (answered, or abandoned by its client) to the retry's arrival. At most
//! [`MAX_LINKED`] keys are remembered, the oldest forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;
use hyper::HeaderMap;
use serde::Serialize;
use tokio::time::Instant;

use super::series::{Decided, Series, Tally};

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
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
}

/// Everything [`Traffic`] holds, and the series, busiest minute and retry waits.
#[derive(Debug, Clone, PartialEq)]
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
    pub retry_waits: Histogram<u64>,
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
    tally: Tally,
    /// When the last attempt under each idempotency key ended, and the keys oldest first.
    ended: HashMap<String, Duration>,
    order: VecDeque<String>,
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
            tally: Tally::default(),
            ended: HashMap::new(),
            order: VecDeque::new(),
            waits: Histogram::new_with_bounds(1, MAX_WAIT_US, 3)
                .expect("static histogram bounds are valid"),
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

    /// The attempt under `key` ended at `now`.
    fn ended(&mut self, key: String, now: Duration) {
        if self.ended.insert(key.clone(), now).is_none() {
            self.order.push_back(key);
            if self.order.len() > MAX_LINKED {
                if let Some(old) = self.order.pop_front() {
                    self.ended.remove(&old);
                }
            }
        }
    }
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
    pub(crate) fn enter(&self, headers: &HeaderMap) -> Visit<'_> {
        let retry = headers
            .get(RETRY_COUNT_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0);
        let key = headers
            .get(IDEMPOTENCY_HEADER)
            .filter(|v| !v.is_empty() && v.len() <= MAX_KEY_BYTES)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let now = self.start.elapsed();
        let mut s = self.state();
        s.advance(now);
        s.in_flight += 1;
        s.peak = s.peak.max(s.in_flight);
        s.retried += u64::from(retry);
        let in_flight = s.in_flight;
        s.tally.entered(now, in_flight);
        if retry {
            let before = key.as_ref().and_then(|k| s.ended.get(k).copied());
            if let Some(before) = before {
                let us = u64::try_from(now.saturating_sub(before).as_micros()).unwrap_or(u64::MAX);
                s.waits.saturating_record(us);
            }
        }
        Visit {
            log: self,
            key,
            charged: false,
            answered: false,
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
        }
    }
}

/// A request in flight. Dropped answered, it leaves; dropped unanswered (the connection closed
/// while the answer was held), it leaves as an orphan if the model charged it.
pub(crate) struct Visit<'a> {
    log: &'a TrafficLog,
    /// Its idempotency key, if it sent one.
    key: Option<String>,
    /// The model charged it and will answer it.
    pub(crate) charged: bool,
    /// Its answer was handed to the connection.
    pub(crate) answered: bool,
}

impl Drop for Visit<'_> {
    fn drop(&mut self) {
        let now = self.log.start.elapsed();
        let mut s = self.log.state();
        s.advance(now);
        s.in_flight -= 1;
        s.orphaned += u64::from(self.charged && !self.answered);
        if let Some(key) = self.key.take() {
            s.ended(key, now);
        }
    }
}
