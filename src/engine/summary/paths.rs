//! Which paths summary.json can hold (metrics, words), and the summary as JSON.

use serde::Serialize;

use super::cost::Cost;
use super::{
    FleetSummary, GenerationSummary, Latencies, LimitSummary, NamedProviderSummary, Percentiles,
    Summary, SynthesisSummary,
};
use crate::engine::provider::transport::TransportErrors;

/// `value` as a JSON value, by way of its text: a `u128` above `u64::MAX` (a bill's
/// picodollars or tokens) becomes the nearest `f64`, as a reader of the file sees it, where
/// `serde_json::to_value` would fail on it.
pub fn json_value<T: Serialize>(value: &T) -> serde_json::Value {
    let text = serde_json::to_string(value).expect("a summary always serialises");
    serde_json::from_str(&text).expect("serde_json reads back what it wrote")
}

impl Summary {
    /// The per-provider paths summary.json holds for a scenario with these providers
    /// (`providers.NAME.FIELD`), in the file's order.
    pub fn provider_paths(names: &[String]) -> Vec<String> {
        let json =
            serde_json::to_value(NamedProviderSummary::default()).expect("always serialises");
        let fields = crate::engine::summary::slo::metric_paths(&json);
        names
            .iter()
            .flat_map(|n| fields.iter().map(move |f| format!("providers.{n}.{f}")))
            .collect()
    }

    /// Whether `path` is a metric summary.json holds for a scenario with these providers: one of
    /// [`Summary::metric_paths`] or of [`Summary::provider_paths`].
    pub fn is_metric(path: &str, providers: &[String]) -> bool {
        Summary::metric_paths().iter().any(|p| p == path)
            || Summary::provider_paths(providers).iter().any(|p| p == path)
    }

    /// Every metric summary.json can hold, as dotted paths in the file's order: what an
    /// objective or a tolerance may name. (The `synthesis` fields appear only in runs of
    /// workloads with a synthesis turn, the `generation` fields only in runs with a generating
    /// provider.)
    pub fn metric_paths() -> Vec<String> {
        crate::engine::summary::slo::metric_paths(&Summary::template())
    }

    /// The fields of summary.json that are words, not metrics (`scenario`, `mode`,
    /// `fleet.limiter`), as dotted paths in the file's order.
    pub fn label_paths() -> Vec<String> {
        let json = Summary::template();
        crate::engine::summary::slo::leaves(&json)
            .into_iter()
            .filter(|(_, v)| v.is_string())
            .map(|(path, _)| path)
            .collect()
    }

    /// A summary with every optional section present, as JSON: every field summary.json can
    /// hold.
    fn template() -> serde_json::Value {
        let template = Summary {
            synthesis: Some(SynthesisSummary::default()),
            fleet: Some(FleetSummary::default()),
            concurrency_limit: Some(LimitSummary::default()),
            transport_errors: Some(TransportErrors::default()),
            cost: Some(Cost {
                per_good_query_usd: Some(0.0),
                ..Cost::default()
            }),
            generation: Some(GenerationSummary {
                ttft_ms: Some(Percentiles::default()),
                tpot_ms: Some(Percentiles::default()),
                ..GenerationSummary::default()
            }),
            latency_ms: Latencies {
                client: Some(Percentiles::default()),
                ..Latencies::default()
            },
            ..Summary::default()
        };
        serde_json::to_value(template).expect("a summary always serialises")
    }

    /// The summary as pretty JSON, with a final newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a summary always serialises");
        s.push('\n');
        s
    }

    /// The summary as a JSON value, what the checks, sweeps and comparisons read (a sum past
    /// u64 as its nearest f64, as a reader of the file sees it).
    pub fn to_value(&self) -> serde_json::Value {
        json_value(self)
    }
}
