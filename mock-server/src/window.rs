//! The provider's rate-limit accounting: requests and tokens per minute over a sliding window, a
//! fixed window, or a continuously refilled bucket. Clockless: every call is told the time, as a
//! `Duration` since the model started.
//!
//! A charge can be settled later ([`Window::settle`]): output tokens are charged as `max_tokens`
//! when a request is admitted and corrected to what was generated when it completes, as the
//! Anthropic API counts its output-tokens limit. A sliding window corrects the request's own
//! entry (if it is still in the window), a fixed window corrects the minute it was charged in
//! (if that is still the minute), and a bucket is credited (or debited) the difference.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Deserialize;

use crate::limits::{duration_from_secs, MAX_DURATION};

const MINUTE: Duration = Duration::from_secs(60);

/// `secs` rounded up to a whole nanosecond (so a retry after exactly this wait fits), within
/// `[0, MAX_DURATION]`; NaN counts as the bound.
fn ceil_nanos(secs: f64) -> Duration {
    let nanos = (secs * 1e9).ceil();
    if nanos.is_nan() || nanos >= MAX_DURATION.as_nanos() as f64 {
        return MAX_DURATION;
    }
    // In [0, 3.2e16): exact enough, and within u64.
    Duration::from_nanos(nanos.max(0.0) as u64)
}

/// How a per-minute limit is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// A request counts against the limit for the 60 s after it arrived.
    #[default]
    Sliding,
    /// The budget resets at every whole minute from the start.
    Fixed,
    /// The budget refills continuously, up to one minute's worth.
    TokenBucket,
}

/// A limit: the one a request can never fit, however long it waits, or the one that refused
/// it for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Requests per minute (never: fewer than one request a minute, which only a configuration
    /// built without [`crate::RawProvider::build`] can say).
    Requests,
    /// Tokens per minute, `tpm` (never: the request costs more than a whole minute's worth).
    Tokens,
    /// Input tokens per minute, `itpm` (the prompt).
    InputTokens,
    /// Output tokens per minute, `otpm` (charged as `max_tokens`, settled on completion).
    OutputTokens,
}

/// Where a charge went, so that it can be settled later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The window's epoch: a window rebuilt since (limits removed and put back) has nothing
    /// of it left to settle.
    epoch: u64,
    /// A sliding window's entry number, or a fixed window's minute (its start, in ns).
    at: u64,
}

/// The state of one limit, for rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// The limit per minute.
    pub limit: f64,
    /// What may still be used now.
    pub remaining: f64,
    /// Time until the limit is back to its initial state.
    pub reset: Duration,
}

#[derive(Debug, Clone)]
enum State {
    /// No limit at all: nothing to count.
    Unlimited,
    Sliding {
        log: VecDeque<(Duration, u64)>,
        tokens: u64,
        /// Entries ever logged (the back entry is number `pushed - 1`).
        pushed: u64,
    },
    Fixed {
        start: Duration,
        requests: u64,
        tokens: u64,
    },
    Bucket {
        last: Duration,
        requests: f64,
        tokens: f64,
    },
}

/// Requests-per-minute and tokens-per-minute limits, counted one way.
#[derive(Debug, Clone)]
pub struct Window {
    kind: WindowKind,
    rpm: Option<f64>,
    tpm: Option<f64>,
    state: State,
    /// How many times the window was rebuilt from empty.
    epoch: u64,
}

impl Window {
    /// A window for the given limits, empty at time 0.
    pub fn new(kind: WindowKind, rpm: Option<f64>, tpm: Option<f64>) -> Self {
        let state = match kind {
            _ if rpm.is_none() && tpm.is_none() => State::Unlimited,
            WindowKind::Sliding => State::Sliding {
                log: VecDeque::new(),
                tokens: 0,
                pushed: 0,
            },
            WindowKind::Fixed => State::Fixed {
                start: Duration::ZERO,
                requests: 0,
                tokens: 0,
            },
            WindowKind::TokenBucket => State::Bucket {
                last: Duration::ZERO,
                requests: rpm.unwrap_or(0.0),
                tokens: tpm.unwrap_or(0.0),
            },
        };
        Window {
            kind,
            rpm,
            tpm,
            state,
            epoch: 0,
        }
    }

