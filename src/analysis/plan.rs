//! The closed-form rate-limit arithmetic: ceilings, headroom, Little's law, fan-out latency and
//! TPM exhaustion, computed instantly from a scenario's numbers with no simulation.
//!
//! `capsize plan` prints these rows, and the capacity report sets each one beside the value the
//! simulation measured. Each [`Row`] has a stable `key`, a label, the exact `f64` value (rounded
//! only by [`render`]) and the formula with the numbers filled in. A row whose inputs are missing,
//! or whose value would not be finite (an unlimited provider, a Pareto tail with no mean, …), is
//! left out rather than shown as garbage.

use std::f64::consts::PI;

use capsize_mock::Latency;
use serde::Serialize;

use crate::engine::scenario::{Arrivals, Count, Scenario};
use crate::scheduler::CapPolicy;

/// Inputs of the arithmetic, all in model units.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    /// Provider requests per minute (`None`: unlimited).
    pub rpm: Option<f64>,
    /// Provider tokens per minute (`None`: unlimited).
    pub tpm: Option<f64>,
    /// Share of the limits the client allows itself, in (0, 1].
    pub headroom: f64,
    /// Mean tool calls a query runs in parallel (one turn's fan-out).
    pub calls_per_query: f64,
    /// Mean tokens per call.
    pub tokens_per_call: f64,
    /// Mean latency of one call in ms (0 or not finite: the rows that need it are left out).
    pub latency_mean_ms: f64,
    /// `Some((min, max))` when the latency is U[min, max]: E[max of n] in closed form.
    pub latency_uniform_ms: Option<(f64, f64)>,
    /// The whole latency distribution, for E[max of n] when it is not uniform.
    pub latency: Option<Latency>,
    /// Calls in flight at once (`None` or 0: unbounded).
    pub max_concurrency: Option<u32>,
    /// An arrival rate of calls per second, for the TPM-exhaustion rows.
    pub burst_calls_per_s: Option<f64>,
    /// Requests and tokens one whole query sends when it is more than one turn of tool calls
    /// (rounds, model turns, subagents, a synthesis); `None`: one turn, `calls_per_query`
    /// requests of `tokens_per_call` each.
    pub per_query: Option<PerQuery>,
}

/// What one whole query asks of the provider.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerQuery {
    /// Requests (tool calls and model turns) per query.
    pub requests: f64,
    /// Tokens per query.
    pub tokens: f64,
}

impl Default for PlanInput {
    /// No limits, headroom 1, no calls, no latency: every field to be set by the caller.
    fn default() -> Self {
        PlanInput {
            rpm: None,
            tpm: None,
            headroom: 1.0,
            calls_per_query: 0.0,
            tokens_per_call: 0.0,
            latency_mean_ms: 0.0,
            latency_uniform_ms: None,
            latency: None,
            max_concurrency: None,
            burst_calls_per_s: None,
            per_query: None,
        }
    }
}

/// The mean of `count`, capped at `cap` per draw (a turn truncated to `cap` calls).
fn capped_mean(count: Count, cap: Option<u64>) -> f64 {
    let Some(cap) = cap else {
        return count.mean();
    };
    match count {
        Count::Fixed(n) => n.min(cap) as f64,
        Count::Uniform(lo, hi) if cap >= hi => (lo as f64 + hi as f64) / 2.0,
        Count::Uniform(lo, _) if cap <= lo => cap as f64,
        Count::Uniform(lo, hi) => {
            let (lo, hi, cap) = (lo as f64, hi as f64, cap as f64);
            let below = (lo + cap) * (cap - lo + 1.0) / 2.0;
            (below + (hi - cap) * cap) / (hi - lo + 1.0)
        }
    }
}

