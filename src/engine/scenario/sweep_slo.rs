//! The `[sweep]` and `[slo]` tables: which keys a sweep varies over which values, and the
//! objectives a run is held to.
//!
//! `[sweep]` maps a dotted key path (a quoted key) to its values: a list
//! (`"scheduler.max_concurrency" = [1, 2, 4, 8]`), a range table (`{ from = 1, to = 64, step = 1 }`)
//! or a range string (`"1..=64"`). `[slo]` maps a summary.json field to a comparison
//! (`"latency_ms.query.p95" = "< 2000"`); its sub-table `[slo.tolerance]` sets per-metric
//! tolerances for baseline comparisons, in one unit: a percentage (`"throughput.queries_per_s" =
//! "10%"`) or a fraction below 1 (`0.1`); a bare `10` is refused as ambiguous.

use std::fmt;

use crate::engine::summary::slo::{Threshold, Tolerance};

use super::bounds::{bad, Invalid};

/// One value of a swept key: an integer stays an integer (`4`, not `4.0`), so integer keys
/// accept it; a word is a choice (`fleet.limiter = ["local", "shared"]`).
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValue {
    /// An integer.
    Int(i64),
    /// A number with a fraction.
    Float(f64),
    /// A word.
    Text(String),
}

impl AxisValue {
    /// As a number (NaN for a word: a word's axis is never a chart's x axis, see
    /// [`AxisValue::is_number`]).
    pub fn as_f64(&self) -> f64 {
        match self {
            AxisValue::Int(i) => *i as f64,
            AxisValue::Float(f) => *f,
            AxisValue::Text(_) => f64::NAN,
        }
    }

    /// Whether it is a number.
    pub fn is_number(&self) -> bool {
        !matches!(self, AxisValue::Text(_))
    }

    /// As a TOML value, for `--set` (a word quoted).
    pub fn to_toml(&self) -> String {
        match self {
            AxisValue::Text(t) => toml::Value::String(t.clone()).to_string(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisValue::Int(i) => write!(f, "{i}"),
            AxisValue::Float(x) => write!(f, "{x:?}"),
            AxisValue::Text(t) => f.write_str(t),
        }
    }
}

/// One swept key and its values, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The dotted key path, e.g. `scheduler.max_concurrency`.
    pub key: String,
    /// Its values.
    pub values: Vec<AxisValue>,
}

/// The most values one range may produce.
const MAX_RANGE: usize = 100_000;

fn sweep_key(key: &str) -> String {
    format!("sweep.\"{key}\"")
}

/// A number rounded to 12 significant decimals, so `0.1 + 0.2` reads as `0.3`.
fn tidy(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let digits = 12 - v.abs().log10().ceil() as i32;
    let f = 10f64.powi(digits.clamp(-300, 300));
    (v * f).round() / f
}

fn range(key: &str, from: f64, to: f64, step: f64, ints: bool) -> Result<Vec<AxisValue>, Invalid> {
    let k = sweep_key(key);
    if !(from.is_finite() && to.is_finite() && step.is_finite()) {
        return Err(bad(&k, "from, to and step must be numbers"));
    }
    if step <= 0.0 {
        return Err(bad(&k, format!("step must be positive, got {step}")));
    }
    if from > to {
        return Err(bad(&k, format!("from ({from}) is above to ({to})")));
    }
    let n = ((to - from) / step + 1e-9).floor() as usize + 1;
    if n > MAX_RANGE {
        return Err(bad(
            &k,
            format!("the range has {n} values; at most {MAX_RANGE}"),
        ));
    }
    Ok((0..n)
        .map(|i| {
            let v = from + step * i as f64;
            if ints {
                AxisValue::Int(v.round() as i64)
            } else {
                AxisValue::Float(tidy(v))
            }
        })
        .collect())
}

