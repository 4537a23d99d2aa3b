//! The bounds every value may take, in one place, for every way a value comes in: a scenario
//! file, a `--set`, a sweep point, a `capsize plan` flag, a `--seed`. Each check takes the name
//! to blame (a dotted key or a flag) and returns the value or a one-line reason.
//!
//! The bounds keep every run finite and every number representable: durations fit a year (the
//! watchdog's horizon), counts keep a query's plan and a run's tasks in memory, seeds can be
//! written back into a scenario file (TOML integers are signed 64-bit).

use std::time::Duration;

/// A value that cannot be used: the key (or flag) it is under, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The dotted key, or the flag.
    pub key: String,
    /// What is wrong, one line.
    pub message: String,
}

impl From<capsize_mock::ConfigError> for Invalid {
    fn from(e: capsize_mock::ConfigError) -> Self {
        Invalid {
            key: e.key,
            message: e.message,
        }
    }
}

/// The longest duration anywhere in a scenario, a year (the watchdog's horizon), and the largest
/// provider limit per minute: the provider's own bounds, so one value is refused the same way
/// in every table.
pub use capsize_mock::limits::{MAX_DURATION, MAX_DURATION_MS};
/// The largest seed: seeds are written into TOML files, whose integers are signed 64-bit.
pub const MAX_SEED: u64 = i64::MAX as u64;
/// The most concurrent sessions of a closed-loop workload (each is a task).
pub const MAX_SESSIONS: u64 = 100_000;
/// The most queries a run may be asked for.
pub const MAX_QUERIES: u64 = 1_000_000_000;
/// The most tool calls in one round of one agent.
pub const MAX_CALLS_PER_ROUND: u64 = 10_000;
/// The most rounds of one agent.
pub const MAX_ROUNDS: u64 = 1_000;
/// The most subagents of one query.
pub const MAX_SUBAGENTS: u64 = 1_000;
/// The most tool calls one query may plan (calls × rounds × subagents): a query's plan is held
/// in memory while it runs.
pub const MAX_CALLS_PER_QUERY: u64 = 1_000_000;
/// The most tokens of one request, or of a budget.
pub const MAX_TOKENS: u64 = 1_000_000_000_000;
/// The fastest open-loop arrival rate, queries per second.
pub const MAX_ARRIVAL_RATE: f64 = 1_000_000.0;
/// The fastest call rate a `capsize plan` burst may be given, calls per second.
pub const MAX_CALL_RATE: f64 = 1e9;
/// The most calls in flight a scheduler may be given (0 stays "unbounded").
pub const MAX_CONCURRENCY: u64 = 1_000_000;
/// The most retries after a first attempt.
pub const MAX_RETRIES: u64 = 100;
/// The largest bucket, in seconds of refill.
pub const MAX_BURST_S: f64 = 86_400.0;
/// The largest scenario file read.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;
/// The longest scenario name (it names the output folder).
pub const MAX_NAME_CHARS: usize = 100;

pub(crate) fn bad(key: &str, message: impl Into<String>) -> Invalid {
    Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

/// A number as a person reads it in an error: `1e308`, not three hundred digits.
pub(crate) use capsize_mock::limits::show as num;

/// A finite number above 0, at most `max`.
pub(crate) fn positive(key: &str, v: f64, max: f64) -> Result<f64, Invalid> {
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(v)
    } else {
        Err(bad(
            key,
            format!(
                "must be a number above 0 and at most {}, got {}",
                num(max),
                num(v)
            ),
        ))
    }
}

/// A provider limit per minute, by the provider's own rule (at least 1, at most
/// [`MAX_PER_MINUTE`]).
pub(crate) fn per_minute(key: &str, v: f64) -> Result<f64, Invalid> {
    Ok(capsize_mock::config::per_minute(key, v)?)
}

/// A number in (0, 1]: a share of a limit.
pub(crate) fn headroom(key: &str, v: f64) -> Result<f64, Invalid> {
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(bad(key, format!("must be in (0, 1], got {}", num(v))))
    }
}

/// Milliseconds from 0 to a year.
pub(crate) fn millis(key: &str, v: f64) -> Result<Duration, Invalid> {
    if v.is_finite() && (0.0..=MAX_DURATION_MS).contains(&v) {
        Ok(Duration::from_secs_f64(v / 1000.0))
    } else {
        Err(bad(
            key,
            format!(
                "must be a number of milliseconds from 0 to {} (a year), got {}",
                num(MAX_DURATION_MS),
                num(v)
            ),
        ))
    }
}

/// Milliseconds above 0, up to a year.
pub(crate) fn positive_millis(key: &str, v: f64) -> Result<Duration, Invalid> {
    let d = millis(key, v)?;
    if d.is_zero() {
        return Err(bad(key, format!("must be above 0 ms, got {}", num(v))));
    }
    Ok(d)
}

/// Seconds above 0, up to a year.
pub(crate) fn seconds(key: &str, v: f64) -> Result<Duration, Invalid> {
    let max = MAX_DURATION.as_secs_f64();
    Ok(Duration::from_secs_f64(positive(key, v, max)?))
}

/// An integer from `min` to `max`.
pub(crate) fn count(key: &str, v: u64, min: u64, max: u64) -> Result<u64, Invalid> {
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(bad(key, format!("must be from {min} to {max}, got {v}")))
    }
}

/// A seed: from 0 to [`MAX_SEED`].
pub fn seed(key: &str, v: u64) -> Result<u64, Invalid> {
    count(key, v, 0, MAX_SEED)
}

/// A drawn or computed duration in milliseconds as a [`Duration`], clamped to [0, a year]
/// (NaN counts as a year, as the provider's draws do): a draw from a long-tailed distribution
/// never becomes a panic.
pub fn clamped_millis(v: f64) -> Duration {
    capsize_mock::limits::duration_from_ms(v)
}

/// As [`clamped_millis`], for seconds (converted directly, without a trip through ms).
pub fn clamped_secs(v: f64) -> Duration {
    if v.is_nan() {
        return MAX_DURATION;
    }
    if v <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(v).map_or(MAX_DURATION, |d| d.min(MAX_DURATION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_bounded_by_a_year_and_never_panic() {
        assert_eq!(millis("k", 1500.0), Ok(Duration::from_millis(1500)));
        assert_eq!(millis("k", MAX_DURATION_MS), Ok(MAX_DURATION));
        for v in [
            1e308,
            f64::INFINITY,
            f64::NAN,
            -1.0,
            MAX_DURATION_MS * 1.0001,
        ] {
            let Invalid { key, message } = millis("scheduler.timeout_ms", v).unwrap_err();
            assert_eq!(key, "scheduler.timeout_ms");
            assert!(message.contains("a year"), "{message}");
        }
        assert!(positive_millis("k", 0.0).is_err());
        assert!(seconds("k", 0.0).is_err());
        assert_eq!(seconds("k", 2.0), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn drawn_durations_are_clamped() {
        assert_eq!(clamped_millis(f64::INFINITY), MAX_DURATION);
        assert_eq!(clamped_millis(1e300), MAX_DURATION);
        assert_eq!(clamped_millis(f64::NAN), MAX_DURATION);
        assert_eq!(clamped_millis(-5.0), Duration::ZERO);
        assert_eq!(clamped_millis(250.0), Duration::from_millis(250));
    }

    #[test]
    fn seeds_fit_a_toml_integer() {
        assert_eq!(seed("seed", i64::MAX as u64), Ok(i64::MAX as u64));
        assert!(seed("seed", u64::MAX).is_err());
    }
}
