//! What the clients did, as the server saw it, beside what the model decided: requests in
//! flight (now, at the most, and on average), retries the official SDKs announce with their
//! `x-stainless-retry-count` header, and orphans (charged requests whose client hung up before
//! the answer). Kept as counters and one running sum: no request log.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hyper::HeaderMap;
use serde::Serialize;
use tokio::time::Instant;

/// The header the official SDKs send with each attempt: 0 on the first, n on the n-th retry.
pub const RETRY_COUNT_HEADER: &str = "x-stainless-retry-count";

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

#[derive(Debug, Default)]
struct State {
    in_flight: u64,
    peak: u64,
    /// Request-seconds in flight up to `since`.
    area: f64,
    since: Duration,
    retried: u64,
    orphaned: u64,
}

impl State {
    /// Brings the running sum to `now` (time since the server started).
    fn advance(&mut self, now: Duration) {
        if now > self.since {
            self.area += self.in_flight as f64 * (now - self.since).as_secs_f64();
            self.since = now;
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
        let mut s = self.state();
        s.advance(self.start.elapsed());
        s.in_flight += 1;
        s.peak = s.peak.max(s.in_flight);
        s.retried += u64::from(retry);
        Visit {
            log: self,
            charged: false,
            answered: false,
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
    /// The model charged it and will answer it.
    pub(crate) charged: bool,
    /// Its answer was handed to the connection.
    pub(crate) answered: bool,
}

impl Drop for Visit<'_> {
    fn drop(&mut self) {
        let mut s = self.log.state();
        s.advance(self.log.start.elapsed());
        s.in_flight -= 1;
        s.orphaned += u64::from(self.charged && !self.answered);
    }
}
