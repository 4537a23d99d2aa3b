//! Incidents: a provider that changes during a run. `[[provider.phases]]` entries override any
//! of the provider's keys for a stretch of model time (a latency spike, a 529 storm, a limit cut
//! in half) or take the provider down (`outage`: every request a 503, or never answered).
//!
//! A phase runs from `at_s` until the next phase starts (the last one for ever), or from
//! `from_s` to `to_s`; between phases the provider is its own table again. Phases are in time
//! order and do not overlap. The model picks the phase of each request from its arrival time,
//! so one table drives virtual time, real time and the mock alike.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{ErrorMix, Overload, ProviderConfig, RawProvider, RawRetryAfter};
use crate::error::ConfigError;
use crate::latency::RawLatency;
use crate::limits::{show, MAX_DURATION_SECS};
use crate::tokens::RawTokens;

/// The most phases one provider may have.
pub const MAX_PHASES: usize = 1_000;

/// What an outage does to every request of its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Outage {
    /// Refused at once with a 503 and no Retry-After; not charged.
    #[serde(rename = "503")]
    Unavailable,
    /// Never answered: the client's timeout ends it; not charged.
    #[serde(rename = "no_answer")]
    NoAnswer,
}

/// One `[[provider.phases]]` entry as written: when, and the keys it overrides.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhase {
    /// Starts here (seconds of model time) and lasts until the next phase starts.
    pub at_s: Option<f64>,
    /// Starts here (seconds), with `to_s`.
    pub from_s: Option<f64>,
    /// Ends here (seconds, after `from_s`); the provider's own table applies again.
    pub to_s: Option<f64>,
    /// Every request fails: `"503"` at once, or `"no_answer"`.
    pub outage: Option<Outage>,
    /// Overrides `rpm`.
    pub rpm: Option<f64>,
    /// Overrides `tpm`.
    pub tpm: Option<f64>,
    /// Overrides `itpm`.
    pub itpm: Option<f64>,
    /// Overrides `otpm`.
    pub otpm: Option<f64>,
    /// Overrides `retry_after`.
    pub retry_after: Option<RawRetryAfter>,
    /// Overrides `latency`.
    pub latency: Option<RawLatency>,
    /// Overrides `max_in_flight`.
    pub max_in_flight: Option<u32>,
    /// Overrides `overload`.
    pub overload: Option<Overload>,
    /// Overrides `error_rate`.
    pub error_rate: Option<f64>,
    /// Overrides `error_mix`.
    pub error_mix: Option<ErrorMix>,
    /// Overrides `timeout_rate`.
    pub timeout_rate: Option<f64>,
    /// Overrides `output_tokens` (of a generating provider).
    pub output_tokens: Option<RawTokens>,
    /// Overrides `ttft` (of a generating provider).
    pub ttft: Option<RawLatency>,
    /// Overrides `tpot` (of a generating provider).
    pub tpot: Option<RawLatency>,
    /// Overrides `price` (a model swapped in for the phase).
    pub price: Option<crate::price::RawPrice>,
}

/// A validated phase: when it is in force and the provider during it.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Model time it starts.
    pub from: Duration,
    /// Model time it ends (`None`: when the next phase starts, or never).
    pub to: Option<Duration>,
    /// Every request of the phase fails this way, if set.
    pub outage: Option<Outage>,
    /// The provider during the phase: its own table with the phase's keys over it (no phases).
    pub config: ProviderConfig,
    /// Whether the phase sets `latency`: then it serves every kind of call, even those with a
    /// latency of their own (a spike slows everything).
    pub sets_latency: bool,
    /// Whether the phase sets `error_rate`: then it holds for every kind of call too.
    pub sets_error_rate: bool,
}

impl Phase {
    /// Whether the phase is in force at `now` (given that it has started).
    fn covers(&self, now: Duration) -> bool {
        self.to.is_none_or(|to| now < to)
    }
}

/// What is in force at `now` in `phases` (sorted, not overlapping): the phase, as an index
/// (`None`: the provider's own table), and the instant it began.
pub fn at(phases: &[Phase], now: Duration) -> (Option<usize>, Duration) {
    let started = phases.partition_point(|p| p.from <= now);
    match started.checked_sub(1) {
        None => (None, Duration::ZERO),
        Some(i) if phases[i].covers(now) => (Some(i), phases[i].from),
        Some(i) => (None, phases[i].to.unwrap_or(phases[i].from)),
    }
}

fn seconds(key: &str, s: f64) -> Result<Duration, ConfigError> {
    if !(s.is_finite() && (0.0..=MAX_DURATION_SECS).contains(&s)) {
        return Err(ConfigError::new(
            key,
            format!(
                "must be seconds in [0, {MAX_DURATION_SECS}] (one year), got {}",
                show(s)
            ),
        ));
    }
    Duration::try_from_secs_f64(s).map_err(|e| ConfigError::new(key, format!("{s}: {e}")))
}

impl RawPhase {
    /// The provider's table `base` with this phase's keys over it (and no phases).
    fn over(&self, base: &RawProvider) -> RawProvider {
        let mut p = base.clone();
        p.phases = Vec::new();
        p.rpm = self.rpm.or(base.rpm);
        p.tpm = self.tpm.or(base.tpm);
        p.itpm = self.itpm.or(base.itpm);
        p.otpm = self.otpm.or(base.otpm);
        if let Some(r) = &self.retry_after {
            p.retry_after = Some(r.clone());
        }
        if let Some(l) = &self.latency {
            p.latency = l.clone();
        }
        p.max_in_flight = self.max_in_flight.or(base.max_in_flight);
        p.overload = self.overload.unwrap_or(base.overload);
        p.error_rate = self.error_rate.unwrap_or(base.error_rate);
        p.error_mix = self.error_mix.unwrap_or(base.error_mix);
        p.timeout_rate = self.timeout_rate.unwrap_or(base.timeout_rate);
        p.output_tokens = self
            .output_tokens
            .clone()
            .or_else(|| base.output_tokens.clone());
        p.ttft = self.ttft.clone().or_else(|| base.ttft.clone());
        p.tpot = self.tpot.clone().or_else(|| base.tpot.clone());
        p.price = self.price.or(base.price);
        p
    }

