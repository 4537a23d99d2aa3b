//! Errors the scheduler returns: bad configuration, and why a call did not succeed.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use super::budget::BudgetExhausted;
use super::observe::NotRunReason;

/// A scheduler setting that cannot work. Each variant is a named error of its own, so a caller
/// can say which of its settings is wrong in its own words.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The limiter's headroom is outside (0, 1].
    #[error(transparent)]
    Headroom(#[from] InvalidHeadroom),
    /// A rate or burst of a limit is not a positive number.
    #[error(transparent)]
    Limit(#[from] InvalidLimit),
    /// The retry backoff's cap is below its base.
    #[error(transparent)]
    Backoff(#[from] InvalidBackoff),
    /// Two named limits share a name, or a name is empty.
    #[error("named limit {0:?}: each named limit needs a name of its own")]
    LimitName(String),
    /// An adaptive concurrency limit whose bounds do not hold together.
    #[error(
        "adaptive concurrency: needs 1 <= min <= initial <= max, backoff in (0, 1) and (gradient) \
         tolerance >= 1, smoothing in (0, 1], long_window >= 1, got {0:?}"
    )]
    Adaptive(crate::adaptive::Adaptive),
    /// A named limit's own setting cannot work.
    #[error("named limit {name:?}: {error}")]
    NamedLimit {
        /// The limit's name.
        name: String,
        /// What is wrong with it.
        error: Box<ConfigError>,
    },
}

/// The limiter's headroom (the share of each limit the client may use) is outside (0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Error)]
#[error("headroom must be in (0, 1], got {0}")]
pub struct InvalidHeadroom(pub f64);

/// Which of the provider's limits a setting belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    /// Requests per minute.
    Requests,
    /// Tokens per minute.
    Tokens,
}

/// Which number of a [`Limit`](crate::Limit) is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitField {
    /// The sustained rate, per minute.
    PerMinute,
    /// The bucket's capacity.
    Burst,
}

/// A limit's rate or burst is not a positive, finite number.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
#[error("{}: {} must be a positive number, got {value}", kind_text(*.kind), field_text(*.field))]
pub struct InvalidLimit {
    /// The limit.
    pub kind: LimitKind,
    /// Its rate or its burst.
    pub field: LimitField,
    /// The value given.
    pub value: f64,
}

fn kind_text(kind: LimitKind) -> &'static str {
    match kind {
        LimitKind::Requests => "requests-per-minute limit",
        LimitKind::Tokens => "tokens-per-minute limit",
    }
}

fn field_text(field: LimitField) -> &'static str {
    match field {
        LimitField::PerMinute => "rate",
        LimitField::Burst => "burst",
    }
}

/// The retry backoff's cap is below its base, so no backoff could be drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("backoff cap {cap:?} must be at least its base {base:?}")]
pub struct InvalidBackoff {
    /// The first retry's ceiling.
    pub base: Duration,
    /// The ceiling no backoff exceeds.
    pub cap: Duration,
}

/// Where a call was when something stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Stage {
    /// Waiting for a concurrency permit (nothing reserved yet).
    Queued,
    /// Holding a reservation in the rate limiter (it is refunded).
    Limiter,
    /// Sleeping before a retry.
    Backoff,
    /// Sent and waiting for the answer (the in-flight future is dropped).
    InFlight,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Queued => "queued",
            Stage::Limiter => "waiting for the rate limiter",
            Stage::Backoff => "backing off before a retry",
            Stage::InFlight => "in flight",
        })
    }
}

/// What stopped a piece of work from outside.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Interrupt {
    /// Its cancellation token was cancelled (a user stop, a sibling's failure, a parent's cancel).
    #[error("cancelled")]
    Cancelled,
    /// Its deadline (its own or a parent's) passed.
    #[error("deadline exceeded")]
    DeadlineExceeded,
    /// The budget it draws on is spent.
    #[error(transparent)]
    BudgetExhausted(BudgetExhausted),
}

/// Why a retry was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GiveUp {
    /// The error is not one the retry policy retries.
    NotRetryable,
    /// `max_retries` retries were made already.
    RetriesExhausted,
    /// The wait before the next attempt would end past the caller's deadline.
    WouldMissDeadline {
        /// The wait that was needed.
        wait: Duration,
    },
    /// The provider asked for a wait longer than the policy's `retry_after_max`.
    RetryAfterTooLong {
        /// The wait asked for.
        wait: Duration,
    },
}

/// Why a call did not return a value.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CallError<E> {
    /// Stopped from outside before it finished.
    #[error("{cause} while {stage}")]
    Interrupted {
        /// Where the call was.
        stage: Stage,
        /// What stopped it.
        cause: Interrupt,
    },
    /// The provider's last answer was an error and no retry was made.
    #[error("{} after {attempts} attempt(s): {error}", give_up_text(.reason))]
    Failed {
        /// The error of the last attempt.
        error: E,
        /// Attempts sent.
        attempts: u32,
        /// Why no further retry was made.
        reason: GiveUp,
    },
    /// Not run at all, and why (the turn's cap on parallel tool calls was reached).
    #[error("not run: {0}")]
    NotRun(NotRunReason),
}

fn give_up_text(reason: &GiveUp) -> String {
    match reason {
        GiveUp::NotRetryable => "failed (not retryable)".to_string(),
        GiveUp::RetriesExhausted => "failed, retries exhausted,".to_string(),
        GiveUp::WouldMissDeadline { wait } => {
            format!("gave up early (a {wait:?} wait would pass the deadline)")
        }
        GiveUp::RetryAfterTooLong { wait } => {
            format!("failed, not retried (Retry-After {wait:?} is longer than the policy waits),")
        }
    }
}

impl<E> CallError<E> {
    /// True if the call was stopped from outside (cancel, deadline, budget) rather than failing.
    pub fn is_interrupt(&self) -> bool {
        matches!(self, CallError::Interrupted { .. })
    }

    /// The interrupt cause, if the call was interrupted.
    pub fn interrupt(&self) -> Option<&Interrupt> {
        match self {
            CallError::Interrupted { cause, .. } => Some(cause),
            _ => None,
        }
    }
}
