//! The `[provider]` table of a scenario: its raw form (serde, unknown keys refused) and the
//! validated [`ProviderConfig`] the model is built from.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::latency::{Latency, RawLatency};
use crate::limits::{show, MAX_DURATION_SECS, MAX_IN_FLIGHT, MAX_PER_MINUTE};
use crate::phases::{Phase, RawPhase};
use crate::price::{Price, RawPrice};
use crate::tokens::{RawTokens, Tokens, MAX_TOKENS};
use crate::window::WindowKind;

/// The most output tokens a request may ask for when `max_output_tokens` is not set: 32,768,
/// the output limit of OpenAI's GPT-4.1 models (Anthropic's Claude Opus 4 allows 32,000).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 32_768;

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

/// How `error_rate` splits over the three error statuses (relative weights). Without the
/// table the three are equal; in it, a status left out weighs 0.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorMix {
    /// Weight of 500 Internal Server Error.
    #[serde(rename = "500", default)]
    pub s500: f64,
    /// Weight of 503 Service Unavailable.
    #[serde(rename = "503", default)]
    pub s503: f64,
    /// Weight of 529 Overloaded.
    #[serde(rename = "529", default)]
    pub s529: f64,
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

/// Where a provider's clock starts (`clock_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockFrom {
    /// At the run's start (the mock's, over HTTP).
    #[default]
    Start,
    /// At the first request it receives.
    FirstRequest,
}

/// The `[provider]` table as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    /// Requests per minute (absent: unlimited), in [1, [`MAX_PER_MINUTE`]].
    pub rpm: Option<f64>,
    /// Tokens per minute (absent: unlimited), in [1, [`MAX_PER_MINUTE`]].
    pub tpm: Option<f64>,
    /// Input tokens per minute, Anthropic's ITPM (absent: unlimited): a request's prompt.
    pub itpm: Option<f64>,
    /// Output tokens per minute, Anthropic's OTPM (absent: unlimited): charged as a model
    /// call's `max_tokens` at admission, settled to the tokens generated on completion.
    pub otpm: Option<f64>,
    /// How the limits are counted.
    #[serde(default)]
    pub window: WindowKind,
    /// Where the provider's clock starts: its fixed windows' minutes and its phases' times
    /// count from the run's start (`start`, the default) or from the first request it
    /// receives (`first_request`: what a run in virtual time sees, for a client that starts
    /// late, as an agent under `capsize exec` does).
    #[serde(default)]
    pub clock_from: ClockFrom,
    /// Retry-After on 429s (seconds at most [`MAX_DURATION_SECS`], one year).
    pub retry_after: Option<RawRetryAfter>,
    /// Service time.
    pub latency: RawLatency,
    /// Requests served at once, in [1, [`MAX_IN_FLIGHT`]]; beyond it, `overload` applies.
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
    /// Output tokens a model call generates (with `ttft` and `tpot`: a generating provider).
    pub output_tokens: Option<RawTokens>,
    /// Time to first token of a model call.
    pub ttft: Option<RawLatency>,
    /// Time per output token after the first.
    pub tpot: Option<RawLatency>,
    /// The most output tokens a request may ask for (`max_tokens`), in [1, [`MAX_TOKENS`]];
    /// absent: [`DEFAULT_MAX_OUTPUT_TOKENS`]. A request asking for more is answered 400.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// What it bills (absent: nothing is priced).
    #[serde(default)]
    pub price: Option<RawPrice>,
    /// Incidents: stretches of the run with other values of these keys, or an outage.
    #[serde(default)]
    pub phases: Vec<RawPhase>,
}

/// How a generating provider answers a model call: it generates a number of output tokens
/// (at most the request's `max_tokens`, and at most the provider's `max_output_tokens`), the
/// first after `ttft`, each next one `tpot` later.
/// The call's latency is `ttft + (output tokens - 1) x tpot`: the time its last token arrives.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Output tokens generated (before the request's `max_tokens` caps them).
    pub output_tokens: Tokens,
    /// Time to first token, in ms.
    pub ttft: Latency,
    /// Time per output token after the first, in ms.
    pub tpot: Latency,
}

