//! Retry: which failures are retried, how long to wait, and when to give up.
//!
//! Exponential backoff with a base and a cap, and a jitter mode (`full` by default: a uniform draw
//! in `[0, min(cap, base·2^n)]`, which spreads callers that failed together). A provider's
//! Retry-After is, by default, a *minimum* wait (capped) that pauses the whole limiter; the
//! official SDKs' rules are other settings of the same policy ([`RetryPreset`]): the Retry-After
//! *instead of* the backoff, a longest one past which the call is not retried, no pause for
//! other callers, retries that go around the client's limiter. A wait that would end past the
//! caller's deadline is not taken: the call gives up at once instead. Randomness comes from the
//! caller's RNG.

mod after;
mod preset;

use std::fmt;
use std::time::Duration;

use rand::{Rng, RngExt};
use thiserror::Error;

pub use self::after::{parse_http_date, retry_after_from_headers, HeaderError};
pub use self::preset::{RetryPreset, UnknownPreset};
use super::clock::Moment;
use super::error::{ConfigError, GiveUp, InvalidBackoff};
use super::limit::Place;

/// The longest wait the policy asks for (a century). Waits are added to instants, so a
/// backoff ceiling or a Retry-After of any size is cut to this rather than overflow one.
pub const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 86_400);

/// How a backoff delay is randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Jitter {
    /// Uniform in `[0, d]`: the best spread, the default.
    #[default]
    Full,
    /// `d/2` plus uniform in `[0, d/2]`.
    Equal,
    /// Exactly `d`: every caller that failed together retries together.
    None,
    /// `d` shaved by up to a quarter, `d·(1 − U/4)`: the official OpenAI and Anthropic SDKs'.
    Reduce,
}

impl Jitter {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::None => "none",
            Jitter::Reduce => "reduce",
        }
    }

    /// The jitter mode named `name` in scenario files.
    pub fn from_name(name: &str) -> Option<Jitter> {
        [Jitter::Full, Jitter::Equal, Jitter::None, Jitter::Reduce]
            .into_iter()
            .find(|j| j.name() == name)
    }
}

/// How an honoured Retry-After combines with the backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RetryAfterMode {
    /// Wait the longer of the two: the Retry-After is a minimum (capsize's default).
    #[default]
    AtLeast,
    /// Wait the Retry-After and skip the backoff (the official SDKs). A zero Retry-After asks
    /// nothing, and the backoff applies.
    Instead,
}

impl RetryAfterMode {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            RetryAfterMode::AtLeast => "at_least",
            RetryAfterMode::Instead => "instead",
        }
    }

    /// The mode named `name` in scenario files.
    pub fn from_name(name: &str) -> Option<RetryAfterMode> {
        [RetryAfterMode::AtLeast, RetryAfterMode::Instead]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// What kind of failure an attempt ended in, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// HTTP 429 (or the provider's equivalent), with its Retry-After if it sent one.
    RateLimited {
        /// The provider's requested wait.
        retry_after: Option<Duration>,
    },
    /// Any other status; retried if the policy lists it (5xx, 529 overloaded).
    Status {
        /// The status code.
        code: u16,
        /// A Retry-After sent with it (503s often carry one).
        retry_after: Option<Duration>,
    },
    /// No answer before the client's timeout.
    Timeout,
    /// Anything else (bad request, a bug, a refused connection): never retried.
    Other,
}

/// An error that can say what kind of failure it is.
pub trait Classify {
    /// The kind of failure, for the retry policy.
    fn classify(&self) -> FailureKind;
}

/// A provider failure as data: the kind and a message. Ready to use as an attempt's error.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct ProviderError {
    /// What kind of failure.
    pub kind: FailureKind,
    /// What the provider said.
    pub message: String,
}

impl ProviderError {
    /// A 429 with an optional Retry-After.
    pub fn rate_limited(retry_after: Option<Duration>) -> Self {
        ProviderError {
            kind: FailureKind::RateLimited { retry_after },
            message: "429 rate limited".into(),
        }
    }

