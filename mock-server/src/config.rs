//! The `[provider]` table of a scenario: its raw form (serde, unknown keys refused) and the
//! validated [`ProviderConfig`] the model is built from.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::latency::{Latency, RawLatency};
use crate::window::WindowKind;

/// What a 429 says about when to retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryAfter {
    /// The time until the request would fit.
    Auto,
    /// Always this long.
    Fixed(Duration),
    /// No Retry-After header.
    None,
}

/// What happens to a request beyond `max_in_flight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Overload {
    /// It waits for a free slot (its latency grows).
    #[default]
    #[serde(rename = "queue")]
    Queue,
    /// It is refused with a 429.
    #[serde(rename = "429")]
    Reject429,
    /// It is refused with a 503.
    #[serde(rename = "503")]
    Reject503,
}

/// `retry_after` as written: `"auto"`, `"none"`, or a number of seconds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RawRetryAfter {
    /// `"auto"` or `"none"`.
    Word(String),
    /// Seconds.
    Seconds(f64),
}

/// How `error_rate` splits over the three error statuses (relative weights).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorMix {
    /// Weight of 500 Internal Server Error.
    #[serde(rename = "500", default = "one")]
    pub s500: f64,
    /// Weight of 503 Service Unavailable.
    #[serde(rename = "503", default = "one")]
    pub s503: f64,
    /// Weight of 529 Overloaded.
    #[serde(rename = "529", default = "one")]
    pub s529: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for ErrorMix {
    fn default() -> Self {
        ErrorMix {
            s500: 1.0,
            s503: 1.0,
            s529: 1.0,
        }
    }
}

/// The `[provider]` table as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    /// Requests per minute (absent: unlimited).
    pub rpm: Option<f64>,
    /// Tokens per minute (absent: unlimited).
    pub tpm: Option<f64>,
    /// How the limits are counted.
    #[serde(default)]
    pub window: WindowKind,
    /// Retry-After on 429s.
    pub retry_after: Option<RawRetryAfter>,
    /// Service time.
    pub latency: RawLatency,
    /// Requests served at once; beyond it, `overload` applies.
    pub max_in_flight: Option<u32>,
    /// What happens beyond `max_in_flight`.
    #[serde(default)]
    pub overload: Overload,
    /// Share of accepted requests that fail with 500/503/529.
    #[serde(default)]
    pub error_rate: f64,
    /// How errors split over the statuses.
    #[serde(default)]
    pub error_mix: ErrorMix,
    /// Share of accepted requests never answered (the client's timeout ends them).
    #[serde(default)]
    pub timeout_rate: f64,
}

/// A validated provider configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// Requests per minute.
    pub rpm: Option<f64>,
    /// Tokens per minute.
    pub tpm: Option<f64>,
    /// How the limits are counted.
    pub window: WindowKind,
    /// Retry-After on 429s.
    pub retry_after: RetryAfter,
    /// Service time, in ms.
    pub latency: Latency,
    /// Requests served at once.
    pub max_in_flight: Option<u32>,
    /// Beyond `max_in_flight`.
    pub overload: Overload,
    /// Share of accepted requests failing.
    pub error_rate: f64,
    /// Cumulative shares of 500, 503 (529 takes the rest).
    pub error_split: [f64; 2],
    /// Share of accepted requests never answered.
    pub timeout_rate: f64,
}

fn rate(key: &str, v: Option<f64>) -> Result<Option<f64>, ConfigError> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => Err(ConfigError::new(
            format!("provider.{key}"),
            format!("must be a positive number, got {x}"),
        )),
        // Below one a minute, no request could ever be served.
        Some(x) if x < 1.0 => Err(ConfigError::new(
            format!("provider.{key}"),
            format!("must be at least 1 (per minute), got {x}"),
        )),
        v => Ok(v),
    }
}

fn share(key: &str, v: f64) -> Result<f64, ConfigError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(ConfigError::new(
            format!("provider.{key}"),
            format!("must be in [0, 1], got {v}"),
        ))
    }
}

impl RawProvider {
    /// Validates the table; `base` is the folder an empirical latency file is read from.
    pub fn build(&self, base: &Path) -> Result<ProviderConfig, ConfigError> {
        let retry_after = match &self.retry_after {
            None => RetryAfter::Auto,
            Some(RawRetryAfter::Word(w)) if w == "auto" => RetryAfter::Auto,
            Some(RawRetryAfter::Word(w)) if w == "none" => RetryAfter::None,
            Some(RawRetryAfter::Seconds(s)) if s.is_finite() && *s >= 0.0 => {
                RetryAfter::Fixed(Duration::from_secs_f64(*s))
            }
            Some(other) => {
                return Err(ConfigError::new(
                    "provider.retry_after",
                    format!("must be \"auto\", \"none\" or seconds >= 0, got {other:?}"),
                ))
            }
        };
        if self.max_in_flight == Some(0) {
            return Err(ConfigError::new(
                "provider.max_in_flight",
                "must be at least 1 (omit it for no limit)",
            ));
        }
        let error_rate = share("error_rate", self.error_rate)?;
        let timeout_rate = share("timeout_rate", self.timeout_rate)?;
        if error_rate + timeout_rate > 1.0 {
            return Err(ConfigError::new(
                "provider.timeout_rate",
                "error_rate + timeout_rate must be at most 1",
            ));
        }
        let m = self.error_mix;
        let total = m.s500 + m.s503 + m.s529;
        if [m.s500, m.s503, m.s529]
            .iter()
            .any(|w| !(w.is_finite() && *w >= 0.0))
            || total <= 0.0
        {
            return Err(ConfigError::new(
                "provider.error_mix",
                "weights must be >= 0 and not all 0",
            ));
        }
        Ok(ProviderConfig {
            rpm: rate("rpm", self.rpm)?,
            tpm: rate("tpm", self.tpm)?,
            window: self.window,
            retry_after,
            latency: self.latency.build("provider.latency", base)?,
            max_in_flight: self.max_in_flight,
            overload: self.overload,
            error_rate,
            error_split: [m.s500 / total, (m.s500 + m.s503) / total],
            timeout_rate,
        })
    }
}