impl PlanInput {
    /// The inputs a validated scenario implies.
    ///
    /// `calls_per_query` is the mean fan-out of one turn (tool calls per round), after a
    /// `max_parallel_tools` cap with `over_cap = "truncate"`: the fan-out rows use it. The
    /// query ceilings use the whole query: every round of every agent, the model turns between
    /// rounds and the synthesis. An open-loop scenario's burst is its offered tool-call rate
    /// (arrival rate × calls per round × rounds × agents); a closed one has none.
    pub fn from_scenario(s: &Scenario) -> PlanInput {
        let w = &s.workload;
        let turn = &s.scheduler.turn;
        let cap = (turn.max_parallel > 0 && turn.over_cap == CapPolicy::Truncate)
            .then_some(turn.max_parallel as u64);
        let calls = capped_mean(w.calls_per_query, cap);
        let agents = w.subagents.map_or(1, |a| a.count) as f64;
        let k = w.tokens_per_call.mean();
        let rounds = f64::from(w.rounds);
        let (mut requests, mut tokens) = (calls * rounds * agents, calls * k * rounds * agents);
        if let Some(m) = &w.model_turn {
            requests += agents * (rounds - 1.0);
            tokens += agents * (rounds - 1.0) * m.tokens as f64;
        }
        if let Some(sub) = w.subagents.filter(|s| s.synthesis_tokens > 0) {
            requests += 1.0;
            tokens += sub.synthesis_tokens as f64;
        }
        let per_query =
            (requests != calls || tokens != calls * k).then_some(PerQuery { requests, tokens });
        let burst = match w.arrivals {
            Arrivals::Open { rate, .. } => Some(rate * calls * f64::from(w.rounds) * agents),
            Arrivals::Closed { .. } => None,
        };
        let latency = &s.provider.latency;
        PlanInput {
            rpm: s.provider.rpm,
            tpm: s.provider.tpm,
            headroom: s.scheduler.headroom,
            calls_per_query: calls,
            tokens_per_call: k,
            latency_mean_ms: latency.mean(),
            latency_uniform_ms: match *latency {
                Latency::Uniform(a, b) => Some((a, b)),
                _ => None,
            },
            latency: Some(latency.clone()),
            max_concurrency: match s.scheduler.max_concurrency {
                0 => None,
                c => Some(u32::try_from(c).unwrap_or(u32::MAX)),
            },
            burst_calls_per_s: burst,
            per_query,
        }
    }
}

/// One line of the arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Stable identifier other code looks the row up by.
    pub key: &'static str,
    /// What the value is, for people.
    pub label: String,
    /// The exact value (rounded only when rendered).
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// How it is computed, with the numbers filled in.
    pub formula: String,
}

/// Pushes a row if its value is finite. Reads as a table line:
/// `row!(rows; key => value, unit; label format args; formula format args)`.
macro_rules! row {
    ($rows:ident; $key:literal => $value:expr, $unit:literal; $($label:expr),+; $($formula:expr),+) => {{
        let value: f64 = $value;
        if value.is_finite() {
            $rows.push(Row {
                key: $key,
                label: format!($($label),+),
                value,
                unit: $unit,
                formula: format!($($formula),+),
            });
        }
    }};
}

/// `v` if it is finite and positive.
fn positive(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite() && *x > 0.0)
}