    /// A failure with an HTTP status.
    pub fn status(code: u16) -> Self {
        ProviderError {
            kind: FailureKind::Status {
                code,
                retry_after: None,
            },
            message: format!("HTTP {code}"),
        }
    }

    /// The same failure asking for `wait` before a retry (a status's or a 429's Retry-After).
    pub fn with_retry_after(mut self, wait: Option<Duration>) -> Self {
        if let FailureKind::Status { retry_after, .. } | FailureKind::RateLimited { retry_after } =
            &mut self.kind
        {
            *retry_after = wait;
        }
        self
    }

    /// A timeout.
    pub fn timeout() -> Self {
        ProviderError {
            kind: FailureKind::Timeout,
            message: "timed out".into(),
        }
    }

    /// A failure that is never retried.
    pub fn other(message: impl Into<String>) -> Self {
        ProviderError {
            kind: FailureKind::Other,
            message: message.into(),
        }
    }
}

impl Classify for ProviderError {
    fn classify(&self) -> FailureKind {
        self.kind
    }
}

/// The retry policy of a scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: never retry).
    pub max_retries: u32,
    /// The backoff ceiling of the first retry; it doubles each retry.
    pub base: Duration,
    /// The largest backoff ceiling.
    pub cap: Duration,
    /// How the delay is drawn below the ceiling.
    pub jitter: Jitter,
    /// Take the provider's Retry-After into account at all.
    pub honor_retry_after: bool,
    /// How an honoured Retry-After combines with the backoff.
    pub retry_after_mode: RetryAfterMode,
    /// The longest Retry-After taken at its word; longer ones are cut to this.
    pub retry_after_cap: Duration,
    /// A Retry-After longer than this is not waited for: the call is not retried and fails
    /// with the answer that asked for it (`None`: no such limit).
    pub retry_after_max: Option<Duration>,
    /// An honoured Retry-After pauses the whole limiter (every caller waits it out), not just
    /// the call that was told.
    pub pause_limiter: bool,
    /// Retries go back through the client's limiter like first attempts (`false`: around it,
    /// as an SDK's own retries go beneath a limiter in front of the SDK).
    pub retries_through_limiter: bool,
    /// Retries that go through the limiter join its line at the front, ahead of every first
    /// attempt waiting there (a request processor's retry queue, served first).
    pub retries_jump_queue: bool,
    /// Statuses retried besides 429.
    pub retry_on: Vec<u16>,
    /// Whether timeouts are retried.
    pub retry_timeouts: bool,
    /// A Retry-After is read in whole seconds, rounded up: what a client sees of an API that
    /// sends no finer one (Anthropic's: the `anthropic-python` preset). Seconds of the
    /// scheduler's clock: in a time-scaled real-time run, the wire's, as the SDK reads them.
    pub retry_after_whole_seconds: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            jitter: Jitter::Full,
            honor_retry_after: true,
            retry_after_mode: RetryAfterMode::AtLeast,
            retry_after_cap: Duration::from_secs(60),
            retry_after_max: None,
            pause_limiter: true,
            retries_through_limiter: true,
            retries_jump_queue: false,
            retry_on: vec![500, 502, 503, 504, 529],
            retry_timeouts: true,
            retry_after_whole_seconds: false,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Retry after `delay`.
    Retry {
        /// The wait before the next attempt.
        delay: Duration,
    },
    /// Return the failure.
    GiveUp(GiveUp),
}