    /// Rebuilt empty with limits `rpm` and `tpm`, in a new epoch.
    fn rebuilt(&self, rpm: Option<f64>, tpm: Option<f64>) -> Self {
        Window {
            epoch: self.epoch + 1,
            ..Window::new(self.kind, rpm, tpm)
        }
    }

    /// Puts other limits in force from `now` on (a provider's incident): what is counted stays
    /// counted against them (a sliding or fixed window counts requests and tokens even for a
    /// limit it does not have), and a bucket keeps its balance, cut to the new size (a limit it
    /// did not have starts full). With no limit at all nothing is counted: limits that come
    /// back after that start as at time 0.
    pub fn set_limits(&mut self, now: Duration, rpm: Option<f64>, tpm: Option<f64>) {
        if (rpm, tpm) == (self.rpm, self.tpm) {
            return;
        }
        if rpm.is_none() && tpm.is_none() {
            *self = self.rebuilt(None, None);
            return;
        }
        if let State::Unlimited = self.state {
            *self = self.rebuilt(rpm, tpm);
            return;
        }
        self.advance(now);
        if let State::Bucket {
            requests, tokens, ..
        } = &mut self.state
        {
            let resize = |balance: &mut f64, old: Option<f64>, new: Option<f64>| {
                if let Some(new) = new {
                    *balance = if old.is_some() { balance.min(new) } else { new };
                }
            };
            resize(requests, self.rpm, rpm);
            resize(tokens, self.tpm, tpm);
        }
        self.rpm = rpm;
        self.tpm = tpm;
    }

    fn advance(&mut self, now: Duration) {
        match &mut self.state {
            State::Unlimited => {}
            State::Sliding { log, tokens, .. } => {
                while let Some(&(t, cost)) = log.front() {
                    if t.saturating_add(MINUTE) > now {
                        break;
                    }
                    log.pop_front();
                    *tokens = tokens.saturating_sub(cost);
                }
            }
            State::Fixed {
                start,
                requests,
                tokens,
            } => {
                if now >= start.saturating_add(MINUTE) {
                    // The whole minute `now` is in.
                    *start = Duration::from_secs(now.as_secs() - now.as_secs() % MINUTE.as_secs());
                    *requests = 0;
                    *tokens = 0;
                }
            }
            State::Bucket {
                last,
                requests,
                tokens,
            } => {
                if now > *last {
                    let minutes = (now - *last).as_secs_f64() / 60.0;
                    if let Some(rpm) = self.rpm {
                        *requests = (*requests + rpm * minutes).min(rpm);
                    }
                    if let Some(tpm) = self.tpm {
                        *tokens = (*tokens + tpm * minutes).min(tpm);
                    }
                    *last = now;
                }
            }
        }
    }

    /// Whether the window has no limit (nothing to count, every request fits).
    #[inline]
    pub fn is_unlimited(&self) -> bool {
        matches!(self.state, State::Unlimited)
    }

    /// Whether a request of `cost` tokens can ever fit, in an empty window: `Err` names the limit
    /// it exceeds whatever the wait. The same for every [`WindowKind`]: an empty sliding or fixed
    /// window, and a full bucket, hold one minute's worth of each limit.
    pub fn admits(&self, cost: u64) -> Result<(), Limit> {
        // NaN limits (only from a configuration built by hand) admit nothing.
        if self.rpm.is_some_and(|r| r.is_nan() || r < 1.0) {
            return Err(Limit::Requests);
        }
        // `cost as f64` rounds only above 2^53, far beyond any valid `tpm`.
        if self.tpm.is_some_and(|t| t.is_nan() || cost as f64 > t) {
            return Err(Limit::Tokens);
        }
        Ok(())
    }

