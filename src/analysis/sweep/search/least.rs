//! A search on a metric: among the values of a key that meet the objectives, the one with the
//! least (or, `--max`, greatest) mean of a metric of summary.json, such as the cheapest
//! `scheduler.max_concurrency` by `cost.per_good_query_usd`.
//!
//! 1. **Scan.** From the start, double up and halve down within the limits (as a boundary
//!    search brackets), each way for as long as it gets better: a passing value whose metric
//!    beats the one before, a first pass after failures, or a failure closer to passing than
//!    the one before (an objective missed by less). A way ends at the first passing value that
//!    does not beat the one before it, the first failure after a pass, or a limit.
//! 2. **Refine.** Around the best passing value so far, between the nearest values tried
//!    either side of it, a golden-section search: probe the wider side's golden point and keep
//!    the best of the three, until the sides are one apart (an integer key) or within
//!    `precision` of the value (a fractional one). A failing value is worse than any passing one.
//!
//! It assumes the passing values are one stretch and the metric has one minimum over them (it
//! falls, then rises; flat stretches are fine). [`dips`] and [`gaps`] check this with the
//! probes made.

use super::{
    closer, limits, next, probe, round, start, Found, Probe, SearchError, SearchSpec, Step,
};
use crate::analysis::sweep::SweepOptions;
use crate::engine::summary::slo::{number, Threshold};

/// 1 − 1/φ: where a golden-section search probes, as a share of the wider side.
const GOLDEN: f64 = 0.381_966_011_250_105_1;

/// A probe's mean of the metric and its standard error over the probe's seeds (0 for one
/// seed), if it has the metric.
pub fn reading(p: &Probe, metric: &str) -> Option<(f64, f64)> {
    let mean = number(&p.result.mean, metric).filter(|v| v.is_finite())?;
    let values: Vec<f64> = p
        .result
        .runs
        .iter()
        .filter_map(|r| number(r, metric))
        .collect();
    let n = values.len() as f64;
    let error = if values.len() < 2 {
        0.0
    } else {
        let m = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
        (var / n).sqrt()
    };
    Some((mean, error))
}

/// What the search minimises: the metric's mean (negated for `--max`) of a passing probe;
/// `None` for a failing one, or one without the metric (worse than any passing probe).
fn score(spec: &SearchSpec, p: &Probe) -> Option<f64> {
    let metric = spec.metric.as_deref()?;
    let (mean, _) = reading(p, metric).filter(|_| p.passes())?;
    Some(if spec.max { -mean } else { mean })
}

