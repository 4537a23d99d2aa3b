//! Service-level objectives: thresholds on summary.json fields, k6-style.
//!
//! A scenario's `[slo]` table maps a summary.json field, by its dotted path as a quoted key, to
//! a comparison: `"latency_ms.query.p95" = "< 2000"`, `"provider.rate_limited" = "== 0"`,
//! `rpm_utilization = "<= 0.7"`. The sweep uses them to pick a recommended point; the CI gate
//! checks a run against them. A [`Tolerance`] is how much worse than a baseline a metric may
//! get in the gate's baseline comparisons.

use std::fmt;

use serde_json::Value;
use thiserror::Error;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
        }
    }

    /// Whether `value op limit` holds.
    pub fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
            Op::Eq => value == limit,
        }
    }
}

/// One objective: `metric op limit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The summary.json field, as a dotted path.
    pub metric: String,
    /// The comparison.
    pub op: Op,
    /// The limit.
    pub limit: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.metric, self.op.symbol(), self.limit)
    }
}

impl Threshold {
    /// Reads `"< 2000"` (an operator, then a finite number) for `metric`.
    pub fn parse(metric: &str, expr: &str) -> Result<Threshold, String> {
        let e = expr.trim();
        let (op, rest) = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find_map(|(s, op)| e.strip_prefix(s).map(|rest| (op, rest)))
        .ok_or_else(|| {
            format!("{expr:?} is not a comparison: write an operator (<, <=, >, >=, ==) and a number, e.g. \"< 2000\"")
        })?;
        let limit: f64 = rest
            .trim()
            .replace('_', "")
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| format!("{expr:?}: {:?} is not a number", rest.trim()))?;
        Ok(Threshold {
            metric: metric.to_string(),
            op,
            limit,
        })
    }

    /// The comparison alone: `< 2000`.
    pub fn condition(&self) -> String {
        format!("{} {}", self.op.symbol(), self.limit)
    }

    /// The metric's value in `summary` (summary.json as JSON): `None` if the field is absent,
    /// not a number, or `null` (e.g. RPM utilization without an RPM limit).
    pub fn value(&self, summary: &Value) -> Option<f64> {
        number(summary, &self.metric)
    }

    /// Whether `summary` meets this objective (a missing or null value does not).
    pub fn met(&self, summary: &Value) -> bool {
        self.value(summary)
            .is_some_and(|v| self.op.holds(v, self.limit))
    }
}

/// The field at dotted `path` in `json`.
pub fn lookup<'a>(json: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(json, |v, key| v.get(key))
}

/// The number at dotted `path` in `json` (`None` if absent, `null` or not a number).
pub fn number(json: &Value, path: &str) -> Option<f64> {
    lookup(json, path)?.as_f64()
}

/// The dotted path of `key` under `prefix` (`key` itself at the top, where `prefix` is empty).
pub fn child_path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Every leaf of a JSON document as its dotted path and value, in the document's order.
pub fn leaves(json: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(v: &'a Value, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    walk(v, &child_path(prefix, k), out);
                }
            }
            // Lists (a provider's phases, an agent's command) name no metric.
            Value::Array(_) => {}
            leaf => out.push((prefix.to_string(), leaf)),
        }
    }
    let mut out = Vec::new();
    walk(json, "", &mut out);
    out
}

/// Every dotted path to a number (or `null`) in `json`, in key order: the metrics a
/// threshold may name.
pub fn metric_paths(json: &Value) -> Vec<String> {
    leaves(json)
        .into_iter()
        .filter(|(_, v)| matches!(v, Value::Number(_) | Value::Null))
        .map(|(path, _)| path)
        .collect()
}

/// How much worse than its baseline a metric may get, as a fraction of its baseline value
/// (`0.05` is 5 %). One unit everywhere: written `5%` (percent) or `0.05` (a fraction below 1);
/// a bare number of 1 or more (`5`: 5 % or 500 %?) is refused as ambiguous.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Tolerance(f64);

/// A tolerance that cannot be read: one line saying how to write it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ToleranceError {
    /// A bare number of 1 or more: percent or a fraction?
    #[error("{written} is ambiguous: write {} (percent){}", percent_hint(*.number, *.quoted), fraction_hint(*.number))]
    Ambiguous {
        /// The value as written (quoted if it was a string).
        written: String,
        /// Its number.
        number: f64,
        /// Whether the fix is written quoted (a TOML string: `"5%"`).
        quoted: bool,
    },
    /// Not a number or a percentage, negative, or not finite.
    #[error("{written} is not a percentage such as {} or a fraction below 1 such as 0.05", percent_hint(5.0, *.quoted))]
    Invalid {
        /// The value as written (quoted if it was a string).
        written: String,
        /// Whether the fix is written quoted (a TOML string: `"5%"`).
        quoted: bool,
    },
}

fn percent_hint(number: f64, quoted: bool) -> String {
    let p = format!("{}%", crate::fmt::fmt_num(number).replace(',', ""));
    if quoted {
        format!("{p:?}")
    } else {
        p
    }
}

fn fraction_hint(number: f64) -> String {
    let f = number / 100.0;
    if f < 1.0 {
        format!(" or {} (a fraction)", crate::fmt::fmt_num(f))
    } else {
        " (a fraction must be below 1)".to_string()
    }
}

impl Tolerance {
    /// The tolerance of `fraction` (0.05 is 5 %), if it is finite and not negative.
    pub fn from_fraction(fraction: f64) -> Option<Tolerance> {
        (fraction.is_finite() && fraction >= 0.0).then_some(Tolerance(fraction))
    }

    /// Reads a flag's text (or a TOML string): `5%` or `5 %` (percent), `0.05` (a fraction
    /// below 1). A bare `5` is ambiguous and refused.
    pub fn parse(text: &str) -> Result<Tolerance, ToleranceError> {
        Self::read(text, &format!("{text:?}"), false)
    }