    /// Charges one request of `cost` tokens if it fits now; otherwise returns how long until it
    /// would fit (`None` if it never can: see [`Window::admits`]).
    #[inline]
    pub fn try_charge(&mut self, now: Duration, cost: u64) -> Result<(), Option<Duration>> {
        // Checked here, inlined, so an unlimited window costs a caller one comparison (the
        // full path, `advance` and `admits` included, costs ~130 instructions a request).
        if let State::Unlimited = self.state {
            return Ok(());
        }
        self.fit(now, cost)?;
        self.commit(now, cost);
        Ok(())
    }

    /// Whether one request of `cost` tokens fits now, charging nothing: `Err` holds how long
    /// until it would fit (`None`: never). A caller with several windows asks each before it
    /// charges any ([`Window::commit`]).
    pub fn fit(&mut self, now: Duration, cost: u64) -> Result<(), Option<Duration>> {
        if let State::Unlimited = self.state {
            return Ok(());
        }
        self.advance(now);
        if self.admits(cost).is_err() {
            return Err(None);
        }
        let (rpm, tpm) = (self.rpm, self.tpm);
        match &self.state {
            State::Unlimited => Ok(()),
            State::Sliding { log, tokens, .. } => {
                let fits = |n: usize, used: u64| {
                    rpm.is_none_or(|r| (n + 1) as f64 <= r)
                        && tpm.is_none_or(|t| used.saturating_add(cost) as f64 <= t)
                };
                if fits(log.len(), *tokens) {
                    return Ok(());
                }
                // Walk the log in arrival order until enough of it has expired.
                let (mut n, mut used) = (log.len(), *tokens);
                for &(t, c) in log.iter() {
                    n -= 1;
                    used = used.saturating_sub(c);
                    if fits(n, used) {
                        return Err(Some(t.saturating_add(MINUTE).saturating_sub(now)));
                    }
                }
                Err(None)
            }
            State::Fixed {
                start,
                requests,
                tokens,
            } => {
                let fits = rpm.is_none_or(|r| requests.saturating_add(1) as f64 <= r)
                    && tpm.is_none_or(|t| tokens.saturating_add(cost) as f64 <= t);
                if fits {
                    return Ok(());
                }
                Err(Some(start.saturating_add(MINUTE).saturating_sub(now)))
            }
            State::Bucket {
                requests, tokens, ..
            } => {
                let need_r = rpm.map_or(0.0, |r| (1.0 - *requests) / (r / 60.0));
                let need_t = tpm.map_or(0.0, |t| (cost as f64 - *tokens) / (t / 60.0));
                let wait = need_r.max(need_t);
                // Within a nanosecond of refill counts as there: float noise must not refuse a
                // client that waited exactly the Retry-After it was given.
                if wait <= 1e-9 {
                    return Ok(());
                }
                Err(Some(ceil_nanos(wait)))
            }
        }
    }

    /// Charges one request of `cost` tokens at `now` (after [`Window::fit`] said it fits), and
    /// says where, for [`Window::settle`].
    pub fn commit(&mut self, now: Duration, cost: u64) -> Ticket {
        self.advance(now);
        let epoch = self.epoch;
        let at = match &mut self.state {
            State::Unlimited => 0,
            State::Sliding {
                log,
                tokens,
                pushed,
            } => {
                log.push_back((now, cost));
                *tokens = tokens.saturating_add(cost);
                *pushed += 1;
                *pushed - 1
            }
            State::Fixed {
                start,
                requests,
                tokens,
            } => {
                *requests = requests.saturating_add(1);
                *tokens = tokens.saturating_add(cost);
                u64::try_from(start.as_nanos()).unwrap_or(u64::MAX)
            }
            State::Bucket {
                requests, tokens, ..
            } => {
                *requests -= 1.0;
                *tokens -= cost as f64;
                0
            }
        };
        Ticket { epoch, at }
    }