/// Whether two means are the same but for rounding (a mean of 12 equal values may differ from
/// a mean of 3 in the last bit).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Whether probe `a` beats `b`: it passes and `b` does not, or both pass and it has the better
/// score, or the same score (but for rounding) at a smaller value. Of values equally good the
/// smallest wins, so on a flat stretch the search heads for its lower end.
fn better(spec: &SearchSpec, a: &Probe, b: &Probe) -> bool {
    match (score(spec, a), score(spec, b)) {
        (Some(x), Some(y)) if same(x, y) => a.value < b.value,
        (Some(x), Some(y)) => x < y,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The best passing probe (see [`better`]).
pub fn best(spec: &SearchSpec, probes: &[Probe]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, p) in probes.iter().enumerate() {
        if score(spec, p).is_some() && best.is_none_or(|b| better(spec, p, &probes[b])) {
            best = Some(i);
        }
    }
    best
}

/// Searches on `spec.metric` (see the module's comment), reporting each probe to `seen`.
pub(super) fn least(
    path: &std::path::Path,
    sets: &[String],
    spec: &SearchSpec,
    slo: &[Threshold],
    opts: &SweepOptions,
    mut seen: impl FnMut(&Probe),
) -> Result<Found, SearchError> {
    let limits = limits(path, sets, spec);
    let mut probes: Vec<Probe> = Vec::new();
    let mut run = |v: f64, step: Step, probes: &mut Vec<Probe>| -> Result<usize, SearchError> {
        let p = probe(path, sets, spec, slo, v, step, opts)?;
        seen(&p);
        probes.push(p);
        Ok(probes.len() - 1)
    };
    let start = start(spec);
    let first = run(start, Step::Start, &mut probes)?;
    // Scan: each way from the start while it gets better.
    for up in [true, false] {
        let (mut before, mut v) = (first, start);
        while let Some(n) = next(spec, &limits, v, up) {
            v = n;
            let now = run(v, if up { Step::Up } else { Step::Down }, &mut probes)?;
            let (a, b) = (&probes[before], &probes[now]);
            let on = if score(spec, a).is_none() && score(spec, b).is_none() {
                closer(a, b)
            } else {
                better(spec, b, a)
            };
            if !on {
                break;
            }
            before = now;
        }
    }
    // Refine: golden sections around the best, between the nearest values tried either side.
    if let Some(b) = best(spec, &probes) {
        let (mut m, mut at_m) = (probes[b].value, b);
        // The nearest values tried below and above (`m` itself at a limit).
        let below = probes.iter().map(|p| p.value).filter(|v| *v < m);
        let above = probes.iter().map(|p| p.value).filter(|v| *v > m);
        let mut lo = below.fold(f64::NAN, f64::max);
        let mut hi = above.fold(f64::NAN, f64::min);
        if lo.is_nan() {
            lo = m;
        }
        if hi.is_nan() {
            hi = m;
        }
        loop {
            let (left, right) = (m - lo, hi - m);
            let done = if spec.integer {
                left <= 1.0 && right <= 1.0
            } else {
                hi - lo <= spec.precision * m.abs()
            };
            if done {
                break;
            }
            let wider_up = right >= left;
            let mut x = round(
                spec,
                if wider_up {
                    m + GOLDEN * right
                } else {
                    m - GOLDEN * left
                },
            );
            if x == m {
                x = if wider_up { m + 1.0 } else { m - 1.0 };
            }
            if x <= lo || x >= hi {
                break;
            }
            let i = run(x, Step::Refine, &mut probes)?;
            if better(spec, &probes[i], &probes[at_m]) {
                if x > m {
                    lo = m;
                } else {
                    hi = m;
                }
                (m, at_m) = (x, i);
            } else if x > m {
                hi = x;
            } else {
                lo = x;
            }
        }
    }
    Ok(Found {
        answer: best(spec, &probes),
        beyond: None,
        probes,
        limits,
    })
}

/// The probes in order of value, each value once (its last probe).
fn by_value(probes: &[Probe]) -> Vec<&Probe> {
    let mut v: Vec<&Probe> = probes.iter().collect();
    v.sort_by(|a, b| a.value.total_cmp(&b.value));
    let mut out: Vec<&Probe> = Vec::new();
    for p in v {
        match out.last_mut() {
            Some(last) if last.value == p.value => *last = p,
            _ => out.push(p),
        }
    }
    out
}

/// The values where the metric dips: a passing value whose mean beats both neighbours (a
/// failing neighbour or none counts as worse) by more than twice its standard error. More
/// than one means the metric may have more than one minimum, and the least found may not be
/// the least there is.
pub fn dips(spec: &SearchSpec, found: &Found) -> Vec<f64> {
    let Some(metric) = spec.metric.as_deref() else {
        return Vec::new();
    };
    let sorted = by_value(&found.probes);
    let scores: Vec<Option<f64>> = sorted.iter().map(|p| score(spec, p)).collect();
    (0..sorted.len())
        .filter(|&i| {
            let (Some(s), Some((_, error))) = (scores[i], reading(sorted[i], metric)) else {
                return false;
            };
            let beats = |j: Option<usize>| match j.and_then(|j| scores[j]) {
                Some(n) => n - s > 2.0 * error && !same(n, s),
                None => true,
            };
            beats(i.checked_sub(1)) && beats(Some(i + 1).filter(|j| *j < sorted.len()))
        })
        .map(|i| sorted[i].value)
        .collect()
}

/// Failing values between passing ones: the passing values are not one stretch.
pub fn gaps(found: &Found) -> Vec<f64> {
    let sorted = by_value(&found.probes);
    let first = sorted.iter().position(|p| p.passes());
    let last = sorted.iter().rposition(|p| p.passes());
    match (first, last) {
        (Some(f), Some(l)) => sorted[f..l]
            .iter()
            .filter(|p| !p.passes())
            .map(|p| p.value)
            .collect(),
        _ => Vec::new(),
    }
}

/// The other passing values whose mean lies within twice the answer's standard error of the
/// answer's: as good as it, within the seeds' noise. From the smallest.
pub fn near(spec: &SearchSpec, found: &Found) -> Vec<f64> {
    let (Some(metric), Some(a)) = (spec.metric.as_deref(), found.answer) else {
        return Vec::new();
    };
    let answer = &found.probes[a];
    let Some((mean, error)) = reading(answer, metric) else {
        return Vec::new();
    };
    by_value(&found.probes)
        .into_iter()
        .filter(|p| p.value != answer.value && p.passes())
        .filter(|p| {
            reading(p, metric)
                .is_some_and(|(m, _)| same(m, mean) || (m - mean).abs() <= 2.0 * error)
        })
        .map(|p| p.value)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sweep::recommend::Failure;
    use crate::analysis::sweep::search::{Limit, Limits, Stop};
    use crate::analysis::sweep::{Point, PointResult};

    const METRIC: &str = "cost.per_good_query_usd";

    fn spec(max: bool) -> SearchSpec {
        SearchSpec {
            key: "scheduler.max_concurrency".into(),
            max,
            from: 4.0,
            to: None,
            integer: true,
            precision: 0.01,
            repeats: 3,
            max_repeats: 3,
            metric: Some(METRIC.into()),
        }
    }

    /// A probe at `value` whose seeds read `runs` of the metric, passing or not.
    fn probe(value: f64, runs: &[f64], passes: bool) -> Probe {
        let s = crate::engine::scenario::load(
            std::path::Path::new("scenarios/research-agent.toml"),
            &[],
        )
        .unwrap();
        let json = |v: f64| serde_json::json!({ "cost": { "per_good_query_usd": v } });
        let mean = runs.iter().sum::<f64>() / runs.len() as f64;
        let failures = if passes {
            Vec::new()
        } else {
            vec![Failure::Objective {
                threshold: Threshold::parse("latency_ms.query.p95", "< 2000").unwrap(),
                value: Some(2500.0),
            }]
        };
        Probe {
            value,
            step: Step::Refine,
            result: PointResult {
                point: Point { values: vec![] },
                scenario: s,
                seeds: (0..runs.len() as u64).collect(),
                runs: runs.iter().map(|v| json(*v)).collect(),
                mean: json(mean),
            },
            seeds_passing: if passes { runs.len() } else { 0 },
            failures,
        }
    }

    fn found(spec: &SearchSpec, probes: Vec<Probe>) -> Found {
        let limit = |value| Limit {
            value,
            stop: Stop::Range,
        };
        Found {
            answer: best(spec, &probes),
            beyond: None,
            probes,
            limits: Limits {
                low: limit(1.0),
                high: limit(64.0),
            },
        }
    }

    #[test]
    fn the_best_passes_and_of_equal_means_is_the_smallest_value() {
        let (min, max) = (spec(false), spec(true));
        // 0.1 + 0.2 is 0.30000000000000004: the same mean but for rounding.
        let probes = vec![
            probe(8.0, &[0.3], true),
            probe(4.0, &[0.1 + 0.2], true),
            probe(2.0, &[0.01], false),
            probe(16.0, &[0.5], true),
        ];
        assert_eq!(best(&min, &probes), Some(1), "4: as cheap as 8, smaller");
        assert_eq!(best(&max, &probes), Some(3), "16: the greatest");
        assert_eq!(best(&min, &[probe(2.0, &[0.01], false)]), None);
    }

    #[test]
    fn dips_beyond_the_noise_are_named_and_a_flat_stretch_is_not_one() {
        let s = spec(false);
        // 2 and 8 each beat both neighbours; 4 → 8 → 16 rises again.
        let two = found(
            &s,
            vec![
                probe(1.0, &[0.05], true),
                probe(2.0, &[0.01], true),
                probe(4.0, &[0.03], true),
                probe(8.0, &[0.005], true),
                probe(16.0, &[0.02], true),
            ],
        );
        assert_eq!(dips(&s, &two), [2.0, 8.0]);
        // A flat bottom is one minimum: no value beats both neighbours.
        let flat = found(
            &s,
            vec![
                probe(1.0, &[0.05], true),
                probe(2.0, &[0.01], true),
                probe(4.0, &[0.01], true),
                probe(8.0, &[0.03], true),
            ],
        );
        assert!(dips(&s, &flat).is_empty());
        // A dip no deeper than twice its seeds' standard error (0.01 ± 0.004) is noise.
        let noisy = found(
            &s,
            vec![
                probe(2.0, &[0.015], true),
                probe(4.0, &[0.006, 0.014], true),
                probe(8.0, &[0.015], true),
            ],
        );
        assert!(dips(&s, &noisy).is_empty());
    }

    #[test]
    fn failing_values_between_passing_ones_are_gaps() {
        let s = spec(false);
        let f = found(
            &s,
            vec![
                probe(1.0, &[0.05], false),
                probe(2.0, &[0.01], true),
                probe(4.0, &[0.01], false),
                probe(8.0, &[0.03], true),
                probe(16.0, &[0.03], false),
            ],
        );
        assert_eq!(gaps(&f), [4.0]);
    }

    #[test]
    fn values_within_twice_the_answers_standard_error_are_as_good() {
        let s = spec(false);
        // The answer, 4: mean 0.01, standard error 0.002 (seeds 0.008 and 0.012).
        let f = found(
            &s,
            vec![
                probe(2.0, &[0.0139], true),
                probe(4.0, &[0.008, 0.012], true),
                probe(8.0, &[0.0141], true),
                probe(16.0, &[0.0101], false),
            ],
        );
        assert_eq!(f.answer, Some(1));
        let (mean, error) = reading(&f.probes[1], METRIC).unwrap();
        assert!((mean - 0.01).abs() < 1e-12 && (error - 0.002).abs() < 1e-12);
        assert_eq!(near(&s, &f), [2.0], "8 is 0.0041 away; 16 fails");
    }
}
