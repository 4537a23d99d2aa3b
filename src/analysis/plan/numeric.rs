//! The special functions and quadrature the fan-out maxima need: harmonic numbers, the normal
//! tail (erfc), Γ, and adaptive Gauss–Kronrod integration.

use std::f64::consts::PI;

/// H(n), the harmonic number (also for fractional `n`, as ψ(n+1) + γ): shifted up to 20 and
/// then its asymptotic series, whose next term is below 1e-15 there.
pub(super) fn harmonic(n: f64) -> f64 {
    const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;
    let (mut x, mut shift) = (n, 0.0);
    while x < 20.0 {
        x += 1.0;
        shift += 1.0 / x;
    }
    let x2 = 1.0 / (x * x);
    let series = x2 * (1.0 / 12.0 - x2 * (1.0 / 120.0 - x2 * (1.0 / 252.0 - x2 / 240.0)));
    x.ln() + EULER_GAMMA + 0.5 / x - series - shift
}

/// P(Z > z) for a standard normal Z.
pub(super) fn upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function, to about 1e-13 relative.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.5 {
        // erf x = 2/√π · e^(−x²) · Σ_k x·(2x²)^k / (1·3·…·(2k+1)): positive terms, no cancellation.
        let (mut term, mut sum, mut k) = (x, x, 0.0);
        while term > sum * 1e-17 && k < 200.0 {
            k += 1.0;
            term *= 2.0 * x * x / (2.0 * k + 1.0);
            sum += term;
        }
        return 1.0 - 2.0 / PI.sqrt() * (-x * x).exp() * sum;
    }
    if x > 27.0 {
        return 0.0;
    }
    // erfc x = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))), by Lentz's method.
    let (mut frac, mut c, mut d) = (x, x, 0.0);
    for k in 1..1000 {
        let a = f64::from(k) / 2.0;
        d = 1.0 / (x + a * d);
        c = x + a / c;
        let delta = c * d;
        frac *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / (PI.sqrt() * frac)
}

/// Γ(x) for x > 0 (Lanczos, g = 7; about 1e-15 relative), reflected below 1/2.
pub(super) fn gamma(x: f64) -> f64 {
    const P: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return PI / ((PI * x).sin() * gamma(1.0 - x));
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = P[1..]
        .iter()
        .enumerate()
        .fold(P[0], |acc, (i, p)| acc + p / (x + i as f64 + 1.0));
    (2.0 * PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * sum
}

/// Gauss–Kronrod (7, 15) on [a, b]: the Kronrod estimate and its distance from Gauss's.
fn gauss_kronrod(f: &dyn Fn(f64) -> f64, a: f64, b: f64) -> (f64, f64) {
    // Kronrod nodes (the odd-indexed ones and the centre are also Gauss's) and weights.
    const NODES: [(f64, f64); 8] = [
        (0.991_455_371_120_812_6, 0.022_935_322_010_529_22),
        (0.949_107_912_342_758_5, 0.063_092_092_629_978_55),
        (0.864_864_423_359_769_1, 0.104_790_010_322_250_18),
        (0.741_531_185_599_394_4, 0.140_653_259_715_525_92),
        (0.586_087_235_467_691_1, 0.169_004_726_639_267_9),
        (0.405_845_151_377_397_2, 0.190_350_578_064_785_4),
        (0.207_784_955_007_898_5, 0.204_432_940_075_298_9),
        (0.0, 0.209_482_141_084_727_83),
    ];
    // Gauss weights of the odd-indexed nodes (1, 3, 5) and the centre.
    const WG: [f64; 4] = [
        0.129_484_966_168_869_7,
        0.279_705_391_489_276_7,
        0.381_830_050_505_118_9,
        0.417_959_183_673_469_4,
    ];
    let (mid, half) = ((a + b) / 2.0, (b - a) / 2.0);
    let centre = f(mid);
    let (mut k, mut g) = (NODES[7].1 * centre, WG[3] * centre);
    for (i, (x, wk)) in NODES.into_iter().take(7).enumerate() {
        let pair = f(mid - half * x) + f(mid + half * x);
        k += wk * pair;
        if i % 2 == 1 {
            g += WG[i / 2] * pair;
        }
    }
    (k * half, ((k - g) * half).abs())
}

/// ∫ₐᵇ f, adaptively to about 1e-12 of its size; `None` if a value is not finite or the
/// work budget runs out before the error estimate is small enough.
pub(super) fn integrate(f: &dyn Fn(f64) -> f64, a: f64, b: f64) -> Option<f64> {
    const PANELS: u32 = 32;
    const BUDGET: usize = 20_000;
    let width = (b - a) / f64::from(PANELS);
    let mut todo: Vec<(f64, f64, f64, f64)> = (0..PANELS)
        .map(|i| {
            let lo = a + width * f64::from(i);
            let hi = if i + 1 == PANELS { b } else { lo + width };
            let (v, err) = gauss_kronrod(f, lo, hi);
            (lo, hi, v, err)
        })
        .collect();
    let scale: f64 = todo.iter().map(|p| p.2.abs()).sum();
    let tol = 1e-12 * scale.max(f64::MIN_POSITIVE);
    let mut total = 0.0;
    let mut spent = 0;
    while let Some((lo, hi, v, err)) = todo.pop() {
        if !(v.is_finite() && err.is_finite()) {
            return None;
        }
        let mid = (lo + hi) / 2.0;
        if err <= tol * (hi - lo) / (b - a) || mid <= lo || mid >= hi {
            total += v;
            continue;
        }
        spent += 1;
        if spent > BUDGET {
            return None;
        }
        let (lv, le) = gauss_kronrod(f, lo, mid);
        let (rv, re) = gauss_kronrod(f, mid, hi);
        todo.push((lo, mid, lv, le));
        todo.push((mid, hi, rv, re));
    }
    Some(total)
}
