//! `scheduler.max_concurrency`: a fixed number of calls in flight (0 unbounded), or an
//! adaptive limit, `{ adaptive = "aimd" | "gradient" | "fixed", initial, min, max, backoff,
//! ... }`. `"fixed"` holds the limit at `max`: a sweep over
//! `scheduler.max_concurrency.adaptive` then sets fixed and adaptive limits side by side.

use toml::Value;

use crate::scheduler::{Adaptive, Aimd, Gradient};

use super::bounds::{self, bad, count, num, Invalid};

const KEY: &str = "scheduler.max_concurrency";

/// The keys an adaptive table may have.
const KEYS: [&str; 8] = [
    "adaptive",
    "initial",
    "min",
    "max",
    "backoff",
    "tolerance",
    "smoothing",
    "long_window",
];

/// The keys only the gradient has.
const GRADIENT_ONLY: [&str; 3] = ["tolerance", "smoothing", "long_window"];

/// A limit that moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Aimd,
    Gradient,
}

/// The validated `max_concurrency`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Concurrency {
    /// The fixed limit, or the adaptive limit's `max` (0: unbounded).
    pub max: usize,
    /// The adaptive policy, if the limit moves.
    pub adaptive: Option<Adaptive>,
}

fn integer(t: &toml::Table, name: &str, lo: u64, hi: u64) -> Result<Option<u64>, Invalid> {
    let key = format!("{KEY}.{name}");
    match t.get(name) {
        None => Ok(None),
        Some(Value::Integer(i)) => {
            let v = u64::try_from(*i)
                .map_err(|_| bad(&key, format!("must be from {lo} to {hi}, got {i}")))?;
            count(&key, v, lo, hi).map(Some)
        }
        Some(other) => Err(bad(
            &key,
            format!("must be a whole number, got {}", other.type_str()),
        )),
    }
}

fn number(t: &toml::Table, name: &str, default: f64) -> Result<f64, Invalid> {
    match t.get(name) {
        None => Ok(default),
        Some(Value::Float(f)) => Ok(*f),
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(other) => Err(bad(
            &format!("{KEY}.{name}"),
            format!("must be a number, got {}", other.type_str()),
        )),
    }
}

/// Checks `max_concurrency` (absent: 0, unbounded).
pub(super) fn concurrency(v: Option<&Value>) -> Result<Concurrency, Invalid> {
    let t = match v {
        None => return fixed(0),
        Some(Value::Integer(i)) => {
            let n = u64::try_from(*i).map_err(|_| {
                bad(
                    KEY,
                    format!("must be from 0 to {}, got {i}", bounds::MAX_CONCURRENCY),
                )
            })?;
            return fixed(count(KEY, n, 0, bounds::MAX_CONCURRENCY)?);
        }
        Some(Value::Table(t)) => t,
        Some(other) => {
            return Err(bad(
                KEY,
                format!(
                    "must be a whole number or a table such as {{ adaptive = \"aimd\", max = 32 }}, got {}",
                    other.type_str()
                ),
            ))
        }
    };
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(
            &format!("{KEY}.{k}"),
            format!("unknown key; expected one of {}", KEYS.join(", ")),
        ));
    }
    let policy = match t.get("adaptive") {
        Some(Value::String(p)) => p.as_str(),
        Some(other) => {
            return Err(bad(
                &format!("{KEY}.adaptive"),
                format!(
                    "must be \"aimd\", \"gradient\" or \"fixed\", got {}",
                    other.type_str()
                ),
            ))
        }
        None => {
            return Err(bad(
                &format!("{KEY}.adaptive"),
                "is required in a table: \"aimd\", \"gradient\" or \"fixed\"",
            ))
        }
    };
    // The policy of a moving limit; none for "fixed".
    let policy = match policy {
        "fixed" => None,
        "aimd" => Some(Policy::Aimd),
        "gradient" => Some(Policy::Gradient),
        other => {
            return Err(bad(
                &format!("{KEY}.adaptive"),
                format!("must be \"aimd\", \"gradient\" or \"fixed\", got {other:?}"),
            ))
        }
    };
    let hi = bounds::MAX_CONCURRENCY;
    let max = integer(t, "max", 1, hi)?.ok_or_else(|| {
        bad(
            &format!("{KEY}.max"),
            "is required: the most calls in flight the limit may reach",
        )
    })?;
    let Some(policy) = policy else {
        if let Some(k) = t.keys().find(|k| !matches!(k.as_str(), "adaptive" | "max")) {
            return Err(bad(
                &format!("{KEY}.{k}"),
                "a fixed limit has only max (the limit)",
            ));
        }
        return fixed(max);
    };
    if policy == Policy::Aimd {
        if let Some(k) = GRADIENT_ONLY.iter().find(|k| t.contains_key(**k)) {
            return Err(bad(
                &format!("{KEY}.{k}"),
                "is a setting of the gradient only",
            ));
        }
    }
    let min = integer(t, "min", 1, hi)?.unwrap_or(1);
    let initial = integer(t, "initial", 1, hi)?.unwrap_or_else(|| 4.clamp(min, max.max(min)));
    if !(min <= initial && initial <= max) {
        return Err(bad(
            KEY,
            format!("needs min <= initial <= max, got min {min}, initial {initial}, max {max}"),
        ));
    }
    let backoff = number(t, "backoff", 0.5)?;
    if !(backoff > 0.0 && backoff < 1.0) {
        return Err(bad(
            &format!("{KEY}.backoff"),
            format!(
                "must be above 0 and below 1 (what a 429 multiplies the limit by), got {}",
                num(backoff)
            ),
        ));
    }
    let (initial, min, max) = (initial as usize, min as usize, max as usize);
    let adaptive = match policy {
        Policy::Aimd => Adaptive::Aimd(Aimd {
            initial,
            min,
            max,
            backoff,
        }),
        Policy::Gradient => {
            let d = Gradient::new(initial, min, max);
            let tolerance = number(t, "tolerance", d.tolerance)?;
            if !(1.0..=100.0).contains(&tolerance) {
                return Err(bad(
                    &format!("{KEY}.tolerance"),
                    format!("must be from 1 to 100, got {}", num(tolerance)),
                ));
            }
            let smoothing = number(t, "smoothing", d.smoothing)?;
            if !(smoothing > 0.0 && smoothing <= 1.0) {
                return Err(bad(
                    &format!("{KEY}.smoothing"),
                    format!("must be above 0 and at most 1, got {}", num(smoothing)),
                ));
            }
            let window = integer(t, "long_window", 1, 1_000_000)?;
            Adaptive::Gradient(Gradient {
                backoff,
                tolerance,
                smoothing,
                long_window: window.map_or(d.long_window, |w| w as u32),
                ..d
            })
        }
    };
    Ok(Concurrency {
        max,
        adaptive: Some(adaptive),
    })
}

fn fixed(n: u64) -> Result<Concurrency, Invalid> {
    Ok(Concurrency {
        max: n as usize,
        adaptive: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Concurrency, Invalid> {
        let v: toml::Table = toml::from_str(&format!("v = {text}")).expect("toml");
        concurrency(v.get("v"))
    }

    #[test]
    fn numbers_and_tables() {
        assert_eq!(parse("8").unwrap(), fixed(8).unwrap());
        assert_eq!(
            parse("{ adaptive = \"fixed\", max = 8 }").unwrap(),
            fixed(8).unwrap()
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
                "{ adaptive = \"aimd\", max = 8, step = 2 }",
                "scheduler.max_concurrency.step",
                "unknown key",
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
}