/// A validated provider configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// Requests per minute.
    pub rpm: Option<f64>,
    /// Tokens per minute.
    pub tpm: Option<f64>,
    /// Input tokens per minute.
    pub itpm: Option<f64>,
    /// Output tokens per minute.
    pub otpm: Option<f64>,
    /// How the limits are counted.
    pub window: WindowKind,
    /// Where the provider's clock starts.
    pub clock_from: ClockFrom,
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
    /// How model calls are generated (`None`: a model call is served after `latency`, as
    /// every other call).
    pub generation: Option<Generation>,
    /// The most output tokens a request may ask for, and a generated answer may have: a
    /// `max_tokens` above it is answered 400 (over HTTP); an answer is cut at it.
    pub max_output_tokens: u64,
    /// What it bills (`None`: nothing is priced).
    pub price: Option<Price>,
    /// Incidents, in time order (empty: the provider never changes).
    pub phases: Vec<Phase>,
}

impl ProviderConfig {
    /// Whether it bills anything: a `price` of its own or of a phase.
    pub fn priced(&self) -> bool {
        self.price.is_some() || self.phases.iter().any(|p| p.config.price.is_some())
    }

    /// A provider with no limits, no errors and no capacity bound, serving at `latency`:
    /// what answers calls that go to no rate-limited provider (a local tool).
    pub fn unlimited(latency: Latency) -> Self {
        ProviderConfig {
            rpm: None,
            tpm: None,
            itpm: None,
            otpm: None,
            window: WindowKind::default(),
            clock_from: ClockFrom::default(),
            retry_after: RetryAfter::Auto,
            latency,
            max_in_flight: None,
            overload: Overload::Queue,
            error_rate: 0.0,
            error_split: [1.0 / 3.0, 2.0 / 3.0],
            timeout_rate: 0.0,
            generation: None,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            price: None,
            phases: Vec::new(),
        }
    }
}

/// A limit per minute (`rpm`, `tpm`, or a flag standing for one): at least 1, since below one
/// a minute no request could ever be served; at most [`MAX_PER_MINUTE`], above which token
/// counts would no longer be exact. `key` is named in the error as given.
pub fn per_minute(key: &str, x: f64) -> Result<f64, ConfigError> {
    if x.is_finite() && (1.0..=MAX_PER_MINUTE).contains(&x) {
        Ok(x)
    } else {
        Err(ConfigError::new(
            key,
            format!(
                "must be a number in [1, {MAX_PER_MINUTE:e}] (per minute), got {}",
                show(x)
            ),
        ))
    }
}