/// The values of one `[sweep]` entry (a list, a range table or a `"a..=b"` string).
pub fn axis(key: &str, value: &toml::Value) -> Result<Axis, Invalid> {
    let k = sweep_key(key);
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return Err(bad(
            &k,
            "must be a dotted key path such as \"scheduler.max_concurrency\"",
        ));
    }
    let number = |v: &toml::Value| match v {
        toml::Value::Integer(i) => Some(AxisValue::Int(*i)),
        toml::Value::Float(f) if f.is_finite() => Some(AxisValue::Float(*f)),
        _ => None,
    };
    let values = match value {
        // All words, or all numbers.
        toml::Value::Array(items) if items.first().is_some_and(toml::Value::is_str) => items
            .iter()
            .map(|v| match v {
                toml::Value::String(t) => Ok(AxisValue::Text(t.clone())),
                other => Err(bad(
                    &k,
                    format!("{other} is not a word like the first value"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        toml::Value::Array(items) => items
            .iter()
            .map(|v| number(v).ok_or_else(|| bad(&k, format!("{v} is not a number"))))
            .collect::<Result<Vec<_>, _>>()?,
        toml::Value::Table(t) => {
            for name in t.keys() {
                if !["from", "to", "step"].contains(&name.as_str()) {
                    return Err(bad(
                        &k,
                        format!("unknown key {name:?} in a range (from, to, step)"),
                    ));
                }
            }
            let get = |name: &str| {
                t.get(name).map(|v| {
                    number(v).ok_or_else(|| bad(&k, format!("{name} = {v} is not a number")))
                })
            };
            let from = get("from").ok_or_else(|| bad(&k, "a range needs from"))??;
            let to = get("to").ok_or_else(|| bad(&k, "a range needs to"))??;
            let step = get("step").transpose()?.unwrap_or(AxisValue::Int(1));
            let ints = [&from, &to, &step]
                .iter()
                .all(|v| matches!(v, AxisValue::Int(_)));
            range(key, from.as_f64(), to.as_f64(), step.as_f64(), ints)?
        }
        toml::Value::String(s) => {
            let (a, b) = s.split_once("..=").ok_or_else(|| {
                bad(
                    &k,
                    format!("{s:?} is not a range: write \"1..=64\" (integers)"),
                )
            })?;
            let int = |x: &str| {
                x.trim()
                    .parse::<i64>()
                    .map_err(|_| bad(&k, format!("{s:?}: {:?} is not an integer", x.trim())))
            };
            let (a, b) = (int(a)?, int(b)?);
            range(key, a as f64, b as f64, 1.0, true)?
        }
        other => {
            return Err(bad(
                &k,
                format!("{other} is not a list, a range table or a \"a..=b\" string"),
            ))
        }
    };
    if values.is_empty() {
        return Err(bad(&k, "has no values"));
    }
    Ok(Axis {
        key: key.to_string(),
        values,
    })
}

/// The `[sweep]` table's axes, in the order written.
pub fn axes(table: &toml::Table) -> Result<Vec<Axis>, Invalid> {
    table
        .iter()
        .filter(|(k, _)| k.as_str() != PREFER)
        .map(|(k, v)| axis(k, v))
        .collect()
}

/// The `[sweep]` entry that says which passing point the recommendation prefers.
pub const PREFER: &str = "prefer";

/// Which passing point a sweep recommends: the smallest or the largest value of `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefer {
    /// A swept key.
    pub key: String,
    /// The largest value (true) or the smallest.
    pub max: bool,
}

impl fmt::Display for Prefer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", if self.max { "max" } else { "min" }, self.key)
    }
}

impl Prefer {
    /// Reads `"min scheduler.max_concurrency"` or `"max workload.sessions"`.
    pub fn parse(text: &str) -> Result<Prefer, String> {
        let (dir, key) = text.trim().split_once(char::is_whitespace).ok_or_else(|| {
            format!("{text:?}: write \"min KEY\" or \"max KEY\", e.g. \"min scheduler.max_concurrency\"")
        })?;
        let max = match dir {
            "min" => false,
            "max" => true,
            other => {
                return Err(format!(
                    "{text:?}: {other:?} is not min or max: write \"min KEY\" or \"max KEY\""
                ))
            }
        };
        Ok(Prefer {
            key: key.trim().to_string(),
            max,
        })
    }
}

/// `[sweep] prefer = "min KEY" | "max KEY"`, if given (that KEY is swept is checked when the
/// grid is built: `--sweep` flags may add it).
pub fn prefer(table: &toml::Table) -> Result<Option<Prefer>, Invalid> {
    let key = format!("sweep.{PREFER}");
    match table.get(PREFER) {
        None => Ok(None),
        Some(toml::Value::String(text)) => Prefer::parse(text).map(Some).map_err(|e| bad(&key, e)),
        Some(other) => Err(bad(
            &key,
            format!("{other} is not a string such as \"min scheduler.max_concurrency\""),
        )),
    }
}

/// Thresholds, and per-metric tolerances.
pub type Slo = (Vec<Threshold>, Vec<(String, Tolerance)>);

/// The `[slo]` table: thresholds, and per-metric tolerances from `[slo.tolerance]`.
pub fn slo(table: &toml::Table) -> Result<Slo, Invalid> {
    let mut thresholds = Vec::new();
    let mut tolerances = Vec::new();
    for (metric, v) in table {
        let k = format!("slo.\"{metric}\"");
        match (metric.as_str(), v) {
            ("tolerance", toml::Value::Table(t)) => {
                for (m, v) in t {
                    let tolerance = Tolerance::from_toml(v)
                        .map_err(|e| bad(&format!("slo.tolerance.\"{m}\""), e.to_string()))?;
                    tolerances.push((m.clone(), tolerance));
                }
            }
            (_, toml::Value::String(expr)) => {
                thresholds.push(Threshold::parse(metric, expr).map_err(|e| bad(&k, e))?);
            }
            (_, other) => {
                return Err(bad(
                    &k,
                    format!("{other} is not a comparison such as \"< 2000\""),
                ));
            }
        }
    }
    Ok((thresholds, tolerances))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn lists_ranges_and_range_strings() {
        let t = parse(
            r#"
            "scheduler.max_concurrency" = "1..=4"
            "scheduler.headroom" = { from = 0.5, to = 1.0, step = 0.1 }
            "workload.sessions" = [1, 2.5]
            "#,
        );
        let a = axes(&t).unwrap();
        assert_eq!(a[0].key, "scheduler.max_concurrency");
        assert_eq!(
            a[0].values,
            [
                AxisValue::Int(1),
                AxisValue::Int(2),
                AxisValue::Int(3),
                AxisValue::Int(4)
            ]
        );
        let h: Vec<String> = a[1].values.iter().map(|v| v.to_string()).collect();
        assert_eq!(h, ["0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]);
        assert_eq!(a[2].values, [AxisValue::Int(1), AxisValue::Float(2.5)]);
    }

    #[test]
    fn refuses_what_is_not_a_grid() {
        for bad in [
            r#""a.b" = []"#,
            r#""a.b" = ["x", 1]"#,
            r#""a.b" = [1, "x"]"#,
            r#""a.b" = [true]"#,
            r#""a.b" = "1..64""#,
            r#""a.b" = { from = 4, to = 1 }"#,
            r#""a.b" = { from = 1, to = 4, step = 0 }"#,
            r#""a.b" = { from = 1, to = 4, by = 1 }"#,
            r#""a..b" = [1]"#,
        ] {
            assert!(axes(&parse(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn slo_thresholds_and_tolerances() {
        let t = parse(
            r#"
            "latency_ms.query.p95" = "< 2000"
            [tolerance]
            "throughput.queries_per_s" = "10%"
            rpm_utilization = 0.02
            "#,
        );
        let (th, tol) = slo(&t).unwrap();
        assert_eq!(th.len(), 1);
        let tol: Vec<(&str, f64)> = tol
            .iter()
            .map(|(m, t)| (m.as_str(), t.fraction()))
            .collect();
        assert_eq!(
            tol,
            [("throughput.queries_per_s", 0.1), ("rpm_utilization", 0.02)]
        );
        assert!(slo(&parse(r#"x = 3"#)).is_err());
        assert!(slo(&parse(r#"x = "about 3""#)).is_err());
        // A bare 2 is 2 % or 200 %: refused, naming the key.
        let e = slo(&parse("[tolerance]\nrpm_utilization = 2\n")).unwrap_err();
        assert_eq!(e.key, "slo.tolerance.\"rpm_utilization\"");
        assert!(e.message.contains("is ambiguous"), "{}", e.message);
    }
}
