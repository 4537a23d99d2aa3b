//! Fitting a distribution to observed values: each family capsize can draw from (constant,
//! uniform, normal, log-normal, exponential) is fitted by maximum likelihood, its
//! Kolmogorov–Smirnov distance to the sample is measured, and the closest is kept if it is
//! within [`accept`]; otherwise the empirical distribution is (a grid of quantiles). The choice,
//! its distance and every candidate's are kept, to be written down.

/// z-score of the 95th percentile of a standard normal.
const Z95: f64 = 1.644_853_626_951_472_2;

/// The most quantiles an empirical fit keeps.
pub const GRID: usize = 1000;

/// A distribution fitted to a sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Family {
    /// Always this value.
    Constant(f64),
    /// Uniform between the two.
    Uniform(f64, f64),
    /// Normal (mean, standard deviation).
    Normal(f64, f64),
    /// Log-normal: (mu, sigma) of the value's logarithm.
    LogNormal(f64, f64),
    /// Exponential with this mean.
    Exponential(f64),
    /// The observed values (sorted): all of them, or [`GRID`] evenly spaced quantiles.
    Empirical(Vec<f64>),
}

impl Family {
    /// The family's name as a scenario writes it (`dist = "..."`).
    pub fn name(&self) -> &'static str {
        match self {
            Family::Constant(_) => "constant",
            Family::Uniform(..) => "uniform",
            Family::Normal(..) => "normal",
            Family::LogNormal(..) => "lognormal",
            Family::Exponential(_) => "exponential",
            Family::Empirical(_) => "empirical",
        }
    }

    /// P(X <= x).
    pub fn cdf(&self, x: f64) -> f64 {
        match *self {
            Family::Constant(c) => f64::from(u8::from(x >= c)),
            Family::Uniform(a, b) => ((x - a) / (b - a)).clamp(0.0, 1.0),
            Family::Normal(m, s) => phi((x - m) / s),
            Family::LogNormal(mu, s) if x > 0.0 => phi((x.ln() - mu) / s),
            Family::LogNormal(..) => 0.0,
            Family::Exponential(m) => (1.0 - (-x / m).exp()).max(0.0),
            Family::Empirical(ref v) => v.partition_point(|y| *y <= x) as f64 / v.len() as f64,
        }
    }

    /// The `p` quantile (0 < p < 1).
    pub fn quantile(&self, p: f64) -> f64 {
        match *self {
            Family::Constant(c) => c,
            Family::Uniform(a, b) => a + p * (b - a),
            Family::Normal(m, s) => m + s * z(p),
            Family::LogNormal(mu, s) => (mu + s * z(p)).exp(),
            Family::Exponential(m) => -m * (1.0 - p).ln(),
            Family::Empirical(ref v) => quantile_sorted(v, p),
        }
    }

    /// Its mean.
    pub fn mean(&self) -> f64 {
        match *self {
            Family::Constant(c) => c,
            Family::Uniform(a, b) => (a + b) / 2.0,
            Family::Normal(m, _) | Family::Exponential(m) => m,
            Family::LogNormal(mu, s) => (mu + s * s / 2.0).exp(),
            Family::Empirical(ref v) => v.iter().sum::<f64>() / v.len() as f64,
        }
    }

    /// Its 95th percentile (as the scenario's `p95` keys take it).
    pub fn p95(&self) -> f64 {
        match *self {
            Family::LogNormal(mu, s) => (mu + s * Z95).exp(),
            _ => self.quantile(0.95),
        }
    }
}

/// The largest KS distance a parametric family may have and still be chosen over the empirical
/// distribution: the 5 % critical value for `n` values (1.36/√n), or 0.03 (three points of
/// probability anywhere), whichever is larger. The critical value is conservative for
/// parameters fitted from the same sample.
pub fn accept(n: usize) -> f64 {
    (1.36 / (n.max(1) as f64).sqrt()).max(0.03)
}

