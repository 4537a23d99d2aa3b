//! Retry: which failures are retried, how long to wait, and when to give up.
//!
//! Exponential backoff with a base and a cap, and a jitter mode (`full` by default: a uniform draw
//! in `[0, min(cap, base·2^n)]`, which spreads callers that failed together). A provider's
//! Retry-After is a *minimum* wait (capped), and a wait that would end past the caller's deadline
//! is not taken: the call gives up at once instead. Randomness comes from the caller's RNG.

mod after;

use std::fmt;
use std::time::Duration;

use rand::{Rng, RngExt};
use thiserror::Error;
use tokio::time::Instant;

pub use self::after::{parse_http_date, retry_after_from_headers, HeaderError};
use super::error::{ConfigError, GiveUp, InvalidBackoff};

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
}

impl Jitter {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::None => "none",
        }
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
    /// Wait at least the provider's Retry-After, and pause the whole limiter for it.
    pub honor_retry_after: bool,
    /// The longest Retry-After taken at its word; longer ones are cut to this.
    pub retry_after_cap: Duration,
    /// Statuses retried besides 429.
    pub retry_on: Vec<u16>,
    /// Whether timeouts are retried.
    pub retry_timeouts: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            jitter: Jitter::Full,
            honor_retry_after: true,
            retry_after_cap: Duration::from_secs(60),
            retry_on: vec![500, 502, 503, 504, 529],
            retry_timeouts: true,
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
        };
        Duration::from_secs_f64(secs)
    }

    /// The wait a failure of this kind asks for, capped, if it is to be honoured.
    pub fn retry_after(&self, kind: &FailureKind) -> Option<Duration> {
        if !self.honor_retry_after {
            return None;
        }
        match kind {
            FailureKind::RateLimited { retry_after } | FailureKind::Status { retry_after, .. } => {
                retry_after.map(|d| d.min(self.retry_after_cap))
            }
            _ => None,
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
    /// caller whose deadline is `deadline`.
    pub fn decide(
        &self,
        kind: &FailureKind,
        retries_done: u32,
        now: Instant,
        deadline: Option<Instant>,
        rng: &mut (impl Rng + ?Sized),
    ) -> Decision {
        if !self.retryable(kind) {
            return Decision::GiveUp(GiveUp::NotRetryable);
        }
        if retries_done >= self.max_retries {
            return Decision::GiveUp(GiveUp::RetriesExhausted);
        }
        let mut delay = self.backoff(retries_done, rng);
        if let Some(after) = self.retry_after(kind) {
            delay = delay.max(after);
        }
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