    /// `(from, to)`, named `key` (e.g. `provider.phases[1]`) in an error.
    fn when(&self, key: &str) -> Result<(Duration, Option<Duration>), ConfigError> {
        let from = match (self.at_s, self.from_s, self.to_s) {
            (Some(_), Some(_), _) => return Err(ConfigError::new(
                key,
                "has both at_s and from_s: write at_s (until the next phase) or from_s and to_s",
            )),
            (Some(_), None, Some(_)) => {
                return Err(ConfigError::new(
                    format!("{key}.to_s"),
                    "goes with from_s, not at_s (an at_s phase lasts until the next one)",
                ))
            }
            (None, None, _) => {
                return Err(ConfigError::new(
                    key,
                    "needs a start: at_s (until the next phase) or from_s and to_s",
                ))
            }
            (Some(at), None, None) => seconds(&format!("{key}.at_s"), at)?,
            (None, Some(from), _) => seconds(&format!("{key}.from_s"), from)?,
        };
        let to =
            match (self.from_s, self.to_s) {
                (Some(_), None) => return Err(ConfigError::new(
                    format!("{key}.to_s"),
                    "is missing: a from_s phase ends at to_s (or write at_s for one that lasts)",
                )),
                (_, Some(t)) => {
                    let to = seconds(&format!("{key}.to_s"), t)?;
                    if to <= from {
                        return Err(ConfigError::new(
                            format!("{key}.to_s"),
                            format!(
                                "must be after from_s ({} s), got {} s",
                                show(from.as_secs_f64()),
                                show(t)
                            ),
                        ));
                    }
                    Some(to)
                }
                (None, None) => None,
            };
        Ok((from, to))
    }
}

/// Validates `base`'s phases (named `provider.phases[i]` in errors): each a whole provider once
/// its keys are laid over `base`, in time order, not overlapping.
pub fn build(base: &RawProvider, dir: &Path) -> Result<Vec<Phase>, ConfigError> {
    if base.phases.len() > MAX_PHASES {
        return Err(ConfigError::new(
            "provider.phases",
            format!("at most {MAX_PHASES} phases, got {}", base.phases.len()),
        ));
    }
    let mut phases: Vec<Phase> = Vec::with_capacity(base.phases.len());
    for (i, raw) in base.phases.iter().enumerate() {
        let key = format!("provider.phases[{i}]");
        let (from, to) = raw.when(&key)?;
        let config = raw.over(base).build(dir).map_err(|e| {
            let rest = e.key.strip_prefix("provider").unwrap_or(&e.key);
            ConfigError::new(format!("{key}{rest}"), e.message)
        })?;
        if let Some(prev) = phases.last() {
            let (bound, what) = match prev.to {
                Some(to) => (to, "ends"),
                None => (prev.from, "starts"),
            };
            if from < bound || from == prev.from {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "starts at {} s, before phases[{}] {what} ({} s): phases are in time \
                         order and do not overlap",
                        show(from.as_secs_f64()),
                        i - 1,
                        show(bound.as_secs_f64())
                    ),
                ));
            }
        }
        phases.push(Phase {
            from,
            to,
            outage: raw.outage,
            config,
            sets_latency: raw.latency.is_some(),
            sets_error_rate: raw.error_rate.is_some(),
        });
    }
    Ok(phases)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(from: u64, to: Option<u64>) -> Phase {
        Phase {
            from: Duration::from_secs(from),
            to: to.map(Duration::from_secs),
            outage: None,
            config: ProviderConfig::unlimited(crate::Latency::Constant(0.0)),
            sets_latency: false,
            sets_error_rate: false,
        }
    }

    #[test]
    fn a_request_belongs_to_the_phase_in_force_at_its_arrival() {
        let phases = [phase(10, Some(20)), phase(30, None), phase(40, Some(50))];
        let at = |s: f64| at(&phases, Duration::from_secs_f64(s)).0;
        assert_eq!(at(0.0), None);
        assert_eq!(at(10.0), Some(0));
        assert_eq!(at(19.999), Some(0));
        assert_eq!(at(20.0), None, "a from_s phase ends at to_s");
        assert_eq!(at(30.0), Some(1));
        assert_eq!(
            at(39.0),
            Some(1),
            "an at_s phase lasts until the next starts"
        );
        assert_eq!(at(45.0), Some(2));
        assert_eq!(at(50.0), None);
    }

    #[test]
    fn what_is_in_force_began_at_its_phases_edge() {
        let phases = [phase(10, Some(20)), phase(30, None), phase(40, Some(50))];
        let began = |s: u64| super::at(&phases, Duration::from_secs(s)).1.as_secs();
        assert_eq!(began(5), 0, "the provider's own table, from the start");
        assert_eq!(began(15), 10);
        assert_eq!(
            began(25),
            20,
            "its own table again, from the end of phases[0]"
        );
        assert_eq!(began(35), 30);
        assert_eq!(began(45), 40);
        assert_eq!(began(55), 50);
    }
}
