//! What a server serves, as named values: `GET /config` answers them, and a client that found
//! a mock already running compares them with the model it expects, so that a mock started for
//! another scenario or at another time scale is refused instead of measured.
//!
//! Every value that decides what the provider does is here: limits, how they are counted,
//! Retry-After, latency, generation (output tokens, time to first token, time per token), the
//! largest `max_tokens` accepted (`max_output_tokens`),
//! capacity, errors, the time scale and named latencies. The seed is
//! not: it changes which draws come out, not the model they come from. Each is written as a
//! scenario writes it (`spell.rs`): `{ dist = "constant", ms = 10 }`, never a Rust form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::spell;
use super::ServerConfig;

/// The longest value an error message quotes (an empirical latency can be long).
const QUOTE_CHARS: usize = 80;
/// The longest value `/config` writes out; a longer one (an empirical latency's values) is
/// written as its length and a hash, which compare as well.
const WRITTEN_CHARS: usize = 200;

/// `GET /config`: the model's values by name, and the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Described {
    /// Each value that decides what the provider does, by name.
    pub model: BTreeMap<String, String>,
    /// The seed of the model's randomness.
    pub seed: u64,
}

impl ServerConfig {
    /// The values that decide what the provider does, by name, each in the scenario's own
    /// TOML spelling (see the module docs).
    pub fn described(&self) -> Described {
        let p = &self.provider;
        let mut model = BTreeMap::new();
        let mut put = |key: &str, value: String| {
            model.insert(key.to_string(), shortened(value));
        };
        put("provider.rpm", spell::limit(p.rpm));
        put("provider.tpm", spell::limit(p.tpm));
        put("provider.itpm", spell::limit(p.itpm));
        put("provider.otpm", spell::limit(p.otpm));
        put("provider.window", spell::window(p.window));
        if p.clock_from != crate::config::ClockFrom::Start {
            put("provider.clock_from", spell::clock_from(p.clock_from));
        }
        put("provider.retry_after", spell::retry_after(p.retry_after));
        put("provider.latency", spell::latency(&p.latency));
        put(
            "provider.max_in_flight",
            p.max_in_flight
                .map_or_else(|| "unlimited".to_string(), |n| n.to_string()),
        );
        put("provider.overload", spell::overload(p.overload));
        put("provider.error_rate", spell::num(p.error_rate));
        put("provider.error_mix", spell::error_mix(p.error_split));
        put("provider.timeout_rate", spell::num(p.timeout_rate));
        put(
            "provider.max_output_tokens",
            p.max_output_tokens.to_string(),
        );
        if let Some(g) = &p.generation {
            put("provider.output_tokens", spell::tokens(&g.output_tokens));
            put("provider.ttft", spell::latency(&g.ttft));
            put("provider.tpot", spell::latency(&g.tpot));
        }
        if let Some(price) = &p.price {
            put("provider.price", spell::price(price));
        }
        if !p.phases.is_empty() {
            put("provider.phases", spell::phases(&p.phases, p));
        }
        put("time_scale", spell::num(self.time_scale));
        for (name, latency) in &self.latencies {
            put(&format!("latencies.{name}"), spell::latency(latency));
        }
        for (name, rate) in &self.error_rates {
            put(&format!("error_rates.{name}"), spell::num(*rate));
        }
        Described {
            model,
            seed: self.seed,
        }
    }
}

/// `value`, or its length and hash if it is longer than [`WRITTEN_CHARS`] (the same in every
/// run: SipHash with fixed keys).
fn shortened(value: String) -> String {
    if value.len() <= WRITTEN_CHARS {
        return value;
    }
    let mut h = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&value, &mut h);
    format!(
        "{} chars, hash {:016x}",
        value.len(),
        std::hash::Hasher::finish(&h)
    )
}

/// Where the model `theirs` (served) differs from `ours` (expected), one entry a name in name
/// order: `provider.rpm: 120 (expected 60)`. Empty if they agree.
pub fn differences(
    ours: &BTreeMap<String, String>,
    theirs: &BTreeMap<String, String>,
) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let (a, b) = (ours.get(name), theirs.get(name));
            (a != b).then(|| {
                format!(
                    "{name}: {} (expected {})",
                    quote(b.map(String::as_str)),
                    quote(a.map(String::as_str))
                )
            })
        })
        .collect()
}

fn quote(v: Option<&str>) -> String {
    match v {
        None => "not set".to_string(),
        Some(s) if s.chars().count() > QUOTE_CHARS => {
            let head: String = s.chars().take(QUOTE_CHARS).collect();
            format!("{head}…")
        }
        Some(s) => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn differences_name_each_value_served_and_expected() {
        let ours = map(&[("provider.rpm", "60"), ("time_scale", "3")]);
        let theirs = map(&[
            ("provider.rpm", "120"),
            ("time_scale", "3"),
            ("latencies.model_turn", "x"),
        ]);
        assert_eq!(
            differences(&ours, &theirs),
            [
                "latencies.model_turn: x (expected not set)",
                "provider.rpm: 120 (expected 60)"
            ]
        );
        assert!(differences(&ours, &ours).is_empty());
        let long = "y".repeat(200);
        let d = differences(&ours, &map(&[("provider.rpm", &long), ("time_scale", "3")]));
        assert_eq!(
            d[0].chars().count(),
            "provider.rpm: ".len() + 81 + " (expected 60)".len()
        );
    }

    #[test]
    fn a_long_value_is_written_as_its_length_and_hash() {
        let long = "1.5, ".repeat(100);
        let short = shortened(long.clone());
        assert!(short.starts_with("500 chars, hash "), "{short}");
        assert_eq!(short, shortened(long.clone()));
        assert_ne!(short, shortened(long.replace("1.5", "2.5")));
        assert_eq!(shortened("60".into()), "60");
    }
}
