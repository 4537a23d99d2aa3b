//! Token-count distributions: how many output tokens a model call generates. The raw scenario
//! form (serde) and the validated, sampleable form; sampling is [`Latency`]'s, on numbers this
//! module has already checked, so every message here speaks of tokens.

use rand::Rng;
use serde::Deserialize;

use crate::error::ConfigError;
use crate::latency::{lognormal_fit, Latency};

/// The most tokens one call may generate: far above any model's output limit, small enough
/// that a count times a time per token stays exact.
pub const MAX_TOKENS: u64 = 10_000_000;

/// A token count as written: `300`, or a distribution table.
pub type RawTokens = FixedOr<RawTokenDist>;

/// A count as written in a scenario: a whole number (`300`), or a distribution table `D`
/// (`{ dist = ..., ... }`). A negative or fractional number, or a value of another type, is
/// refused in one line saying what is expected, not "did not match any variant".
#[derive(Debug, Clone, PartialEq)]
pub enum FixedOr<D> {
    /// Always this many.
    Fixed(u64),
    /// Drawn from a distribution.
    Dist(D),
}

impl<'de, D: Deserialize<'de>> Deserialize<'de> for FixedOr<D> {
    fn deserialize<De: serde::Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        use serde::de::{self, Visitor};
        struct Expect<D>(std::marker::PhantomData<D>);
        impl<'de, D: Deserialize<'de>> Visitor<'de> for Expect<D> {
            type Value = FixedOr<D>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a whole number, 0 or more, or a table { dist = ... }")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(FixedOr::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map(FixedOr::Fixed)
                    .map_err(|_| E::custom(format!("must be a whole number, 0 or more, got {v}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Err(E::custom(format!(
                    "must be a whole number, 0 or more, got {v}"
                )))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                D::deserialize(de::value::MapAccessDeserializer::new(map)).map(FixedOr::Dist)
            }
        }
        d.deserialize_any(Expect(std::marker::PhantomData))
    }
}

/// A token-count distribution: `{ dist = "uniform", min = 50, max = 500 }`,
/// `{ dist = "lognormal", mean = 300, p95 = 900 }` or `{ dist = "empirical", values = [...] }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum RawTokenDist {
    /// Uniform in `[min, max]`, rounded.
    Uniform {
        /// Fewest.
        min: f64,
        /// Most.
        max: f64,
    },
    /// Log-normal fitted to its mean and 95th percentile, rounded.
    Lognormal {
        /// Mean.
        mean: f64,
        /// 95th percentile (above the mean).
        p95: f64,
    },
    /// Drawn uniformly from observed counts.
    Empirical {
        /// The counts.
        values: Vec<f64>,
    },
}

/// A validated token-count distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Tokens(Latency);

/// `v` as a count of tokens: finite, in `[1, MAX_TOKENS]`.
fn count(key: &str, v: f64) -> Result<f64, ConfigError> {
    if v.is_finite() && (1.0..=MAX_TOKENS as f64).contains(&v) {
        Ok(v)
    } else {
        Err(ConfigError::new(
            key,
            format!("must be a number of tokens in [1, {MAX_TOKENS}], got {v}"),
        ))
    }
}

impl RawTokens {
    /// Validates it; `key` is its scenario path, named in errors (e.g.
    /// `provider.output_tokens.p95`).
    pub fn build(&self, key: &str) -> Result<Tokens, ConfigError> {
        let dist = match self {
            RawTokens::Fixed(n) => Latency::Constant(count(key, *n as f64)?),
            RawTokens::Dist(RawTokenDist::Uniform { min, max }) => {
                let lo = count(&format!("{key}.min"), *min)?;
                let hi = count(&format!("{key}.max"), *max)?;
                if hi < lo {
                    return Err(ConfigError::new(
                        format!("{key}.max"),
                        format!("must be at least min ({lo}), got {hi}"),
                    ));
                }
                Latency::Uniform(lo, hi)
            }
            RawTokens::Dist(RawTokenDist::Lognormal { mean, p95 }) => {
                let mean = count(&format!("{key}.mean"), *mean)?;
                let p95 = count(&format!("{key}.p95"), *p95)?;
                let (mu, sigma) = lognormal_fit(mean, p95).ok_or_else(|| {
                    ConfigError::new(
                        format!("{key}.p95"),
                        format!(
                            "a log-normal with mean {mean} needs a p95 above the mean and below \
                             about 3.9 x the mean, got {p95}"
                        ),
                    )
                })?;
                Latency::LogNormal(mu, sigma)
            }
            RawTokens::Dist(RawTokenDist::Empirical { values }) => {
                if values.is_empty() {
                    return Err(ConfigError::new(
                        format!("{key}.values"),
                        "needs at least one count",
                    ));
                }
                let checked = values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| count(&format!("{key}.values[{i}]"), *v))
                    .collect::<Result<Vec<f64>, _>>()?;
                Latency::Empirical(checked)
            }
        };
        Ok(Tokens(dist))
    }
}

impl Tokens {
    /// Always `n` tokens (`n` clamped to `[1, MAX_TOKENS]`).
    pub fn fixed(n: u64) -> Tokens {
        Tokens(Latency::Constant(n.clamp(1, MAX_TOKENS) as f64))
    }

    /// One draw, rounded to a whole count in `[1, MAX_TOKENS]`.
    pub fn sample(&self, rng: &mut (impl Rng + ?Sized)) -> u64 {
        let v = self.0.sample(rng).round();
        if v.is_finite() {
            (v as u64).clamp(1, MAX_TOKENS)
        } else {
            MAX_TOKENS
        }
    }

    /// The distribution's mean (before rounding).
    pub fn mean(&self) -> f64 {
        self.0.mean()
    }

    /// The distribution in its latency form (for `/config`: the same shapes, in tokens).
    pub fn as_latency(&self) -> &Latency {
        &self.0
    }
}