/// A fit: the family chosen, its KS distance, and every candidate's.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// The family chosen.
    pub family: Family,
    /// Its Kolmogorov–Smirnov distance to the sample.
    pub distance: f64,
    /// The largest distance a parametric family could have had to be chosen.
    pub accept: f64,
    /// Each family tried, with its distance (`None`: it cannot describe this sample).
    pub candidates: Vec<(&'static str, Option<f64>)>,
}

/// What may be fitted: any value (a latency in ms, a think time), or a count that must stay a
/// count (tokens: a scenario draws those from uniform, log-normal or empirical only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Durations: every family.
    Duration,
    /// Token counts: constant, uniform, log-normal with p95 below 3.9 × the mean, empirical.
    Tokens,
}

/// Fits `sorted` (ascending, finite, not empty).
pub fn fit(sorted: &[f64], kind: Kind) -> Fit {
    let n = sorted.len();
    let (lo, hi) = (sorted[0], sorted[n - 1]);
    let accept = accept(n);
    if hi - lo <= hi.abs() * 1e-9 {
        return Fit {
            family: Family::Constant(lo),
            distance: 0.0,
            accept,
            candidates: vec![("constant", Some(0.0))],
        };
    }
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let var = sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0).max(1.0);
    let sd = var.sqrt();
    let mut tried: Vec<Option<Family>> = vec![Some(Family::Uniform(lo, hi))];
    if kind == Kind::Duration {
        // A normal whose lower tail reaches below zero is drawn again there: left out.
        tried.push((mean > 3.0 * sd).then_some(Family::Normal(mean, sd)));
        tried.push((lo >= 0.0).then_some(Family::Exponential(mean)));
    }
    tried.push((lo > 0.0).then(|| log_normal(sorted)).filter(|f| match f {
        Family::LogNormal(_, s) if kind == Kind::Tokens => *s > 0.0 && *s < 1.6,
        _ => true,
    }));
    let names = ["uniform", "normal", "exponential", "lognormal"];
    let mut candidates = Vec::new();
    let mut best: Option<(Family, f64)> = None;
    for (i, family) in tried.into_iter().enumerate() {
        let name = if kind == Kind::Tokens && i == 1 {
            "lognormal"
        } else {
            names[i]
        };
        let Some(family) = family else {
            candidates.push((name, None));
            continue;
        };
        let d = distance(sorted, &family);
        candidates.push((name, Some(d)));
        if best.as_ref().is_none_or(|(_, b)| d < *b) {
            best = Some((family, d));
        }
    }
    let empirical = Family::Empirical(grid(sorted));
    let empirical_d = distance(sorted, &empirical);
    candidates.push(("empirical", Some(empirical_d)));
    match best {
        Some((family, d)) if d <= accept => Fit {
            family,
            distance: d,
            accept,
            candidates,
        },
        _ => Fit {
            family: empirical,
            distance: empirical_d,
            accept,
            candidates,
        },
    }
}

/// The maximum-likelihood log-normal of positive values.
fn log_normal(sorted: &[f64]) -> Family {
    let n = sorted.len() as f64;
    let mu = sorted.iter().map(|x| x.ln()).sum::<f64>() / n;
    let var = sorted.iter().map(|x| (x.ln() - mu).powi(2)).sum::<f64>() / n;
    Family::LogNormal(mu, var.sqrt().max(1e-9))
}

/// The Kolmogorov–Smirnov distance between the sorted sample and `family`: the largest gap
/// between the sample's step CDF and the family's CDF. Ties are one step.
pub fn distance(sorted: &[f64], family: &Family) -> f64 {
    let n = sorted.len() as f64;
    let mut d: f64 = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let x = sorted[i];
        let mut j = i;
        while j < sorted.len() && sorted[j] == x {
            j += 1;
        }
        let f = family.cdf(x);
        // Just below x the sample's CDF is i/n; at x it is j/n. The family's CDF just below x
        // is f for a continuous family; an atom (constant, empirical) is handled by its own cdf.
        let below = match family {
            Family::Constant(_) | Family::Empirical(_) => family.cdf(x - x.abs() * 1e-12 - 1e-12),
            _ => f,
        };
        d = d
            .max((f - j as f64 / n).abs())
            .max((below - i as f64 / n).abs());
        i = j;
    }
    d
}

