//! The model's values in a scenario's own TOML spelling (`{ dist = "constant", ms = 10 }`,
//! `{ input_per_mtok = 3, output_per_mtok = 15 }`, `"token_bucket"`), as `GET /config` names
//! them and a mismatch quotes them: what a user wrote, or would write, never a Rust form.
//!
//! A value kept as given is written exactly (the shortest digits that read back as it); one
//! the validated form holds derived (a mixture's weights, an error mix's shares, a token
//! log-normal's mean and p95) to 12 significant digits.

use crate::config::{ClockFrom, Overload, ProviderConfig, RetryAfter};
use crate::latency::{Latency, Z95};
use crate::phases::{Outage, Phase};
use crate::price::Price;
use crate::tokens::Tokens;
use crate::window::WindowKind;

/// A number as TOML writes it: the shortest digits that read back as `x` (`10`, `0.25`),
/// with an exponent where those would be long (`1e300`).
pub(crate) fn num(x: f64) -> String {
    let plain = format!("{x}");
    if plain.len() > 20 {
        format!("{x:e}")
    } else {
        plain
    }
}

/// A derived number (a share, a weight) to 12 significant digits, as [`num`].
fn derived(x: f64) -> String {
    let rounded: f64 = format!("{x:.11e}").parse().unwrap_or(x);
    num(rounded)
}

/// `{ k = v, ... }`.
fn table(fields: &[(&str, String)]) -> String {
    let inner: Vec<String> = fields.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    format!("{{ {} }}", inner.join(", "))
}

/// `[a, b, ...]`.
fn list(values: &[f64]) -> String {
    let inner: Vec<String> = values.iter().copied().map(num).collect();
    format!("[{}]", inner.join(", "))
}

/// A latency's fields, `dist` first.
fn latency_fields(l: &Latency) -> Vec<(&'static str, String)> {
    let dist = |name: &str| ("dist", format!("\"{name}\""));
    match l {
        Latency::Constant(ms) => vec![dist("constant"), ("ms", num(*ms))],
        Latency::Uniform(lo, hi) => {
            vec![dist("uniform"), ("min_ms", num(*lo)), ("max_ms", num(*hi))]
        }
        Latency::Normal(mean, sd) => {
            vec![dist("normal"), ("mean_ms", num(*mean)), ("sd_ms", num(*sd))]
        }
        Latency::LogNormal(mu, sigma) => {
            vec![dist("lognormal"), ("mu", num(*mu)), ("sigma", num(*sigma))]
        }
        Latency::Exponential(mean) => vec![dist("exponential"), ("mean_ms", num(*mean))],
        Latency::Pareto(scale, shape) => {
            vec![
                dist("pareto"),
                ("scale_ms", num(*scale)),
                ("shape", num(*shape)),
            ]
        }
        Latency::Empirical(values) => vec![dist("empirical"), ("values_ms", list(values))],
        Latency::Mixture(components) => {
            let mut before = 0.0;
            let mut parts = Vec::with_capacity(components.len());
            for (cumulative, l) in components {
                let mut fields = vec![("weight", derived(cumulative - before))];
                fields.extend(latency_fields(l));
                parts.push(table(&fields));
                before = *cumulative;
            }
            vec![
                dist("mixture"),
                ("components", format!("[{}]", parts.join(", "))),
            ]
        }
    }
}

/// A latency: `{ dist = "uniform", min_ms = 5, max_ms = 50 }`.
pub(crate) fn latency(l: &Latency) -> String {
    table(&latency_fields(l))
}

/// A token count: `300`, or `{ dist = "uniform", min = 50, max = 500 }`.
pub(crate) fn tokens(t: &Tokens) -> String {
    let dist = |name: &str| ("dist", format!("\"{name}\""));
    match t.as_latency() {
        Latency::Constant(n) => num(*n),
        Latency::Uniform(lo, hi) => table(&[dist("uniform"), ("min", num(*lo)), ("max", num(*hi))]),
        Latency::LogNormal(mu, sigma) => table(&[
            dist("lognormal"),
            ("mean", derived((mu + sigma * sigma / 2.0).exp())),
            ("p95", derived((mu + Z95 * sigma).exp())),
        ]),
        Latency::Empirical(values) => table(&[dist("empirical"), ("values", list(values))]),
        other => latency(other),
    }
}

