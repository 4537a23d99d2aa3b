//! Service-level objectives: thresholds on summary.json fields, k6-style.
//!
//! A scenario's `[slo]` table maps a summary.json field, by its dotted path as a quoted key, to
//! a comparison: `"latency_ms.query.p95" = "< 2000"`, `"provider.rate_limited" = "== 0"`,
//! `rpm_utilization = "<= 0.7"`. The sweep uses them to pick a recommended point; the CI gate
//! checks a run against them.

use std::fmt;

use serde_json::Value;

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

/// Every leaf of a JSON document as its dotted path and value, in the document's order.
pub fn leaves(json: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(v: &'a Value, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(v, &path, out);
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

#[cfg(test)]
mod tests {
    use super::*;

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