impl RetryPolicy {
    /// Checks the policy can work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cap < self.base {
            return Err(InvalidBackoff {
                base: self.base,
                cap: self.cap,
            }
            .into());
        }
        Ok(())
    }

    /// The backoff before retry number `retry` (0 for the first retry), drawn with `rng`.
    pub fn backoff(&self, retry: u32, rng: &mut (impl Rng + ?Sized)) -> Duration {
        let ceiling = self.base.as_secs_f64() * 2f64.powi(retry.min(1023) as i32);
        let ceiling = ceiling.min(self.cap.as_secs_f64());
        let secs = match self.jitter {
            Jitter::Full => rng.random_range(0.0..=ceiling),
            Jitter::Equal => ceiling / 2.0 + rng.random_range(0.0..=ceiling / 2.0),
            Jitter::None => ceiling,
            Jitter::Reduce => ceiling * (1.0 - 0.25 * rng.random::<f64>()),
        };
        Duration::try_from_secs_f64(secs)
            .unwrap_or(LONGEST_WAIT)
            .min(LONGEST_WAIT)
    }

    /// The wait a failure of this kind asks for, if the policy listens to it at all.
    fn asked(&self, kind: &FailureKind) -> Option<Duration> {
        if !self.honor_retry_after {
            return None;
        }
        match kind {
            FailureKind::RateLimited { retry_after } | FailureKind::Status { retry_after, .. } => {
                retry_after.map(|d| match self.retry_after_whole_seconds {
                    true if d.subsec_nanos() > 0 => {
                        Duration::from_secs(d.as_secs().saturating_add(1))
                    }
                    _ => d,
                })
            }
            _ => None,
        }
    }

    /// Whether a failure of this kind asks for a wait longer than the policy will take.
    fn asks_too_long(&self, kind: &FailureKind) -> Option<Duration> {
        self.asked(kind)
            .filter(|d| self.retry_after_max.is_some_and(|max| *d > max))
    }

    /// The wait a failure of this kind asks for, cut to `retry_after_cap` (and to
    /// [`LONGEST_WAIT`]), if it is honoured (one longer than `retry_after_max` is not).
    pub fn retry_after(&self, kind: &FailureKind) -> Option<Duration> {
        self.asked(kind)
            .filter(|d| self.retry_after_max.is_none_or(|max| *d <= max))
            .map(|d| d.min(self.retry_after_cap).min(LONGEST_WAIT))
    }

    /// How long a failure of this kind pauses the whole limiter, if the policy pauses it.
    pub fn limiter_pause(&self, kind: &FailureKind) -> Option<Duration> {
        self.pause_limiter.then(|| self.retry_after(kind)).flatten()
    }

    /// Whether attempt `number` (1 for the first) goes through the client's limiter.
    pub fn through_limiter(&self, number: u32) -> bool {
        number == 1 || self.retries_through_limiter
    }

    /// Where attempt `number` joins the limiter's line.
    pub fn place(&self, number: u32) -> Place {
        if number > 1 && self.retries_jump_queue {
            Place::Front
        } else {
            Place::Back
        }
    }

    fn retryable(&self, kind: &FailureKind) -> bool {
        match kind {
            FailureKind::RateLimited { .. } => true,
            FailureKind::Status { code, .. } => self.retry_on.contains(code),
            FailureKind::Timeout => self.retry_timeouts,
            FailureKind::Other => false,
        }
    }

    /// Decides what follows a failure of `kind` after `retries_done` retries, at `now`, for a
    /// caller whose deadline is `deadline` (instants of any [`Clock`](crate::Clock)).
    pub fn decide<I: Moment>(
        &self,
        kind: &FailureKind,
        retries_done: u32,
        now: I,
        deadline: Option<I>,
        rng: &mut (impl Rng + ?Sized),
    ) -> Decision {
        if !self.retryable(kind) {
            return Decision::GiveUp(GiveUp::NotRetryable);
        }
        if retries_done >= self.max_retries {
            return Decision::GiveUp(GiveUp::RetriesExhausted);
        }
        if let Some(wait) = self.asks_too_long(kind) {
            return Decision::GiveUp(GiveUp::RetryAfterTooLong { wait });
        }
        let backoff = self.backoff(retries_done, rng);
        let delay = match (self.retry_after(kind), self.retry_after_mode) {
            (None, _) => backoff,
            (Some(after), RetryAfterMode::AtLeast) => backoff.max(after),
            (Some(after), RetryAfterMode::Instead) if after.is_zero() => backoff,
            (Some(after), RetryAfterMode::Instead) => after,
        };
        if deadline.is_some_and(|d| now + delay >= d) {
            return Decision::GiveUp(GiveUp::WouldMissDeadline { wait: delay });
        }
        Decision::Retry { delay }
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