/// A word in quotes.
fn word(w: &str) -> String {
    format!("\"{w}\"")
}

/// `retry_after`: `"auto"`, `"none"` or seconds.
pub(crate) fn retry_after(r: RetryAfter) -> String {
    match r {
        RetryAfter::Auto => word("auto"),
        RetryAfter::None => word("none"),
        RetryAfter::Fixed(d) => num(d.as_secs_f64()),
    }
}

/// `window`.
pub(crate) fn window(w: WindowKind) -> String {
    word(match w {
        WindowKind::Sliding => "sliding",
        WindowKind::Fixed => "fixed",
        WindowKind::TokenBucket => "token_bucket",
    })
}

/// `clock_from`.
pub(crate) fn clock_from(c: ClockFrom) -> String {
    word(match c {
        ClockFrom::Start => "start",
        ClockFrom::FirstRequest => "first_request",
    })
}

/// `overload`.
pub(crate) fn overload(o: Overload) -> String {
    word(match o {
        Overload::Queue => "queue",
        Overload::Reject429 => "429",
        Overload::Reject503 => "503",
    })
}

/// `error_mix`, from the cumulative shares of 500 and 503: `{ 500 = 0.5, 503 = 0.5, 529 = 0 }`.
pub(crate) fn error_mix(split: [f64; 2]) -> String {
    table(&[
        ("500", derived(split[0])),
        ("503", derived(split[1] - split[0])),
        ("529", derived(1.0 - split[1])),
    ])
}

