//! The bounds every input of the mock is held to, so that a value that passes validation can
//! never overflow a `Duration`, an integer or memory later, and the conversions that enforce
//! them. The root crate's scenario loader validates `[provider]` through this crate, so these
//! bounds apply to every scenario; they are public so that it can hold its own keys to the same.
//! Files are read with `capsize_files::read_regular_file`, each within its limit here.

use std::time::Duration;

/// Seconds in one year of 365 days.
const YEAR_SECS: u64 = 365 * 24 * 60 * 60;

/// The longest duration any setting may ask for, and the longest any latency draw becomes:
/// one year (365 days).
pub const MAX_DURATION: Duration = Duration::from_secs(YEAR_SECS);

/// [`MAX_DURATION`] in seconds (31,536,000): the bound of `retry_after`.
pub const MAX_DURATION_SECS: f64 = YEAR_SECS as f64;

/// [`MAX_DURATION`] in milliseconds (31,536,000,000): the bound of every latency in ms.
pub const MAX_DURATION_MS: f64 = MAX_DURATION_SECS * 1000.0;

/// The largest `rpm` or `tpm`: 1e12 per minute. Every integer up to it (and well beyond, to
/// 2^53) is exact in an `f64`, so token counts compared with it never round.
pub const MAX_PER_MINUTE: f64 = 1e12;

/// The largest `max_in_flight`: one million servers (the model keeps one `Duration` per server
/// in use, 16 MiB at most).
pub const MAX_IN_FLIGHT: u32 = 1_000_000;

/// The largest file the mock reads (a scenario, an empirical latency file): 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The largest request body the HTTP server reads by default: 1 MiB (`--max-body-bytes`
/// changes it, within [`BODY_LIMIT_RANGE`]). A larger one is answered 413 without reading past
/// the limit.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The body limits `--max-body-bytes` accepts: 1 KiB to 1 GiB.
pub const BODY_LIMIT_RANGE: std::ops::RangeInclusive<usize> = 1024..=1024 * 1024 * 1024;

/// The largest request head (request line and headers) the HTTP server reads: 64 KiB. A larger
/// one is answered 431 by the HTTP layer.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A number as a person reads it in an error: `1e308` and `1e-300`, not hundreds of digits;
/// ordinary numbers as written (`0.5`, `600`).
pub fn show(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-4..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `ms` clamped to `[0, MAX_DURATION_MS]`. NaN becomes the bound: a draw that is not a number
/// came from an overflow, so it is treated as the slowest answer, never as an instant one.
pub fn clamp_ms(ms: f64) -> f64 {
    if ms.is_nan() {
        MAX_DURATION_MS
    } else {
        ms.clamp(0.0, MAX_DURATION_MS)
    }
}

/// `ms` milliseconds as a `Duration`, clamped to `[0, MAX_DURATION]` (NaN: [`MAX_DURATION`]).
pub fn duration_from_ms(ms: f64) -> Duration {
    Duration::try_from_secs_f64(clamp_ms(ms) / 1000.0).unwrap_or(MAX_DURATION)
}

/// `secs` seconds as a `Duration`, clamped to `[0, MAX_DURATION]` (NaN: [`MAX_DURATION`]).
pub fn duration_from_secs(secs: f64) -> Duration {
    duration_from_ms(secs * 1000.0)
}

/// `secs` seconds as a `Duration`, saturating: `Duration::MAX` above it, zero for NaN and
/// anything not above 0.
fn saturating_secs(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// `d` times `factor`, saturating (see [`divide_duration`]). Never panics, unlike
/// `Duration::mul_f64`.
pub fn scale_duration(d: Duration, factor: f64) -> Duration {
    saturating_secs(d.as_secs_f64() * factor)
}

/// `d` divided by `divisor`, saturating: `Duration::MAX` if the quotient overflows, zero if it
/// is not a positive number. Never panics, unlike `Duration::div_f64`.
pub fn divide_duration(d: Duration, divisor: f64) -> Duration {
    saturating_secs(d.as_secs_f64() / divisor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_one_year_and_agree() {
        assert_eq!(MAX_DURATION, Duration::from_secs(31_536_000));
        assert_eq!(MAX_DURATION_SECS, 31_536_000.0);
        assert_eq!(MAX_DURATION_MS, 31_536_000_000.0);
        assert_eq!(duration_from_ms(MAX_DURATION_MS), MAX_DURATION);
    }

    #[test]
    fn conversions_clamp_and_never_panic() {
        assert_eq!(duration_from_ms(1500.0), Duration::from_millis(1500));
        assert_eq!(duration_from_ms(-3.0), Duration::ZERO);
        assert_eq!(duration_from_ms(f64::NEG_INFINITY), Duration::ZERO);
        assert_eq!(duration_from_ms(1e308), MAX_DURATION);
        assert_eq!(duration_from_ms(f64::INFINITY), MAX_DURATION);
        assert_eq!(duration_from_ms(f64::NAN), MAX_DURATION);
        assert_eq!(duration_from_secs(2.5), Duration::from_millis(2500));
        assert_eq!(duration_from_secs(1e300), MAX_DURATION);
        assert_eq!(clamp_ms(f64::NAN), MAX_DURATION_MS);
        assert_eq!(clamp_ms(-0.0), 0.0);
        assert_eq!(
            scale_duration(Duration::from_secs(3), 10.0),
            Duration::from_secs(30)
        );
        assert_eq!(scale_duration(Duration::MAX, 2.0), Duration::MAX);
        assert_eq!(scale_duration(Duration::from_secs(1), 1e300), Duration::MAX);
        assert_eq!(
            scale_duration(Duration::from_secs(1), f64::NAN),
            Duration::ZERO
        );
        assert_eq!(scale_duration(Duration::from_secs(1), -1.0), Duration::ZERO);
        assert_eq!(
            divide_duration(Duration::from_secs(30), 10.0),
            Duration::from_secs(3)
        );
        assert_eq!(
            divide_duration(Duration::from_secs(1), 1e-320),
            Duration::MAX
        );
        assert_eq!(divide_duration(Duration::from_secs(1), 0.0), Duration::MAX);
        assert_eq!(divide_duration(Duration::ZERO, 0.0), Duration::ZERO);
    }
}
