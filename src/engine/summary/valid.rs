//! A summary.json read back (a shard's `runs.jsonl`): only one this capsize could have written
//! for a virtual run is taken. Its fields are read into the types a run writes (a value that
//! does not write back as itself is refused: a field missing, of another type or unknown, a
//! number in another form), then held to the identities every virtual run keeps.

use capsize_mock::Counters;
use serde_json::Value;

use super::{Percentiles, Summary, SCHEMA_VERSION};

/// Whether a provider's counts add up: received = served + 429s + errors + never answered.
/// `Err` names `what` and the counts.
pub fn counters_add_up(what: &str, c: &Counters) -> Result<(), String> {
    let answered = [c.served, c.rate_limited, c.errored, c.timed_out]
        .into_iter()
        .try_fold(0u64, u64::checked_add);
    match answered {
        Some(n) if n == c.received => Ok(()),
        _ => Err(format!(
            "{what}: received {} is not served {} + rate_limited {} + errored {} + timed_out {}",
            c.received, c.served, c.rate_limited, c.errored, c.timed_out
        )),
    }
}

/// The first place where `read`, as given, and `back`, as the types write it, differ, in words.
fn difference(read: &Value, back: &Value, at: &str) -> String {
    let path = |k: &str| match at {
        "" => k.to_string(),
        _ => format!("{at}.{k}"),
    };
    match (read, back) {
        (Value::Object(a), Value::Object(b)) => {
            if let Some(k) = a.keys().find(|k| !b.contains_key(*k)) {
                return format!("{} is not a field summary.json has", path(k));
            }
            match a.iter().find(|(k, v)| b.get(*k) != Some(*v)) {
                Some((k, v)) => difference(v, &b[k], &path(k)),
                None => format!("{at}: a field is missing"),
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            match a.iter().zip(b).position(|(x, y)| x != y) {
                Some(i) => difference(&a[i], &b[i], &format!("{at}[{i}]")),
                None => format!("{at}: differs"),
            }
        }
        _ => format!("{at}: {read} is not written so (as {back})"),
    }
}

/// What a JSON value is, in a word.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Err` saying `what` is not so, unless `holds`.
fn need(holds: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(what())
    }
}

/// A latency's percentiles: finite, from 0, in order up to the largest, all 0 without samples.
fn ordered(what: &str, p: &Percentiles) -> Result<(), String> {
    let steps = [
        ("p50", p.p50),
        ("p90", p.p90),
        ("p95", p.p95),
        ("p99", p.p99),
        ("max", p.max),
    ];
    need(
        p.mean.is_finite() && p.mean >= 0.0 && p.mean <= p.max,
        || format!("{what}: mean {:?} is not from 0 to max {:?}", p.mean, p.max),
    )?;
    let mut below = 0.0;
    for (name, v) in steps {
        need(v.is_finite() && v >= below, || {
            format!("{what}: {name} {v:?} is below the percentile before it ({below:?})")
        })?;
        below = v;
    }
    need(p.count > 0 || p.max == 0.0, || {
        format!("{what}: no samples, and a max of {:?}", p.max)
    })
}

impl Summary {
    /// Reads `value` back as the summary.json of a virtual run this capsize wrote: its types and
    /// fields, exactly, and the identities such a run keeps. `Err` says what is not so, in one
    /// line.
    pub fn read_back(value: &Value) -> Result<Summary, String> {
        if !value.is_object() {
            return Err(format!(
                "not a summary.json of this capsize: {}, not an object",
                kind(value)
            ));
        }
        // Read from its text: serde_json's value cannot hand over a `u128` (a bill's).
        let s = serde_json::from_str::<Summary>(&value.to_string())
            .map_err(|e| format!("not a summary.json of this capsize: {e}"))?;
        let back = super::json_value(&s);
        if back != *value {
            return Err(format!(
                "not a summary.json of this capsize: {}",
                difference(value, &back, "")
            ));
        }
        need(s.schema_version == SCHEMA_VERSION, || {
            format!(
                "schema_version {}: this capsize writes {SCHEMA_VERSION}",
                s.schema_version
            )
        })?;
        need(s.capsize_version == crate::engine::VERSION, || {
            format!(
                "capsize_version {:?}: this is {:?}",
                s.capsize_version,
                crate::engine::VERSION
            )
        })?;
        need(s.mode == "virtual", || {
            format!("mode {:?}: a sweep's runs are virtual", s.mode)
        })?;
        s.counts_hold()?;
        s.figures_hold()?;
        Ok(s)
    }

