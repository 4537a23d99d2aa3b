//! Service-time distributions, in milliseconds: the raw scenario form (serde) and the validated,
//! sampleable form. Every sampler takes the caller's RNG, so a seeded model repeats exactly.

use std::path::Path;

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp1, StandardNormal};
use serde::Deserialize;

use crate::error::ConfigError;
use crate::limits::{clamp_ms, MAX_DURATION_MS, MAX_FILE_BYTES};
use capsize_files::read_regular_file;

/// z-score of the 95th percentile of a standard normal.
pub(crate) const Z95: f64 = 1.644_853_626_951_472_2;

/// A latency distribution as written in a scenario: `latency = { dist = "uniform", ... }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum RawLatency {
    /// Always `ms`.
    Constant {
        /// Milliseconds.
        ms: f64,
    },
    /// Uniform in `[min_ms, max_ms]`.
    Uniform {
        /// Lower bound.
        min_ms: f64,
        /// Upper bound.
        max_ms: f64,
    },
    /// Normal, truncated at 0 (negative draws are drawn again).
    Normal {
        /// Mean.
        mean_ms: f64,
        /// Standard deviation.
        sd_ms: f64,
    },
    /// Log-normal, fitted exactly to `mean_ms` and `p95_ms`, or given as `mu` and `sigma` (of ln ms).
    Lognormal {
        /// Mean.
        mean_ms: Option<f64>,
        /// 95th percentile.
        p95_ms: Option<f64>,
        /// Mean of ln(ms).
        mu: Option<f64>,
        /// Standard deviation of ln(ms).
        sigma: Option<f64>,
    },
    /// Exponential with mean `mean_ms`.
    Exponential {
        /// Mean.
        mean_ms: f64,
    },
    /// Pareto with minimum `scale_ms` and tail index `shape`.
    Pareto {
        /// Minimum.
        scale_ms: f64,
        /// Tail index.
        shape: f64,
    },
    /// Drawn from a list of observed values, or from a file of them (one a row, a header allowed).
    Empirical {
        /// The values.
        values_ms: Option<Vec<f64>>,
        /// A file of values, relative to the scenario file.
        file: Option<String>,
    },
    /// A weighted mixture of distributions.
    Mixture {
        /// The components.
        components: Vec<RawComponent>,
    },
}

/// One component of a mixture: a weight and a distribution.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RawComponent {
    /// Relative weight (> 0).
    pub weight: f64,
    /// The distribution.
    #[serde(flatten)]
    pub dist: RawLatency,
}

/// A validated latency distribution, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Latency {
    /// Always this many ms.
    Constant(f64),
    /// Uniform between the two bounds.
    Uniform(f64, f64),
    /// Normal (mean, sd), truncated at 0.
    Normal(f64, f64),
    /// Log-normal: (mu, sigma) of ln(ms).
    LogNormal(f64, f64),
    /// Exponential with this mean.
    Exponential(f64),
    /// Pareto (scale, shape).
    Pareto(f64, f64),
    /// Uniform draw from observed values.
    Empirical(Vec<f64>),
    /// Cumulative weights (ending at 1) and components.
    Mixture(Vec<(f64, Latency)>),
}

/// A latency in ms: finite, >= 0 and at most [`MAX_DURATION_MS`] (one year).
fn duration_ms(key: &str, name: &str, v: f64) -> Result<f64, ConfigError> {
    if v.is_finite() && (0.0..=MAX_DURATION_MS).contains(&v) {
        Ok(v)
    } else {
        Err(ConfigError::new(
            format!("{key}.{name}"),
            format!("must be a number of ms in [0, {MAX_DURATION_MS}] (one year), got {v}"),
        ))
    }
}

/// A latency in ms as [`duration_ms`], and above 0.
fn positive_ms(key: &str, name: &str, v: f64) -> Result<f64, ConfigError> {
    let v = duration_ms(key, name, v)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(ConfigError::new(
            format!("{key}.{name}"),
            format!("must be above 0 ms, got {v}"),
        ))
    }
}