    /// Corrects the charge `ticket` names from `charged` tokens to `actual` at `now` (see the
    /// module docs): a charge already out of its window stays as it was.
    pub fn settle(&mut self, now: Duration, ticket: Ticket, charged: u64, actual: u64) {
        if ticket.epoch != self.epoch || charged == actual {
            return;
        }
        self.advance(now);
        let tpm = self.tpm;
        match &mut self.state {
            State::Unlimited => {}
            State::Sliding {
                log,
                tokens,
                pushed,
            } => {
                let first = *pushed - log.len() as u64;
                let entry = ticket
                    .at
                    .checked_sub(first)
                    .and_then(|i| log.get_mut(usize::try_from(i).ok()?));
                if let Some((_, cost)) = entry {
                    *tokens = tokens.saturating_sub(*cost).saturating_add(actual);
                    *cost = actual;
                }
            }
            State::Fixed { start, tokens, .. } => {
                if u64::try_from(start.as_nanos()).ok() == Some(ticket.at) {
                    *tokens = tokens.saturating_sub(charged).saturating_add(actual);
                }
            }
            State::Bucket { tokens, .. } => {
                let credit = charged as f64 - actual as f64;
                *tokens = (*tokens + credit).min(tpm.unwrap_or(f64::INFINITY));
            }
        }
    }

    /// Request and token usage at `now`, for headers: `(requests, tokens)`.
    #[inline]
    pub fn usage(&mut self, now: Duration) -> (Option<Usage>, Option<Usage>) {
        if let State::Unlimited = self.state {
            return (None, None);
        }
        self.used(now)
    }