    /// The identities of the counts every virtual run keeps (those tests/properties.rs holds
    /// every generated scenario to).
    fn counts_hold(&self) -> Result<(), String> {
        let p = &self.provider.counters;
        counters_add_up("provider", p)?;
        for (i, ph) in self.provider.phases.iter().enumerate() {
            counters_add_up(&format!("provider.phases[{i}]"), &ph.counters)?;
        }
        let mut sum = Some(Counters::default());
        for (name, np) in &self.providers {
            let c = &np.counts.counters;
            counters_add_up(&format!("providers.{name}"), c)?;
            for (i, ph) in np.counts.phases.iter().enumerate() {
                counters_add_up(&format!("providers.{name}.phases[{i}]"), &ph.counters)?;
            }
            sum = sum.and_then(|s| {
                Some(Counters {
                    received: s.received.checked_add(c.received)?,
                    ..s
                })
            });
        }
        need(
            self.providers.is_empty() || sum.map(|s| s.received) == Some(p.received),
            || "provider.received is not the sum of providers.*.received".into(),
        )?;
        need(p.received == self.attempts, || {
            format!(
                "provider.received {} is not attempts {}",
                p.received, self.attempts
            )
        })?;
        let ended = [self.latency_ms.call.count, self.errors, self.cancelled]
            .into_iter()
            .try_fold(0u64, u64::checked_add);
        need(ended == Some(self.calls), || {
            format!(
                "calls {} is not those answered ({}) + errors {} + cancelled {}",
                self.calls, self.latency_ms.call.count, self.errors, self.cancelled
            )
        })?;
        need(
            self.queries.checked_add(self.queries_abandoned) == Some(self.queries_started),
            || {
                format!(
                    "queries_started {} is not queries {} + queries_abandoned {}",
                    self.queries_started, self.queries, self.queries_abandoned
                )
            },
        )?;
        need(
            self.queries_failed <= self.queries && self.latency_ms.query.count <= self.queries,
            || {
                format!(
                    "more failed or timed queries than the {} finished",
                    self.queries
                )
            },
        )
    }

    /// The figures: latencies in order, rates from the counts and the time.
    fn figures_hold(&self) -> Result<(), String> {
        let l = &self.latency_ms;
        for (what, p) in [
            ("latency_ms.query", &l.query),
            ("latency_ms.call", &l.call),
            ("latency_ms.call_queue", &l.call_queue),
            ("latency_ms.call_limiter", &l.call_limiter),
            ("latency_ms.call_backoff", &l.call_backoff),
            ("latency_ms.call_service", &l.call_service),
            ("latency_ms.provider_queue", &l.provider_queue),
            ("latency_ms.query_start_lateness", &l.query_start_lateness),
        ] {
            ordered(what, p)?;
        }
        if let Some(c) = &l.client {
            ordered("latency_ms.client", c)?;
        }
        let (vs, qps, q) = (
            self.virtual_seconds,
            self.throughput.queries_per_s,
            self.queries as f64,
        );
        need(vs.is_finite() && vs >= 0.0, || {
            format!("virtual_seconds {vs:?} is not a time")
        })?;
        // Both are rounded to 3 decimals: queries = queries_per_s x seconds within that.
        let slack = 0.0005 * (qps + vs) + 1e-9 * q + 1e-6;
        need(qps >= 0.0 && (qps * vs - q).abs() <= slack, || {
            format!(
                "throughput.queries_per_s {qps:?} is not queries {} over virtual_seconds {vs:?}",
                self.queries
            )
        })?;
        let cps = self.throughput.calls_per_s;
        need(cps.is_finite() && cps >= 0.0, || {
            format!("throughput.calls_per_s {cps:?} is not a rate")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_back_only_as_a_run_writes_it() {
        let mut s = Summary {
            schema_version: SCHEMA_VERSION,
            capsize_version: crate::engine::VERSION.into(),
            mode: "virtual".into(),
            ..Summary::default()
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(Summary::read_back(&v), Ok(s.clone()));
        let with = |f: &dyn Fn(&mut Value)| {
            let mut v = v.clone();
            f(&mut v);
            Summary::read_back(&v).unwrap_err()
        };
        assert_eq!(
            with(&|v| v["pad"] = 1.into()),
            "not a summary.json of this capsize: pad is not a field summary.json has"
        );
        assert_eq!(
            with(&|v| v["throughput"]["queries_per_s"] = 0.into()),
            "not a summary.json of this capsize: throughput.queries_per_s: 0 is not written so (as 0.0)"
        );
        assert!(with(&|v| v["seed"] = (-1).into())
            .starts_with("not a summary.json of this capsize: invalid value: integer `-1`"));
        s.provider.counters.received = u64::MAX;
        s.attempts = u64::MAX;
        assert_eq!(
            Summary::read_back(&serde_json::to_value(&s).unwrap()).unwrap_err(),
            format!(
                "provider: received {} is not served 0 + rate_limited 0 + errored 0 + timed_out 0",
                u64::MAX
            )
        );
    }
}