/// The sample itself when it is small, else [`GRID`] quantiles at (k + ½)/GRID.
pub fn grid(sorted: &[f64]) -> Vec<f64> {
    if sorted.len() <= GRID {
        return sorted.to_vec();
    }
    (0..GRID)
        .map(|k| quantile_sorted(sorted, (k as f64 + 0.5) / GRID as f64))
        .collect()
}

/// The `p` quantile of a sorted sample, by linear interpolation between order statistics.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let h = p.clamp(0.0, 1.0) * (n - 1) as f64;
    let (i, frac) = (h.floor() as usize, h.fract());
    if i + 1 >= n {
        return sorted[n - 1];
    }
    sorted[i] + frac * (sorted[i + 1] - sorted[i])
}

/// The standard normal CDF.
pub fn phi(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal quantile, by bisection on [`phi`] (to 1e-12).
pub fn z(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0_f64, 40.0_f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if phi(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, relative error below
/// 1.2e-7 everywhere).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::SeedableRng;
    use rand_distr::{Distribution, LogNormal, Uniform};

    fn sample(d: impl Distribution<f64>, n: usize) -> Vec<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut v: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    #[test]
    fn the_normal_cdf_and_its_inverse_agree_with_known_values() {
        assert!((phi(0.0) - 0.5).abs() < 1e-7);
        assert!((phi(Z95) - 0.95).abs() < 1e-7);
        assert!((z(0.975) - 1.959_964).abs() < 1e-5);
    }

    #[test]
    fn a_log_normal_sample_is_fitted_as_one_with_its_parameters() {
        // 4,000 draws: mu and sigma are recovered within 3 standard errors
        // (sigma/sqrt(n) = 0.0095 for mu, sigma/sqrt(2n) = 0.0067 for sigma).
        let v = sample(LogNormal::new(6.5, 0.6).unwrap(), 4000);
        let f = fit(&v, Kind::Duration);
        let Family::LogNormal(mu, s) = f.family else {
            panic!("{f:?}")
        };
        assert!((mu - 6.5).abs() < 3.0 * 0.0095, "mu {mu}");
        assert!((s - 0.6).abs() < 3.0 * 0.0067, "sigma {s}");
        assert!(f.distance <= f.accept);
    }

    #[test]
    fn a_uniform_sample_is_fitted_as_uniform() {
        let v = sample(Uniform::new(100.0, 600.0).unwrap(), 2000);
        assert_eq!(fit(&v, Kind::Duration).family.name(), "uniform");
    }

    #[test]
    fn a_two_humped_sample_fits_no_family_and_is_kept_as_observed() {
        let mut v = sample(Uniform::new(10.0, 20.0).unwrap(), 1000);
        v.extend(sample(Uniform::new(900.0, 1000.0).unwrap(), 1000));
        v.sort_by(f64::total_cmp);
        let f = fit(&v, Kind::Duration);
        assert_eq!(f.family.name(), "empirical");
        assert!(f.distance < 0.002, "{}", f.distance);
        assert!(f.candidates.iter().all(|(_, d)| d.is_none_or(|d| d > 0.0)));
    }

    #[test]
    fn equal_values_are_a_constant() {
        assert_eq!(fit(&[5.0; 10], Kind::Tokens).family, Family::Constant(5.0));
    }

    #[test]
    fn the_distance_of_a_sample_to_its_own_grid_is_below_one_grid_step() {
        let v = sample(LogNormal::new(0.0, 1.0).unwrap(), 20_000);
        let g = Family::Empirical(grid(&v));
        assert!(distance(&v, &g) <= 1.0 / GRID as f64 + 1e-9);
    }
}