/// Every row that the inputs allow, in a fixed order.
pub fn plan(input: &PlanInput) -> Vec<Row> {
    let rpm = positive(input.rpm);
    let tpm = positive(input.tpm);
    let tokens = positive(Some(input.tokens_per_call));
    let n = positive(Some(input.calls_per_query));
    let headroom = Some(input.headroom).filter(|h| *h > 0.0 && *h <= 1.0);
    let w_ms = positive(Some(input.latency_mean_ms));
    let conc = input.max_concurrency.filter(|c| *c > 0).map(f64::from);
    let burst = positive(input.burst_calls_per_s);
    let f = fmt_num;
    let mut rows = Vec::new();

    // Ceilings: what the provider serves at most, in calls per second.
    let rps = rpm.map(|r| r / 60.0);
    if let Some(r) = rpm {
        row!(rows; "rps_ceiling" => r / 60.0, "requests/s"; "Request ceiling (RPM)"; "{} / 60", f(r));
    }
    let tpm_per_s = tpm.zip(tokens).map(|(t, k)| t / k / 60.0);
    if let (Some(t), Some(k)) = (tpm, tokens) {
        row!(rows; "tpm_calls_per_min" => t / k, "calls/min";
            "Calls the TPM allows at {} tokens each", f(k); "{} / {}", f(t), f(k));
        row!(rows; "tpm_calls_per_s" => t / k / 60.0, "calls/s";
            "Calls the TPM allows at {} tokens each, per second", f(k); "{} / 60", f(t / k));
    }
    let ceiling = match (rps, tpm_per_s) {
        (Some(r), Some(t)) if r <= t => Some((r, "RPM", format!("min({}, {})", f(r), f(t)))),
        (Some(r), Some(t)) => Some((t, "TPM", format!("min({}, {})", f(r), f(t)))),
        (Some(r), None) => Some((r, "RPM", format!("{} (RPM only)", f(r)))),
        (None, Some(t)) => Some((t, "TPM", format!("{} (TPM only)", f(t)))),
        (None, None) => None,
    };
    if let Some((c, binds, formula)) = &ceiling {
        row!(rows; "call_ceiling_per_s" => *c, "calls/s"; "Call ceiling ({} binds)", binds; "{}", formula);
    }
    let ceiling = ceiling.map(|(c, _, _)| c);
    // Queries: one turn's calls, or the whole query's requests and tokens.
    let per_query = match (input.per_query, n) {
        (Some(q), _) => Some(q),
        (None, Some(n)) => Some(PerQuery {
            requests: n,
            tokens: n * input.tokens_per_call,
        }),
        (None, None) => None,
    };
    let what = |q: &PerQuery| match input.per_query {
        Some(_) => format!("{} requests/query", f(q.requests)),
        None => format!("{} calls/query", f(q.requests)),
    };
    if let (Some(c), Some(q)) = (ceiling, per_query.filter(|q| q.requests > 0.0)) {
        let (qps, formula) = match (rps, tpm.filter(|_| q.tokens > 0.0)) {
            (_, _) if input.per_query.is_none() => {
                (c / q.requests, format!("{} / {}", f(c), f(q.requests)))
            }
            (Some(r), Some(t)) => {
                let (by_r, by_t) = (r / q.requests, t / 60.0 / q.tokens);
                (
                    by_r.min(by_t),
                    format!(
                        "min({} / {}, {} / 60 / {})",
                        f(r),
                        f(q.requests),
                        f(t),
                        f(q.tokens)
                    ),
                )
            }
            (Some(r), None) => (r / q.requests, format!("{} / {}", f(r), f(q.requests))),
            (None, Some(t)) => (
                t / 60.0 / q.tokens,
                format!("{} / 60 / {}", f(t), f(q.tokens)),
            ),
            (None, None) => (c / q.requests, format!("{} / {}", f(c), f(q.requests))),
        };
        row!(rows; "queries_per_s_ceiling" => qps, "queries/s";
            "Query ceiling at {}", what(&q); "{}", formula);
        row!(rows; "queries_per_min_ceiling" => qps * 60.0, "queries/min";
            "Query ceiling at {}, per minute", what(&q); "{} × 60", f(qps));
    }

    // Headroom: the share of the RPM the client allows itself, and what is left over.
    if let (Some(r), Some(h)) = (rpm, headroom) {
        let (pct, slots) = (f(h * 100.0), h * r);
        row!(rows; "headroom_slots_per_min" => slots, "requests/min";
            "Request slots at {} % headroom", pct; "{} × {}", f(h), f(r));
        row!(rows; "spare_rpm" => r - slots, "requests/min";
            "Spare RPM (retries, other traffic)"; "{} − {}", f(r), f(slots));
        if let Some(q) = per_query.filter(|q| q.requests > 0.0) {
            // The TPM at the same headroom may bind first; the row shows what binds.
            let by_rpm = slots / q.requests;
            match tpm
                .filter(|_| q.tokens > 0.0)
                .map(|t| (t, h * t / q.tokens))
            {
                Some((t, by_tpm)) if by_tpm < by_rpm => {
                    row!(rows; "queries_per_min_at_headroom" => by_tpm, "queries/min";
                        "Queries at {} % headroom (TPM binds)", pct;
                        "{} × {} / {}", f(h), f(t), f(q.tokens));
                }
                _ => {
                    row!(rows; "queries_per_min_at_headroom" => by_rpm, "queries/min";
                        "Queries at {} % headroom", pct; "{} / {}", f(slots), f(q.requests));
                }
            }
        }
    }

    // Little's law, L = λ·W: concurrency and throughput at the mean latency W.
    if let Some(w) = w_ms.map(|ms| ms / 1000.0) {
        if let Some(c) = ceiling {
            row!(rows; "littles_law_concurrency_at_ceiling" => c * w, "calls";
                "Calls in flight that saturate the ceiling (L = λ·W)"; "{} × {}", f(c), f(w));
            if let Some(h) = headroom.filter(|h| *h < 1.0) {
                row!(rows; "littles_law_concurrency_at_headroom" => h * c * w, "calls";
                    "Calls in flight at {} % headroom (L = λ·W)", f(h * 100.0);
                    "{} × {} × {}", f(h), f(c), f(w));
            }
        }
        if let Some(k) = conc {
            row!(rows; "littles_law_throughput" => k / w, "calls/s";
                "Throughput of {} calls in flight (λ = L/W)", f(k); "{} / {}", f(k), f(w));
            if let Some(c) = ceiling {
                row!(rows; "littles_law_share_of_ceiling" => 100.0 * k / w / c, "%";
                    "{} calls in flight, share of the ceiling", f(k); "{} / {}", f(k / w), f(c));
            }
        }
    }

    // Fan-out latency: n calls in parallel, in strict waves of the concurrency, or in sequence.
    let dist = match (input.latency_uniform_ms, &input.latency) {
        (Some((a, b)), _) => Some(Latency::Uniform(a, b)),
        (None, Some(l)) => Some(l.clone()),
        (None, None) => None,
    };
    if let (Some(n), Some(d)) = (n, &dist) {
        if let Some((v, formula)) = expected_max(d, n) {
            row!(rows; "fanout_expected_max_ms" => v, "ms";
                "{} calls in parallel: E[max of {}]", f(n), f(n); "{}", formula);
        }
        if let Some(c) = conc.filter(|c| *c < n) {
            if let Some((v, formula)) = strict_waves(d, n, c) {
                row!(rows; "strict_waves_ms" => v, "ms";
                    "{} calls in strict waves of {}", f(n), f(c); "{}", formula);
            }
        }
    }
    if let (Some(n), Some(w_ms)) = (n, w_ms) {
        row!(rows; "sequential_ms" => n * w_ms, "ms";
            "{} calls one after another", f(n); "{} × {}", f(n), f(w_ms));
    }

    // TPM exhaustion: a burst faster than the TPM spends the minute's budget early.
    if let (Some(t), Some(b), Some(k)) = (tpm, burst, tokens) {
        let secs = t / (b * k);
        row!(rows; "tpm_exhaustion_s" => secs, "s";
            "A {} calls/s burst spends the minute's TPM in", f(b); "{} / ({} × {})", f(t), f(b), f(k));
        if secs < 60.0 {
            row!(rows; "tpm_blocked_s" => 60.0 - secs, "s";
                "… then every call is refused (429) for"; "60 − {}", f(secs));
        }
    }
    rows
}

