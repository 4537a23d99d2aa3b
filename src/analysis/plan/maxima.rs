//! E[max of n] latencies for each latency distribution, in closed form or by quadrature, and
//! the strict-waves bound built on it: the fan-out rows of [`plan`](super::plan).

use capsize_mock::Latency;

use super::numeric::{gamma, harmonic, integrate, upper_tail};
use crate::fmt::fmt_num;

/// E[max of `n`] latencies of `latency` in ms, where it can be computed exactly enough: every
/// distribution but a mixture (and a Pareto tail with no mean). `n` may be fractional (a mean).
pub fn expected_max_ms(latency: &Latency, n: f64) -> Option<f64> {
    expected_max(latency, n).map(|(v, _)| v)
}

/// E[max of `n`] and its formula; `None` where it cannot be computed or is not finite.
pub(super) fn expected_max(latency: &Latency, n: f64) -> Option<(f64, String)> {
    if !(n.is_finite() && n >= 1.0) {
        return None;
    }
    let (f, nn) = (fmt_num, fmt_num(n));
    let (v, formula) = match *latency {
        Latency::Constant(c) => (c, format!("{} (constant)", f(c))),
        Latency::Uniform(a, b) => {
            let (lo, span, m) = (f(a), f(b - a), f(n + 1.0));
            (
                a + (b - a) * n / (n + 1.0),
                format!("{lo} + {span} × {nn}/{m}"),
            )
        }
        Latency::Exponential(m) => (m * harmonic(n), format!("{} × H({nn})", f(m))),
        Latency::Normal(mu, sd) if sd > 0.0 => {
            let (m, s) = (f(mu), f(sd));
            let formula = format!("∫ 1 − F(x)^{nn} dx, normal({m}, {s}) truncated at 0");
            (truncated_normal_max(mu, sd, n)?, formula)
        }
        Latency::Normal(mu, _) => (mu, format!("{} (sd 0)", f(mu))),
        Latency::LogNormal(mu, sigma) if sigma > 0.0 => {
            let (m, s) = (f(mu), f(sigma));
            let formula = format!("∫ 1 − F(x)^{nn} dx, lognormal(μ {m}, σ {s})");
            (lognormal_max(mu, sigma, n)?, formula)
        }
        Latency::LogNormal(mu, _) => (mu.exp(), format!("e^{} (σ 0)", f(mu))),
        Latency::Pareto(scale, shape) => {
            let (b, m) = (1.0 / shape, n + 1.0);
            let (s, g1, g2, g3) = (f(scale), f(m), f(1.0 - b), f(m - b));
            let formula = format!("{s} × Γ({g1})·Γ({g2}) / Γ({g3})");
            (pareto_max(scale, shape, n)?, formula)
        }
        Latency::Empirical(ref values) => {
            let m = values.len();
            let formula = format!("Σ v(i)·((i/m)^{nn} − ((i−1)/m)^{nn}), m = {m} sorted values");
            (empirical_max(values, n)?, formula)
        }
        Latency::Mixture(_) => return None,
    };
    v.is_finite().then_some((v, formula))
}

/// `n` calls through a semaphore of `c` < `n`, if each wave waited for its slowest call: full
/// waves of `c`, then one wave of the remainder.
pub(super) fn strict_waves(latency: &Latency, n: f64, c: f64) -> Option<(f64, String)> {
    let full = (n / c).floor();
    let rest = n - full * c;
    let (wave, _) = expected_max(latency, c)?;
    let mut v = full * wave;
    let mut formula = format!("{} × {}", fmt_num(full), fmt_num(wave));
    if rest > 1e-9 {
        // A remainder below one call (a fractional mean) is still one more wave of one call.
        let (last, _) = expected_max(latency, rest.max(1.0))?;
        v += last;
        formula.push_str(&format!(" + {}", fmt_num(last)));
    }
    Some((v, formula))
}

/// 1 − (1 − s)ⁿ, the chance that the max of `n` exceeds a point where one call's survival is `s`.
fn max_survival(s: f64, n: f64) -> f64 {
    -(n * (-s.clamp(0.0, 1.0)).ln_1p()).exp_m1()
}

/// E[max of n] of a normal(`mu`, `sd`) truncated at 0: ∫₀^∞ 1 − F(x)ⁿ dx.
fn truncated_normal_max(mu: f64, sd: f64, n: f64) -> Option<f64> {
    let kept = upper_tail(-mu / sd);
    let (lo, hi) = ((mu - 40.0 * sd).max(0.0), mu + 40.0 * sd);
    let tail = |x: f64| max_survival(upper_tail((x - mu) / sd) / kept, n);
    // Below `lo` every call is still running (survival 1), so that stretch adds `lo`.
    Some(lo + integrate(&tail, lo, hi)?)
}

/// E[max of n] of a log-normal (`mu`, `sigma` of ln ms), integrated over z = (ln x − mu)/sigma.
fn lognormal_max(mu: f64, sigma: f64, n: f64) -> Option<f64> {
    // x = e^(mu + sigma·z), dx = sigma·x dz; below z = −40 the integrand is x itself.
    let body = |z: f64| {
        let g = max_survival(upper_tail(z), n);
        if g > 0.0 {
            sigma * (mu + sigma * z + g.ln()).exp()
        } else {
            0.0
        }
    };
    Some((mu - 40.0 * sigma).exp() + integrate(&body, -40.0, sigma + 40.0)?)
}

/// E[max of n] of a Pareto: scale·Γ(n+1)·Γ(1−1/shape)/Γ(n+1−1/shape); infinite for shape ≤ 1.
fn pareto_max(scale: f64, shape: f64, n: f64) -> Option<f64> {
    if !(shape > 1.0 && n <= 1e6) {
        return None;
    }
    let b = 1.0 / shape;
    let (k, frac) = (n.floor(), n - n.floor());
    // Γ(n+1)/Γ(n+1−b) = Γ(1+frac)/Γ(1+frac−b) · Π_{j=1..k} (frac+j)/(frac+j−b).
    let mut v = scale;
    let mut j = 1.0;
    while j <= k {
        v *= (frac + j) / (frac + j - b);
        j += 1.0;
    }
    if frac > 0.0 {
        v *= gamma(1.0 - b) * gamma(1.0 + frac) / gamma(1.0 + frac - b);
    }
    Some(v)
}

/// E[max of n] draws from observed values: Σ v(i)·((i/m)ⁿ − ((i−1)/m)ⁿ) over the sorted values.
fn empirical_max(values: &[f64], n: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len() as f64;
    let mut prev = 0.0;
    let mut sum = 0.0;
    for (i, v) in sorted.iter().enumerate() {
        let cdf = ((i + 1) as f64 / m).powf(n);
        sum += v * (cdf - prev);
        prev = cdf;
    }
    Some(sum)
}