/// Dollars per million tokens from picodollars per token, exactly: `3`, `0.3`, `1.234567`.
fn per_mtok(picodollars: impl Into<u128>) -> String {
    let ps: u128 = picodollars.into();
    let (whole, micro) = (ps / 1_000_000, ps % 1_000_000);
    if micro == 0 {
        return whole.to_string();
    }
    let frac = format!("{micro:06}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// `price`: `{ input_per_mtok = 3, output_per_mtok = 15 }`, the keys left at their defaults
/// left out.
pub(crate) fn price(p: &Price) -> String {
    let mut fields = vec![
        ("input_per_mtok", per_mtok(p.input)),
        ("output_per_mtok", per_mtok(p.output)),
    ];
    if p.cached_input != p.input {
        fields.push(("cached_input_per_mtok", per_mtok(p.cached_input)));
    }
    if p.cached_input_share > 0.0 {
        fields.push(("cached_input_share", num(p.cached_input_share)));
    }
    if p.bill_errors {
        fields.push(("bill_errors", "true".into()));
    }
    table(&fields)
}

/// A limit per minute, or `unlimited` (the key left out).
pub(crate) fn limit(v: Option<f64>) -> String {
    v.map_or_else(|| "unlimited".to_string(), num)
}

/// `phases`: each phase as its `[[provider.phases]]` entry, `at_s` or `from_s` and `to_s`,
/// then the keys whose values differ from the provider's own table `base` (and `latency` and
/// `error_rate` where the phase sets them).
pub(crate) fn phases(phases: &[Phase], base: &ProviderConfig) -> String {
    let entries: Vec<String> = phases.iter().map(|p| phase(p, base)).collect();
    format!("[{}]", entries.join(", "))
}

fn phase(p: &Phase, base: &ProviderConfig) -> String {
    let mut f: Vec<(&str, String)> = match p.to {
        None => vec![("at_s", num(p.from.as_secs_f64()))],
        Some(to) => vec![
            ("from_s", num(p.from.as_secs_f64())),
            ("to_s", num(to.as_secs_f64())),
        ],
    };
    if let Some(o) = p.outage {
        f.push((
            "outage",
            word(match o {
                Outage::Unavailable => "503",
                Outage::NoAnswer => "no_answer",
            }),
        ));
    }
    let c = &p.config;
    for (key, ours, theirs) in [
        ("rpm", c.rpm, base.rpm),
        ("tpm", c.tpm, base.tpm),
        ("itpm", c.itpm, base.itpm),
        ("otpm", c.otpm, base.otpm),
    ] {
        if ours != theirs {
            f.push((key, limit(ours)));
        }
    }
    if c.retry_after != base.retry_after {
        f.push(("retry_after", retry_after(c.retry_after)));
    }
    if p.sets_latency || c.latency != base.latency {
        f.push(("latency", latency(&c.latency)));
    }
    if c.max_in_flight != base.max_in_flight {
        let n = c
            .max_in_flight
            .map_or_else(|| "unlimited".into(), |n| n.to_string());
        f.push(("max_in_flight", n));
    }
    if c.overload != base.overload {
        f.push(("overload", overload(c.overload)));
    }
    if p.sets_error_rate || c.error_rate != base.error_rate {
        f.push(("error_rate", num(c.error_rate)));
    }
    if c.error_split != base.error_split {
        f.push(("error_mix", error_mix(c.error_split)));
    }
    if c.timeout_rate != base.timeout_rate {
        f.push(("timeout_rate", num(c.timeout_rate)));
    }
    if let (Some(g), theirs) = (&c.generation, &base.generation) {
        let theirs = theirs.as_ref();
        if theirs.is_none_or(|t| t.output_tokens != g.output_tokens) {
            f.push(("output_tokens", tokens(&g.output_tokens)));
        }
        if theirs.is_none_or(|t| t.ttft != g.ttft) {
            f.push(("ttft", latency(&g.ttft)));
        }
        if theirs.is_none_or(|t| t.tpot != g.tpot) {
            f.push(("tpot", latency(&g.tpot)));
        }
    }
    if let Some(pr) = c.price.as_ref().filter(|pr| Some(**pr) != base.price) {
        f.push(("price", price(pr)));
    }
    table(&f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_toml_reads_them() {
        assert_eq!(num(10.0), "10");
        assert_eq!(num(0.25), "0.25");
        assert_eq!(num(1e300), "1e300");
        assert_eq!(num(1.5e-12), "0.0000000000015");
        assert_eq!(num(1.5e-30), "1.5e-30");
        assert_eq!(derived(1.0 - 2.0 / 3.0), "0.333333333333");
        assert_eq!(per_mtok(3_000_000u64), "3");
        assert_eq!(per_mtok(300_000u64), "0.3");
        assert_eq!(per_mtok(1_234_567u64), "1.234567");
        assert_eq!(per_mtok(1u64), "0.000001");
    }

    #[test]
    fn every_latency_is_spelled_as_a_scenario_writes_it() {
        for (l, text) in [
            (Latency::Constant(10.0), r#"{ dist = "constant", ms = 10 }"#),
            (
                Latency::Uniform(5.0, 50.0),
                r#"{ dist = "uniform", min_ms = 5, max_ms = 50 }"#,
            ),
            (
                Latency::Normal(100.0, 20.5),
                r#"{ dist = "normal", mean_ms = 100, sd_ms = 20.5 }"#,
            ),
            (
                Latency::LogNormal(5.0, 0.5),
                r#"{ dist = "lognormal", mu = 5, sigma = 0.5 }"#,
            ),
            (
                Latency::Exponential(80.0),
                r#"{ dist = "exponential", mean_ms = 80 }"#,
            ),
            (
                Latency::Pareto(10.0, 2.5),
                r#"{ dist = "pareto", scale_ms = 10, shape = 2.5 }"#,
            ),
            (
                Latency::Empirical(vec![1.0, 2.5]),
                r#"{ dist = "empirical", values_ms = [1, 2.5] }"#,
            ),
            (
                Latency::Mixture(vec![
                    (0.25, Latency::Constant(1.0)),
                    (1.0, Latency::Exponential(9.0)),
                ]),
                r#"{ dist = "mixture", components = [{ weight = 0.25, dist = "constant", ms = 1 }, { weight = 0.75, dist = "exponential", mean_ms = 9 }] }"#,
            ),
        ] {
            let spelled = latency(&l);
            assert_eq!(spelled, text);
            // And it reads back as the same distribution.
            let raw: crate::RawLatency = toml::from_str::<toml::Table>(&format!("l = {spelled}"))
                .unwrap()["l"]
                .clone()
                .try_into()
                .unwrap();
            assert_eq!(raw.build("l", std::path::Path::new(".")).unwrap(), l);
        }
    }
}
