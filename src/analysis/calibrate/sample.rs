//! A stream of observed values kept in bounded memory: the count, sum, least and most exactly,
//! and a uniform sample of at most [`CAP`] values (reservoir sampling, seeded, so the same input
//! gives the same sample) for quantiles and fits.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::fit;

/// The most values a sample keeps.
pub const CAP: usize = 20_000;

/// Observed values of one quantity.
#[derive(Debug, Clone)]
pub struct Sample {
    n: u64,
    sum: f64,
    min: f64,
    max: f64,
    kept: Vec<f64>,
    rng: Xoshiro256PlusPlus,
}

impl Sample {
    /// An empty sample; `seed` tells samples apart (their reservoirs draw independently).
    pub fn new(seed: u64) -> Self {
        Sample {
            n: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            kept: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// Adds `v` (a value that is not finite is ignored).
    pub fn add(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.n += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if self.kept.len() < CAP {
            self.kept.push(v);
        } else {
            let j = self.rng.random_range(0..self.n);
            if (j as usize) < CAP {
                self.kept[j as usize] = v;
            }
        }
    }

    /// One sample of the values of all of `parts` (seeded by `seed`): every value kept where
    /// they are at most [`CAP`] in all, else from each part a share of [`CAP`] in proportion to
    /// its count, drawn uniformly from what it kept.
    pub fn fold(parts: &[&Sample], seed: u64) -> Sample {
        let mut out = Sample::new(seed);
        for p in parts {
            out.n += p.n;
            out.sum += p.sum;
            out.min = out.min.min(p.min);
            out.max = out.max.max(p.max);
        }
        for p in parts {
            let mut kept = p.kept.clone();
            let take = if out.n as usize <= CAP {
                kept.len()
            } else {
                ((CAP as f64 * p.n as f64 / out.n as f64) as usize).min(kept.len())
            };
            // A partial Fisher-Yates shuffle: the first `take` are a uniform draw.
            for i in 0..take {
                let j = out.rng.random_range(i..kept.len());
                kept.swap(i, j);
            }
            out.kept.extend_from_slice(&kept[..take]);
        }
        out
    }

    /// Their mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }

    /// The values kept, sorted.
    pub fn sorted(&self) -> Vec<f64> {
        let mut v = self.kept.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Whether every value was kept (quantiles are exact), or a uniform sample of them.
    pub fn exact(&self) -> bool {
        self.n as usize <= CAP
    }

    /// The observed quantiles p50, p90, p95, p99 (and the least and most, exact).
    pub fn quantiles(&self) -> Option<Quantiles> {
        self.quantiles_of(&self.sorted())
    }

    /// [`Sample::quantiles`], from the values kept already sorted (`sorted()`'s result).
    pub fn quantiles_of(&self, v: &[f64]) -> Option<Quantiles> {
        if self.n == 0 {
            return None;
        }
        let q = |p| fit::quantile_sorted(v, p);
        Some(Quantiles {
            n: self.n,
            mean: self.mean(),
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            min: self.min,
            max: self.max,
        })
    }
}

/// A summary of observed values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantiles {
    /// How many.
    pub n: u64,
    /// Their mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The least.
    pub min: f64,
    /// The most.
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_every_value_up_to_its_cap_then_a_uniform_share() {
        let mut s = Sample::new(1);
        for i in 0..(3 * CAP) {
            s.add(i as f64);
        }
        assert_eq!(s.n, 3 * CAP as u64);
        assert_eq!(s.sorted().len(), CAP);
        let q = s.quantiles().unwrap();
        assert_eq!((q.min, q.max), (0.0, (3 * CAP - 1) as f64));
        // The median of 0..60,000 is 29,999.5; a sample of 20,000 has a standard error of
        // about 0.0035 × 60,000 = 212 on it.
        assert!((q.p50 - 29_999.5).abs() < 3.0 * 212.0, "{}", q.p50);
        assert!(!s.exact());
    }

    #[test]
    fn a_fold_weighs_each_part_by_its_count_not_by_what_it_kept() {
        let (mut big, mut small) = (Sample::new(1), Sample::new(2));
        for _ in 0..(3 * CAP) {
            big.add(1.0);
        }
        for _ in 0..CAP {
            small.add(2.0);
        }
        let f = Sample::fold(&[&big, &small], 3);
        assert_eq!(
            (f.n, f.min, f.max, f.mean()),
            (4 * CAP as u64, 1.0, 2.0, 1.25)
        );
        let kept = f.sorted();
        assert_eq!(kept.len(), CAP);
        // 3 to 1, as the parts' counts are.
        assert_eq!(kept.iter().filter(|v| **v == 1.0).count(), 3 * CAP / 4);
        // Few enough values: every one kept.
        let mut a = Sample::new(1);
        a.add(5.0);
        let f = Sample::fold(&[&a, &a], 3);
        assert_eq!((f.sorted(), f.exact()), (vec![5.0, 5.0], true));
    }
}