/// A finite number above 0 (a shape, a weight).
fn positive(key: &str, name: &str, v: f64) -> Result<f64, ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(ConfigError::new(
            format!("{key}.{name}"),
            format!("must be a positive number, got {v}"),
        ))
    }
}

/// The largest `mu` of a log-normal: ln([`MAX_DURATION_MS`]), a median of one year.
fn max_mu() -> f64 {
    MAX_DURATION_MS.ln()
}

/// `mu` and `sigma` of the log-normal whose mean and 95th percentile are the given values.
pub fn lognormal_fit(mean: f64, p95: f64) -> Option<(f64, f64)> {
    // mean = exp(mu + sigma²/2), p95 = exp(mu + z·sigma)  ⇒  sigma²/2 − z·sigma + ln(p95/mean) = 0.
    let r = (p95 / mean).ln();
    let disc = Z95 * Z95 - 2.0 * r;
    if !(r > 0.0 && disc >= 0.0) {
        return None;
    }
    let sigma = Z95 - disc.sqrt();
    Some((mean.ln() - sigma * sigma / 2.0, sigma))
}

fn read_values(key: &str, file: &str, base: &Path) -> Result<Vec<f64>, ConfigError> {
    let path = base.join(file);
    let key = format!("{key}.file");
    let bytes = read_regular_file(&path, MAX_FILE_BYTES).map_err(|e| {
        ConfigError::new(key.clone(), format!("cannot read {}: {e}", path.display()))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        ConfigError::new(
            key.clone(),
            format!(
                "cannot read {}: not UTF-8 (at byte {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    let mut values = Vec::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    for (i, line) in text.lines().enumerate() {
        let field = line.split(',').next().unwrap_or("").trim();
        if field.is_empty() {
            continue;
        }
        match field.parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..=MAX_DURATION_MS).contains(&v) => values.push(v),
            Ok(v) => {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "{}:{}: latency must be in [0, {MAX_DURATION_MS}] ms (one year), got {v}",
                        path.display(),
                        i + 1
                    ),
                ))
            }
            // A header is allowed on the first row only.
            Err(_) if i == 0 => {}
            Err(_) => {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "{}:{}: not a number: {:?}",
                        path.display(),
                        i + 1,
                        clip(field)
                    ),
                ))
            }
        }
    }
    Ok(values)
}

/// At most the first 40 characters of `s`, for quoting input in an error.
fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

impl RawLatency {
    /// Validates the distribution. `key` names it in errors (`provider.latency`); `base` is the
    /// folder relative to which an empirical `file` is read.
    ///
    /// Every parameter in ms (and every empirical value) must be finite, >= 0 and at most
    /// [`MAX_DURATION_MS`] (one year); a log-normal's `mu` at most ln([`MAX_DURATION_MS`]) (a
    /// median of one year); shapes, `sigma` and weights finite. An empirical `file` must be a
    /// regular file of at most [`MAX_FILE_BYTES`]. Draws are clamped to the same bound (see
    /// [`Latency::sample`]), so no distribution that builds can draw an unusable latency.
    pub fn build(&self, key: &str, base: &Path) -> Result<Latency, ConfigError> {
        Ok(match self {
            RawLatency::Constant { ms } => Latency::Constant(duration_ms(key, "ms", *ms)?),
            RawLatency::Uniform { min_ms, max_ms } => {
                let lo = duration_ms(key, "min_ms", *min_ms)?;
                let hi = duration_ms(key, "max_ms", *max_ms)?;
                if hi < lo {
                    return Err(ConfigError::new(
                        format!("{key}.max_ms"),
                        format!("must be at least min_ms ({lo}), got {hi}"),
                    ));
                }
                Latency::Uniform(lo, hi)
            }
            RawLatency::Normal { mean_ms, sd_ms } => {
                let mean = positive_ms(key, "mean_ms", *mean_ms)?;
                let sd = duration_ms(key, "sd_ms", *sd_ms)?;
                Latency::Normal(mean, sd)
            }
            RawLatency::Lognormal {
                mean_ms,
                p95_ms,
                mu,
                sigma,
            } => lognormal(key, (*mean_ms, *p95_ms), (*mu, *sigma))?,
            RawLatency::Exponential { mean_ms } => {
                let mean = positive_ms(key, "mean_ms", *mean_ms)?;
                Latency::Exponential(mean)
            }
            RawLatency::Pareto { scale_ms, shape } => {
                let scale = positive_ms(key, "scale_ms", *scale_ms)?;
                let shape = positive(key, "shape", *shape)?;
                Latency::Pareto(scale, shape)
            }
            RawLatency::Empirical { values_ms, file } => empirical(key, values_ms, file, base)?,
            RawLatency::Mixture { components } => mixture(key, components, base)?,
        })
    }
}