    /// Reads a tolerance written in a scenario file: a string (`"5%"`, `"0.05"`) or a number
    /// below 1 (`0.05`). Errors show the fix as TOML (`"5%"`).
    pub fn from_toml(value: &toml::Value) -> Result<Tolerance, ToleranceError> {
        let invalid = || ToleranceError::Invalid {
            written: value.to_string(),
            quoted: true,
        };
        match value {
            toml::Value::String(s) => Self::read(s, &value.to_string(), true),
            toml::Value::Integer(i) => Self::bare(*i as f64, &value.to_string(), true),
            toml::Value::Float(f) => Self::bare(*f, &value.to_string(), true),
            _ => Err(invalid()),
        }
    }

    fn read(text: &str, written: &str, quoted: bool) -> Result<Tolerance, ToleranceError> {
        let invalid = || ToleranceError::Invalid {
            written: written.to_string(),
            quoted,
        };
        let t = text.trim();
        match t.strip_suffix('%') {
            Some(p) => p
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|p| Tolerance::from_fraction(p / 100.0))
                .ok_or_else(invalid),
            None => Self::bare(t.parse::<f64>().map_err(|_| invalid())?, written, quoted),
        }
    }

    /// A number written without `%`: a fraction if below 1, ambiguous from 1 up.
    fn bare(number: f64, written: &str, quoted: bool) -> Result<Tolerance, ToleranceError> {
        if number >= 1.0 && number.is_finite() {
            return Err(ToleranceError::Ambiguous {
                written: written.to_string(),
                number,
                quoted,
            });
        }
        Tolerance::from_fraction(number).ok_or_else(|| ToleranceError::Invalid {
            written: written.to_string(),
            quoted,
        })
    }

    /// As a fraction of the baseline value: 0.05 for 5 %.
    pub fn fraction(self) -> f64 {
        self.0
    }

    /// In percent: 5 for 5 %.
    pub fn percent(self) -> f64 {
        self.0 * 100.0
    }
}

impl fmt::Display for Tolerance {
    /// `5 %`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} %", crate::fmt::fmt_num(self.percent()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tolerance_is_a_percentage_or_a_fraction_below_1() {
        let pct = |s: &str| Tolerance::parse(s).map(Tolerance::percent);
        assert_eq!(pct("5%"), Ok(5.0));
        assert_eq!(pct(" 5 % "), Ok(5.0));
        assert_eq!(pct("0.5%"), Ok(0.5));
        assert_eq!(pct("150%"), Ok(150.0));
        assert_eq!(Tolerance::parse("0.05").map(Tolerance::fraction), Ok(0.05));
        assert_eq!(pct("0"), Ok(0.0));
        assert_eq!(pct("0%"), Ok(0.0));
        assert_eq!(Tolerance::parse("0.05").unwrap().to_string(), "5 %");
        let e = Tolerance::parse("5").unwrap_err().to_string();
        assert_eq!(
            e,
            "\"5\" is ambiguous: write 5% (percent) or 0.05 (a fraction)"
        );
        let e = Tolerance::parse("1").unwrap_err().to_string();
        assert_eq!(
            e,
            "\"1\" is ambiguous: write 1% (percent) or 0.01 (a fraction)"
        );
        let e = Tolerance::parse("150").unwrap_err().to_string();
        assert!(
            e.ends_with("write 150% (percent) (a fraction must be below 1)"),
            "{e}"
        );
        for bad in ["five", "-5%", "-0.1", "inf", "NaN%", "%", ""] {
            assert!(
                matches!(Tolerance::parse(bad), Err(ToleranceError::Invalid { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_scenario_tolerance_has_the_same_rule_and_shows_the_fix_as_toml() {
        let v = |t: &str| toml::from_str::<toml::Table>(&format!("v = {t}")).unwrap()["v"].clone();
        let frac = |t: &str| Tolerance::from_toml(&v(t)).map(Tolerance::fraction);
        assert_eq!(frac("\"5%\""), Ok(0.05));
        assert_eq!(frac("0.05"), Ok(0.05));
        assert_eq!(frac("\"0.05\""), Ok(0.05));
        assert_eq!(frac("0"), Ok(0.0));
        let e = Tolerance::from_toml(&v("5")).unwrap_err().to_string();
        assert_eq!(
            e,
            "5 is ambiguous: write \"5%\" (percent) or 0.05 (a fraction)"
        );
        let e = Tolerance::from_toml(&v("\"10\"")).unwrap_err().to_string();
        assert_eq!(
            e,
            "\"10\" is ambiguous: write \"10%\" (percent) or 0.1 (a fraction)"
        );
        assert!(Tolerance::from_toml(&v("true")).is_err());
        assert!(Tolerance::from_toml(&v("-0.5")).is_err());
    }

    #[test]
    fn parses_and_checks_comparisons() {
        let t = Threshold::parse("latency_ms.query.p95", " <= 2_000 ").unwrap();
        assert_eq!((t.op, t.limit), (Op::Le, 2000.0));
        let json: Value = serde_json::json!({"latency_ms": {"query": {"p95": 2000.0}}, "x": null});
        assert!(t.met(&json));
        assert!(!Threshold::parse("latency_ms.query.p95", "< 2000")
            .unwrap()
            .met(&json));
        assert!(!Threshold::parse("x", ">= 0").unwrap().met(&json));
        assert!(Threshold::parse("x", "about 3").is_err());
        assert!(Threshold::parse("x", "< three").is_err());
        assert!(Threshold::parse("x", "< inf").is_err());
        assert_eq!(metric_paths(&json), ["latency_ms.query.p95", "x"]);
    }
}
