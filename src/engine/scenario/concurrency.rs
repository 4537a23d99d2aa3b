//! `scheduler.max_concurrency`: a fixed number of calls in flight (0 unbounded), or an
//! adaptive limit, `{ adaptive = "aimd" | "gradient" | "fixed", initial, min, max, backoff,
//! ... }`. `"fixed"` holds the limit at `max`: a sweep over
//! `scheduler.max_concurrency.adaptive` then sets fixed and adaptive limits side by side.
//!
//! Read like every other key: serde reads [`RawConcurrency`] (types and unknown keys), then
//! [`concurrency`] checks the values and builds the limit.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::scheduler::{Adaptive, Aimd, Gradient};

use super::bounds::{self, bad, count, num, Invalid};

const KEY: &str = "scheduler.max_concurrency";

/// `max_concurrency` as written: a whole number, or an adaptive limit's table.
#[derive(Debug, Clone, PartialEq)]
pub enum RawConcurrency {
    /// A fixed limit (0: unbounded).
    Fixed(i64),
    /// `{ adaptive = ..., max = ..., ... }`.
    Limit(RawLimit),
}

/// An adaptive limit's table as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimit {
    /// `"aimd"`, `"gradient"` or `"fixed"` (required).
    pub adaptive: Option<String>,
    /// Where the limit starts (default 4, within min..=max).
    pub initial: Option<i64>,
    /// The least it falls to (default 1).
    pub min: Option<i64>,
    /// The most it reaches (required); a fixed limit's value.
    pub max: Option<i64>,
    /// What a 429 multiplies the limit by (default 0.5).
    pub backoff: Option<f64>,
    /// The gradient's latency tolerance.
    pub tolerance: Option<f64>,
    /// The gradient's smoothing of its short window.
    pub smoothing: Option<f64>,
    /// The gradient's long window, in samples.
    pub long_window: Option<i64>,
}