    fn used(&mut self, now: Duration) -> (Option<Usage>, Option<Usage>) {
        self.advance(now);
        let (rpm, tpm) = (self.rpm, self.tpm);
        // What is used of each limit, and (for the windows) when all of it is back; a bucket
        // is back when it has refilled what is used.
        let (used_requests, used_tokens, back_at) = match &self.state {
            State::Unlimited => return (None, None),
            State::Sliding { log, tokens, .. } => {
                let reset = log.back().map_or(Duration::ZERO, |&(t, _)| {
                    t.saturating_add(MINUTE).saturating_sub(now)
                });
                (log.len() as f64, *tokens as f64, Some(reset))
            }
            State::Fixed {
                start,
                requests,
                tokens,
            } => {
                let reset = if *requests == 0 {
                    Duration::ZERO
                } else {
                    start.saturating_add(MINUTE).saturating_sub(now)
                };
                (*requests as f64, *tokens as f64, Some(reset))
            }
            State::Bucket {
                requests, tokens, ..
            } => (
                rpm.map_or(0.0, |l| l - requests),
                tpm.map_or(0.0, |l| l - tokens),
                None,
            ),
        };
        let usage = |limit: Option<f64>, used: f64| {
            limit.map(|l| Usage {
                limit: l,
                remaining: (l - used).max(0.0),
                reset: back_at.unwrap_or_else(|| duration_from_secs(used / (l / 60.0))),
            })
        };
        (usage(rpm, used_requests), usage(tpm, used_tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Duration {
        duration_from_secs(x)
    }

    #[test]
    fn sliding_frees_each_request_sixty_seconds_after_it_arrived() {
        let mut w = Window::new(WindowKind::Sliding, Some(2.0), None);
        assert_eq!(w.try_charge(s(0.0), 1), Ok(()));
        assert_eq!(w.try_charge(s(10.0), 1), Ok(()));
        assert_eq!(w.try_charge(s(20.0), 1), Err(Some(s(40.0))));
        assert_eq!(w.try_charge(s(60.0), 1), Ok(()));
        let (r, _) = w.usage(s(60.0));
        assert_eq!(r.unwrap().remaining, 0.0);
        assert_eq!(r.unwrap().reset, s(60.0));
    }

    #[test]
    fn fixed_resets_on_the_minute() {
        let mut w = Window::new(WindowKind::Fixed, None, Some(10_000.0));
        for _ in 0..5 {
            assert_eq!(w.try_charge(s(1.0), 2_000), Ok(()));
        }
        assert_eq!(w.try_charge(s(25.0), 2_000), Err(Some(s(35.0))));
        assert_eq!(w.try_charge(s(60.0), 2_000), Ok(()));
        assert_eq!(
            w.try_charge(s(1.0), 20_000),
            Err(None),
            "bigger than a minute's tokens"
        );
    }

    #[test]
    fn a_settled_charge_corrects_each_kind_of_window() {
        // 1,000 output tokens a minute; a request charged 800 (its max_tokens) generated 100.
        for kind in [
            WindowKind::Sliding,
            WindowKind::Fixed,
            WindowKind::TokenBucket,
        ] {
            let mut w = Window::new(kind, None, Some(1_000.0));
            let ticket = w.commit(s(1.0), 800);
            assert!(w.fit(s(2.0), 300).is_err(), "{kind:?}: 800 + 300 > 1,000");
            w.settle(s(2.0), ticket, 800, 100);
            assert_eq!(w.fit(s(2.0), 900), Ok(()), "{kind:?}: 100 + 900 fits");
            let (_, t) = w.usage(s(2.0));
            // The bucket refilled 1 s x 1,000/min = 16.7 tokens since the charge.
            let left = t.unwrap().remaining;
            match kind {
                WindowKind::TokenBucket => assert!((left - 916.67).abs() < 0.01, "{left}"),
                _ => assert_eq!(left, 900.0, "{kind:?}"),
            }
        }
    }

    #[test]
    fn a_charge_out_of_its_window_is_not_settled() {
        // Sliding: the entry left the window at 61 s; fixed: the minute is over.
        for kind in [WindowKind::Sliding, WindowKind::Fixed] {
            let mut w = Window::new(kind, None, Some(1_000.0));
            let ticket = w.commit(s(1.0), 800);
            w.commit(s(61.5), 500);
            w.settle(s(62.0), ticket, 800, 100);
            let (_, t) = w.usage(s(62.0));
            assert_eq!(t.unwrap().remaining, 500.0, "{kind:?}");
        }
        // A window rebuilt since (its limit removed and put back) has nothing to settle.
        let mut w = Window::new(WindowKind::Sliding, None, Some(1_000.0));
        let ticket = w.commit(s(1.0), 800);
        w.set_limits(s(2.0), None, None);
        w.set_limits(s(3.0), None, Some(1_000.0));
        w.commit(s(3.0), 800);
        w.settle(s(4.0), ticket, 800, 100);
        assert_eq!(w.usage(s(4.0)).1.unwrap().remaining, 200.0);
    }

    #[test]
    fn a_settlement_above_the_charge_debits_the_window() {
        // No max_tokens: charged 0 at admission, 300 generated.
        let mut w = Window::new(WindowKind::TokenBucket, None, Some(600.0));
        let ticket = w.commit(s(0.0), 0);
        w.settle(s(0.0), ticket, 0, 900);
        // 300 in debt: 600 more need 900 tokens of refill, at 10 a second 90 s.
        assert_eq!(w.fit(s(0.0), 600), Err(Some(s(90.0))));
    }

    #[test]
    fn token_bucket_refills_continuously() {
        let mut w = Window::new(WindowKind::TokenBucket, Some(60.0), None);
        for _ in 0..60 {
            assert_eq!(w.try_charge(s(0.0), 0), Ok(()));
        }
        assert_eq!(w.try_charge(s(0.0), 0), Err(Some(s(1.0))));
        assert_eq!(w.try_charge(s(1.0), 0), Ok(()));
    }
}