fn rate(key: &str, v: Option<f64>) -> Result<Option<f64>, ConfigError> {
    v.map(|x| per_minute(&format!("provider.{key}"), x))
        .transpose()
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
    /// Validates the table; `base` is the folder an empirical latency file is read from. The
    /// bounds are those of [`crate::limits`]; an error names the key and the bound.
    pub fn build(&self, base: &Path) -> Result<ProviderConfig, ConfigError> {
        let retry_after = match &self.retry_after {
            None => RetryAfter::Auto,
            Some(RawRetryAfter::Word(w)) if w == "auto" => RetryAfter::Auto,
            Some(RawRetryAfter::Word(w)) if w == "none" => RetryAfter::None,
            Some(RawRetryAfter::Seconds(s))
                if s.is_finite() && (0.0..=MAX_DURATION_SECS).contains(s) =>
            {
                let d = Duration::try_from_secs_f64(*s).map_err(|e| {
                    ConfigError::new("provider.retry_after", format!("{s} seconds: {e}"))
                })?;
                RetryAfter::Fixed(d)
            }
            Some(RawRetryAfter::Seconds(s)) => {
                return Err(ConfigError::new(
                    "provider.retry_after",
                    format!(
                        "must be \"auto\", \"none\" or seconds in [0, {MAX_DURATION_SECS}] \
                         (one year), got {s}"
                    ),
                ))
            }
            Some(RawRetryAfter::Word(w)) => {
                return Err(ConfigError::new(
                    "provider.retry_after",
                    format!(
                        "must be \"auto\", \"none\" or seconds in [0, {MAX_DURATION_SECS}] \
                         (one year), got {w:?}"
                    ),
                ))
            }
        };
        match self.max_in_flight {
            Some(n) if !(1..=MAX_IN_FLIGHT).contains(&n) => {
                return Err(ConfigError::new(
                    "provider.max_in_flight",
                    format!("must be in [1, {MAX_IN_FLIGHT}] (omit it for no limit), got {n}"),
                ))
            }
            _ => {}
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
        let weights = [m.s500, m.s503, m.s529];
        let top = weights.iter().copied().fold(0.0, f64::max);
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) || top <= 0.0 {
            return Err(ConfigError::new(
                "provider.error_mix",
                format!(
                    "weights must be finite numbers >= 0, not all 0, got 500 = {}, 503 = {}, \
                     529 = {}",
                    m.s500, m.s503, m.s529
                ),
            ));
        }
        // Relative to the largest weight, so the sum stays finite however large they are.
        let [w500, w503, w529] = weights.map(|w| w / top);
        let total = w500 + w503 + w529;
        Ok(ProviderConfig {
            rpm: rate("rpm", self.rpm)?,
            tpm: rate("tpm", self.tpm)?,
            itpm: rate("itpm", self.itpm)?,
            otpm: rate("otpm", self.otpm)?,
            window: self.window,
            clock_from: self.clock_from,
            retry_after,
            latency: self.latency.build("provider.latency", base)?,
            max_in_flight: self.max_in_flight,
            overload: self.overload,
            error_rate,
            error_split: [w500 / total, (w500 + w503) / total],
            timeout_rate,
            generation: self.generation(base)?,
            max_output_tokens: self.max_output_tokens()?,
            price: self.price.map(|p| p.build("provider.price")).transpose()?,
            phases: crate::phases::build(self, base)?,
        })
    }

    /// `max_output_tokens`, or its default.
    fn max_output_tokens(&self) -> Result<u64, ConfigError> {
        match self.max_output_tokens {
            None => Ok(DEFAULT_MAX_OUTPUT_TOKENS),
            Some(n) if (1..=MAX_TOKENS).contains(&n) => Ok(n),
            Some(n) => Err(ConfigError::new(
                "provider.max_output_tokens",
                format!("must be a number of tokens in [1, {MAX_TOKENS}], got {n}"),
            )),
        }
    }

    /// `output_tokens`, `ttft` and `tpot`, all three or none.
    fn generation(&self, base: &Path) -> Result<Option<Generation>, ConfigError> {
        match (&self.output_tokens, &self.ttft, &self.tpot) {
            (None, None, None) => Ok(None),
            (Some(out), Some(ttft), Some(tpot)) => Ok(Some(Generation {
                output_tokens: out.build("provider.output_tokens")?,
                ttft: ttft.build("provider.ttft", base)?,
                tpot: tpot.build("provider.tpot", base)?,
            })),
            (out, ttft, tpot) => {
                let missing: Vec<&str> = [
                    ("output_tokens", out.is_none()),
                    ("ttft", ttft.is_none()),
                    ("tpot", tpot.is_none()),
                ]
                .into_iter()
                .filter_map(|(k, m)| m.then_some(k))
                .collect();
                Err(ConfigError::new(
                    format!("provider.{}", missing[0]),
                    format!(
                        "missing: a generating provider needs output_tokens, ttft and tpot \
                         together (a model call's latency is ttft + (output tokens - 1) x \
                         tpot); add {}, or remove the others",
                        missing.join(" and ")
                    ),
                ))
            }
        }
    }
}
