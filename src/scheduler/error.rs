//! Errors the scheduler returns: bad configuration, and why a call did not succeed.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use super::budget::BudgetExhausted;
use super::observe::NotRunReason;

/// A scheduler setting that cannot work, naming the setting.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// The setting, as scenario files name it (`headroom`, `rpm`, `retry.base_ms`, ...).
    pub key: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(key: &'static str, message: impl Into<String>) -> Self {
        ConfigError {
            key,
            message: message.into(),
        }
    }
}

/// Where a call was when something stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
}

/// Why a call did not return a value.
#[derive(Debug, Error)]
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