impl<'de> Deserialize<'de> for RawConcurrency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = RawConcurrency;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number or a table such as { adaptive = \"aimd\", max = 32 }")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawConcurrency, E> {
                Ok(RawConcurrency::Fixed(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawConcurrency, E> {
                Ok(RawConcurrency::Fixed(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawConcurrency, M::Error> {
                RawLimit::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(RawConcurrency::Limit)
            }
        }
        d.deserialize_any(Either)
    }
}

/// The validated `max_concurrency`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Concurrency {
    /// The fixed limit, or the adaptive limit's `max` (0: unbounded).
    pub max: usize,
    /// The adaptive policy, if the limit moves.
    pub adaptive: Option<Adaptive>,
}

/// A whole number of the table, from `lo` to `hi`.
fn whole(name: &str, v: Option<i64>, lo: u64, hi: u64) -> Result<Option<u64>, Invalid> {
    let key = format!("{KEY}.{name}");
    v.map(|i| {
        let n = u64::try_from(i)
            .map_err(|_| bad(&key, format!("must be from {lo} to {hi}, got {i}")))?;
        count(&key, n, lo, hi)
    })
    .transpose()
}

/// A number of the table that must lie in `ok` (`what` says where, for the message).
fn within(name: &str, v: f64, ok: impl Fn(f64) -> bool, what: &str) -> Result<f64, Invalid> {
    if ok(v) {
        Ok(v)
    } else {
        Err(bad(
            &format!("{KEY}.{name}"),
            format!("must be {what}, got {}", num(v)),
        ))
    }
}

/// Checks `max_concurrency` (absent: 0, unbounded).
pub(super) fn concurrency(v: Option<&RawConcurrency>) -> Result<Concurrency, Invalid> {
    let hi = bounds::MAX_CONCURRENCY;
    let t = match v {
        None => return Ok(fixed(0)),
        Some(RawConcurrency::Fixed(i)) => {
            let n = u64::try_from(*i)
                .map_err(|_| bad(KEY, format!("must be from 0 to {hi}, got {i}")))?;
            return Ok(fixed(count(KEY, n, 0, hi)?));
        }
        Some(RawConcurrency::Limit(t)) => t,
    };
    let policy = t.adaptive.as_deref().ok_or_else(|| {
        bad(
            &format!("{KEY}.adaptive"),
            "is required in a table: \"aimd\", \"gradient\" or \"fixed\"",
        )
    })?;
    if !matches!(policy, "fixed" | "aimd" | "gradient") {
        return Err(bad(
            &format!("{KEY}.adaptive"),
            format!("must be \"aimd\", \"gradient\" or \"fixed\", got {policy:?}"),
        ));
    }
    let max = whole("max", t.max, 1, hi)?.ok_or_else(|| {
        bad(
            &format!("{KEY}.max"),
            "is required: the most calls in flight the limit may reach",
        )
    })?;
    // The keys given beyond `adaptive` and `max`, in the table's order.
    let given = [
        ("initial", t.initial.is_some()),
        ("min", t.min.is_some()),
        ("backoff", t.backoff.is_some()),
        ("tolerance", t.tolerance.is_some()),
        ("smoothing", t.smoothing.is_some()),
        ("long_window", t.long_window.is_some()),
    ];
    let first_given = |names: &[&str]| {
        given
            .iter()
            .find(|(k, set)| *set && names.contains(k))
            .map(|(k, _)| format!("{KEY}.{k}"))
    };
    if policy == "fixed" {
        return match first_given(&[
            "initial",
            "min",
            "backoff",
            "tolerance",
            "smoothing",
            "long_window",
        ]) {
            Some(k) => Err(bad(&k, "a fixed limit has only max (the limit)")),
            None => Ok(fixed(max)),
        };
    }
    if policy == "aimd" {
        if let Some(k) = first_given(&["tolerance", "smoothing", "long_window"]) {
            return Err(bad(&k, "is a setting of the gradient only"));
        }
    }
    let min = whole("min", t.min, 1, hi)?.unwrap_or(1);
    let initial = whole("initial", t.initial, 1, hi)?.unwrap_or_else(|| 4.clamp(min, max.max(min)));
    if !(min <= initial && initial <= max) {
        return Err(bad(
            KEY,
            format!("needs min <= initial <= max, got min {min}, initial {initial}, max {max}"),
        ));
    }
    let backoff = within(
        "backoff",
        t.backoff.unwrap_or(0.5),
        |b| b > 0.0 && b < 1.0,
        "above 0 and below 1 (what a 429 multiplies the limit by)",
    )?;
    let (initial, min, max) = (initial as usize, min as usize, max as usize);
    let adaptive = if policy == "aimd" {
        Adaptive::Aimd(Aimd {
            initial,
            min,
            max,
            backoff,
        })
    } else {
        let d = Gradient::new(initial, min, max);
        let tolerance = t.tolerance.unwrap_or(d.tolerance);
        let smoothing = t.smoothing.unwrap_or(d.smoothing);
        let window = whole("long_window", t.long_window, 1, 1_000_000)?;
        Adaptive::Gradient(Gradient {
            backoff,
            tolerance: within(
                "tolerance",
                tolerance,
                |v| (1.0..=100.0).contains(&v),
                "from 1 to 100",
            )?,
            smoothing: within(
                "smoothing",
                smoothing,
                |v| v > 0.0 && v <= 1.0,
                "above 0 and at most 1",
            )?,
            long_window: window.map_or(d.long_window, |w| w as u32),
            ..d
        })
    };
    Ok(Concurrency {
        max,
        adaptive: Some(adaptive),
    })
}

fn fixed(n: u64) -> Concurrency {
    Concurrency {
        max: n as usize,
        adaptive: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        v: RawConcurrency,
    }

    fn parse(text: &str) -> Result<Concurrency, Invalid> {
        let h: Holder = toml::from_str(&format!("v = {text}")).map_err(|e| Invalid {
            key: KEY.into(),
            message: e.message().to_string(),
        })?;
        concurrency(Some(&h.v))
    }

    #[test]
    fn numbers_and_tables() {
        assert_eq!(parse("8").unwrap(), fixed(8));
        assert_eq!(
            parse("{ adaptive = \"fixed\", max = 8 }").unwrap(),
            fixed(8)
        );
        let a = parse("{ adaptive = \"aimd\", max = 32 }").unwrap();
        assert_eq!(
            a.adaptive,
            Some(Adaptive::Aimd(Aimd {
                initial: 4,
                min: 1,
                max: 32,
                backoff: 0.5
            }))
        );
        assert_eq!(a.max, 32);
        let g = parse("{ adaptive = \"gradient\", initial = 2, min = 2, max = 3, tolerance = 2 }")
            .unwrap();
        assert_eq!(
            g.adaptive,
            Some(Adaptive::Gradient(Gradient {
                tolerance: 2.0,
                ..Gradient::new(2, 2, 3)
            }))
        );
    }

    #[test]
    fn bad_tables_name_the_key() {
        for (text, key, says) in [
            ("-1", KEY, "from 0 to"),
            ("\"many\"", KEY, "whole number or a table"),
            (
                "{ max = 8 }",
                "scheduler.max_concurrency.adaptive",
                "required",
            ),
            (
                "{ adaptive = \"aimd\" }",
                "scheduler.max_concurrency.max",
                "required",
            ),
            (
                "{ adaptive = \"tcp\", max = 8 }",
                "scheduler.max_concurrency.adaptive",
                "\"tcp\"",
            ),
            // The name is checked before the bounds.
            (
                "{ adaptive = \"AIMD\" }",
                "scheduler.max_concurrency.adaptive",
                "\"AIMD\"",
            ),
            (
                "{ adaptive = \"aimd\", max = 8, min = 9 }",
                KEY,
                "min <= initial <= max",
            ),
            (
                "{ adaptive = \"aimd\", max = 8, backoff = 1 }",
                "scheduler.max_concurrency.backoff",
                "below 1",
            ),
            (
                "{ adaptive = \"aimd\", max = 8, tolerance = 2 }",
                "scheduler.max_concurrency.tolerance",
                "gradient only",
            ),
            (
                "{ adaptive = \"fixed\", max = 8, min = 2 }",
                "scheduler.max_concurrency.min",
                "only max",
            ),
            (
                "{ adaptive = \"gradient\", max = 8, smoothing = 0 }",
                "scheduler.max_concurrency.smoothing",
                "above 0",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.key, key, "{text}");
            assert!(e.message.contains(says), "{text}: {}", e.message);
        }
    }

    #[test]
    fn a_file_names_the_key_serde_refuses() {
        let scenario = |v: &str| {
            format!("name = \"t\"\n[provider]\nrpm = 600\nlatency = {{ dist = \"constant\", ms = 100 }}\n[workload]\nqueries = 1\ncalls_per_query = 1\ntokens_per_call = 1\n[scheduler]\nmax_concurrency = {v}\n")
        };
        let path = std::path::Path::new("t.toml");
        for (v, says) in [
            (
                "{ adaptive = \"aimd\", max = 8, step = 2 }",
                "unknown field `step`",
            ),
            ("\"many\"", "expected a whole number or a table"),
            (
                "{ adaptive = \"aimd\", max = \"8\" }",
                "invalid type: string",
            ),
        ] {
            let e = super::super::parse(&scenario(v), path, &[])
                .expect_err(v)
                .to_string();
            assert!(e.contains("scheduler.max_concurrency"), "{v}: {e}");
            assert!(e.contains(says), "{v}: {e}");
        }
        let s = super::super::parse(&scenario("{ adaptive = \"aimd\", max = 8 }"), path, &[])
            .expect("a valid limit");
        assert_eq!(s.scheduler.max_concurrency, 8);
    }
}