/// E[max of `n`] latencies of `latency` in ms, where it can be computed exactly enough: every
/// distribution but a mixture (and a Pareto tail with no mean). `n` may be fractional (a mean).
pub fn expected_max_ms(latency: &Latency, n: f64) -> Option<f64> {
    expected_max(latency, n).map(|(v, _)| v)
}

/// E[max of `n`] and its formula; `None` where it cannot be computed or is not finite.
fn expected_max(latency: &Latency, n: f64) -> Option<(f64, String)> {
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
fn strict_waves(latency: &Latency, n: f64, c: f64) -> Option<(f64, String)> {
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

/// H(n), the harmonic number (also for fractional `n`, as ψ(n+1) + γ): shifted up to 20 and
/// then its asymptotic series, whose next term is below 1e-15 there.
fn harmonic(n: f64) -> f64 {
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

/// P(Z > z) for a standard normal Z.
fn upper_tail(z: f64) -> f64 {
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
fn gamma(x: f64) -> f64 {
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
fn integrate(f: &dyn Fn(f64) -> f64, a: f64, b: f64) -> Option<f64> {
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

/// A number for people: integers whole, others to about four significant figures, with
/// thousands separated by commas (`10,000`, `166.7`, `1.25`, `0.0125`).
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    let decimals = if (v - v.round()).abs() <= 1e-9 * a {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (2 - a.log10().floor() as i32).clamp(0, 12) as usize
    };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    let (sign, digits) = text.strip_prefix('-').map_or(("", text), |d| ("-", d));
    let (int, frac) = digits
        .split_once('.')
        .map_or((digits, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if grouped == "0" && frac.is_none() {
        ""
    } else {
        sign
    };
    match frac {
        Some(frac) => format!("{sign}{grouped}.{frac}"),
        None => format!("{sign}{grouped}"),
    }
}

/// A readable table of the rows: label, value with unit, formula, in fixed-width columns.
pub fn render(rows: &[Row]) -> String {
    let width = |s: &str| s.chars().count();
    let values: Vec<String> = rows.iter().map(|r| fmt_num(r.value)).collect();
    let label_w = rows.iter().map(|r| width(&r.label)).max().unwrap_or(0);
    let value_w = values.iter().map(|v| width(v)).max().unwrap_or(0);
    let unit_w = rows.iter().map(|r| width(r.unit)).max().unwrap_or(0);
    let mut out = String::new();
    for (row, value) in rows.iter().zip(&values) {
        let line = format!(
            "{:<label_w$}  {:>value_w$} {:<unit_w$}  {}",
            row.label, value, row.unit, row.formula
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
