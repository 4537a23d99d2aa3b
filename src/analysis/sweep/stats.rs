//! Means over repeated runs, with 95 % confidence intervals (Student's t).

use serde_json::Value;

/// A mean and the half-width of its 95 % confidence interval (0 for a single run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanCi {
    /// The mean.
    pub mean: f64,
    /// Half the width of the 95 % confidence interval.
    pub ci95: f64,
}

/// Student's t, two-sided 95 %, for `df` degrees of freedom (1..=30; beyond, the normal 1.96).
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// The mean of `values` and its 95 % confidence half-width.
pub fn mean_ci(values: &[f64]) -> MeanCi {
    let n = values.len();
    if n == 0 {
        return MeanCi {
            mean: 0.0,
            ci95: 0.0,
        };
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return MeanCi { mean, ci95: 0.0 };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    MeanCi {
        mean,
        ci95: t95(n - 1) * (var / n as f64).sqrt(),
    }
}

/// `runs` (summary.json values of one shape) with every number replaced by its mean over the
/// runs; anything else (strings, nulls) taken from the first run.
pub fn mean_json(runs: &[Value]) -> Value {
    fn merge(first: &Value, all: &[&Value]) -> Value {
        match first {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let children: Vec<&Value> = all.iter().filter_map(|r| r.get(k)).collect();
                        (k.clone(), merge(v, &children))
                    })
                    .collect(),
            ),
            // Lists of objects (a provider's phases): element by element.
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let children: Vec<&Value> = all.iter().filter_map(|r| r.get(i)).collect();
                        merge(v, &children)
                    })
                    .collect(),
            ),
            Value::Number(_) => {
                let xs: Vec<f64> = all.iter().filter_map(|v| v.as_f64()).collect();
                serde_json::Number::from_f64(mean_ci(&xs).mean).map_or(Value::Null, Value::Number)
            }
            other => other.clone(),
        }
    }
    match runs.first() {
        None => Value::Null,
        Some(first) => merge(first, &runs.iter().collect::<Vec<_>>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_interval() {
        let m = mean_ci(&[1.0, 2.0, 3.0]);
        assert_eq!(m.mean, 2.0);
        // sd 1, n 3: 4.303 / sqrt(3)
        assert!((m.ci95 - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(mean_ci(&[5.0]).ci95, 0.0);
        let j = mean_json(&[
            serde_json::json!({"a": {"b": 1}, "m": "virtual"}),
            serde_json::json!({"a": {"b": 3}, "m": "virtual"}),
        ]);
        assert_eq!(j, serde_json::json!({"a": {"b": 2.0}, "m": "virtual"}));
        let j = mean_json(&[
            serde_json::json!({"phases": [{"n": 1}, {"n": 10}]}),
            serde_json::json!({"phases": [{"n": 3}, {"n": 20}]}),
        ]);
        assert_eq!(j, serde_json::json!({"phases": [{"n": 2.0}, {"n": 15.0}]}));
    }
}