/// A log-normal from its mean and p95, or from `mu` and `sigma` (exactly one pair given).
fn lognormal(
    key: &str,
    (mean_ms, p95_ms): (Option<f64>, Option<f64>),
    (mu, sigma): (Option<f64>, Option<f64>),
) -> Result<Latency, ConfigError> {
    let (mu, sigma) = match (mean_ms, p95_ms, mu, sigma) {
        (Some(mean), Some(p95), None, None) => {
            let mean = positive_ms(key, "mean_ms", mean)?;
            let p95 = positive_ms(key, "p95_ms", p95)?;
            lognormal_fit(mean, p95).ok_or_else(|| {
                ConfigError::new(
                    format!("{key}.p95_ms"),
                    format!(
                        "no log-normal has mean {mean} and p95 {p95}: p95 must be above \
                         the mean and at most {:.2} times it",
                        (Z95 * Z95 / 2.0).exp()
                    ),
                )
            })?
        }
        (None, None, Some(mu), Some(sigma)) => {
            if !(mu.is_finite() && mu <= max_mu()) {
                return Err(ConfigError::new(
                    format!("{key}.mu"),
                    format!(
                        "must be a finite number at most ln({MAX_DURATION_MS}) = {:.4} \
                         (a median of at most one year), got {mu}",
                        max_mu()
                    ),
                ));
            }
            if !(sigma.is_finite() && sigma >= 0.0) {
                return Err(ConfigError::new(
                    format!("{key}.sigma"),
                    format!("must be a finite number >= 0, got {sigma}"),
                ));
            }
            (mu, sigma)
        }
        _ => {
            return Err(ConfigError::new(
                key,
                "lognormal takes either mean_ms and p95_ms, or mu and sigma",
            ))
        }
    };
    Ok(Latency::LogNormal(mu, sigma))
}

/// Observed latencies, inline (`values_ms`) or from a file (exactly one given).
fn empirical(
    key: &str,
    values_ms: &Option<Vec<f64>>,
    file: &Option<String>,
    base: &Path,
) -> Result<Latency, ConfigError> {
    let values = match (values_ms, file) {
        (Some(v), None) => {
            for (i, x) in v.iter().enumerate() {
                duration_ms(key, &format!("values_ms[{i}]"), *x)?;
            }
            v.clone()
        }
        (None, Some(f)) => read_values(key, f, base)?,
        _ => {
            return Err(ConfigError::new(
                key,
                "empirical takes either values_ms or file",
            ))
        }
    };
    if values.is_empty() {
        return Err(ConfigError::new(key, "empirical needs at least one value"));
    }
    Ok(Latency::Empirical(values))
}

/// A weighted mixture: each component built, the weights made cumulative shares.
fn mixture(key: &str, components: &[RawComponent], base: &Path) -> Result<Latency, ConfigError> {
    if components.is_empty() {
        return Err(ConfigError::new(
            format!("{key}.components"),
            "needs at least one component",
        ));
    }
    let mut built = Vec::with_capacity(components.len());
    for (i, c) in components.iter().enumerate() {
        let ck = format!("{key}.components[{i}]");
        built.push((positive(&ck, "weight", c.weight)?, c.dist.build(&ck, base)?));
    }
    // Relative to the largest weight, so the sum stays finite however large they are.
    let top = built.iter().map(|(w, _)| *w).fold(0.0, f64::max);
    let total: f64 = built.iter().map(|(w, _)| w / top).sum();
    let mut cum = 0.0;
    let mut cumulative = Vec::with_capacity(built.len());
    for (w, d) in built {
        cum += w / top;
        cumulative.push((cum / total, d));
    }
    Ok(Latency::Mixture(cumulative))
}

impl Latency {
    /// Draws one latency in milliseconds, always in `[0, MAX_DURATION_MS]`: a draw beyond one
    /// year (a heavy tail, a log-normal with a large `sigma`) is clamped to it, and a draw that
    /// is not a number counts as the bound (see [`clamp_ms`]). Never panics, whatever the
    /// parameters (even those [`RawLatency::build`] refuses): an empty empirical list or mixture
    /// draws 0.
    pub fn sample(&self, rng: &mut (impl Rng + ?Sized)) -> f64 {
        clamp_ms(self.draw(rng))
    }

    fn draw(&self, rng: &mut (impl Rng + ?Sized)) -> f64 {
        match self {
            Latency::Constant(ms) => *ms,
            Latency::Uniform(lo, hi) => {
                let (lo, hi) = (clamp_ms(*lo), clamp_ms(*hi));
                if hi > lo {
                    rng.random_range(lo..=hi)
                } else {
                    lo
                }
            }
            Latency::Normal(mean, sd) => {
                // Truncated at 0: draw again (the mean is positive, so this ends quickly).
                for _ in 0..64 {
                    let z: f64 = StandardNormal.sample(rng);
                    let v = mean + sd * z;
                    if v >= 0.0 {
                        return v;
                    }
                }
                0.0
            }
            Latency::LogNormal(mu, sigma) => {
                let z: f64 = StandardNormal.sample(rng);
                (mu + sigma * z).exp()
            }
            Latency::Exponential(mean) => {
                let e: f64 = Exp1.sample(rng);
                mean * e
            }
            Latency::Pareto(scale, shape) => {
                // Inverse CDF with u in (0, 1].
                let u = 1.0 - rng.random::<f64>();
                scale * u.powf(-1.0 / shape)
            }
            Latency::Empirical(values) => {
                if values.is_empty() {
                    return 0.0;
                }
                values[rng.random_range(0..values.len())]
            }
            Latency::Mixture(components) => {
                let u: f64 = rng.random();
                let chosen = components
                    .iter()
                    .find(|(cum, _)| u < *cum)
                    .or(components.last());
                match chosen {
                    Some((_, d)) => d.sample(rng),
                    None => 0.0,
                }
            }
        }
    }

    /// The distribution's mean in milliseconds (closed form; for reports and tests). It is the
    /// mean of the distribution as given, before [`Latency::sample`]'s clamp to one year, so a
    /// heavy tail can make it larger than any draw (or infinite).
    pub fn mean(&self) -> f64 {
        match self {
            Latency::Constant(ms) => *ms,
            Latency::Uniform(lo, hi) => (lo + hi) / 2.0,
            // The mean of the truncated normal: mu + sd·φ(α)/(1−Φ(α)), α = −mu/sd.
            Latency::Normal(mu, sd) => {
                if *sd == 0.0 {
                    return *mu;
                }
                let a = -mu / sd;
                let pdf = (-a * a / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
                mu + sd * pdf / (1.0 - std_normal_cdf(a))
            }
            Latency::LogNormal(mu, sigma) => (mu + sigma * sigma / 2.0).exp(),
            Latency::Exponential(mean) => *mean,
            Latency::Pareto(scale, shape) if *shape > 1.0 => shape * scale / (shape - 1.0),
            Latency::Pareto(..) => f64::INFINITY,
            Latency::Empirical(v) => v.iter().sum::<f64>() / v.len() as f64,
            Latency::Mixture(c) => {
                let mut prev = 0.0;
                c.iter()
                    .map(|(cum, d)| {
                        let w = cum - prev;
                        prev = *cum;
                        w * d.mean()
                    })
                    .sum()
            }
        }
    }
}

/// Φ(x), the standard normal CDF (Abramowitz–Stegun 7.1.26 erf, |error| < 1.5e-7).
fn std_normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}
