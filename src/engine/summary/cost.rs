//! What a run cost (summary.json's `cost`, present when a provider has a `price`): the
//! providers' bills in dollars, in all, per query started and per good query (finished, none
//! of its calls failed), by kind of token, and what was **wasted**: billed answers nobody used
//! (the client timed out, hung up or had abandoned the query: orphans), and the answers used
//! by queries that failed or were abandoned all the same.
//!
//! Every figure comes from whole picodollars (`capsize_mock::price`): the provider bills each
//! answer as it decides it, the client books each answer it used, and the waste is the
//! difference, so a virtual run's dollars are exact.

use capsize_mock::price::usd;
use capsize_mock::Bill;

use crate::engine::recorder::Spent;
use serde::{Deserialize, Serialize};

/// One provider's part of the bill.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderCost {
    /// The provider's name.
    pub name: String,
    /// What it billed, in dollars.
    pub total_usd: f64,
    /// Of which its answers no query used, in dollars (the answers failed queries used are
    /// in the run's `failed_queries_usd`, not split by provider).
    pub unused_answers_usd: f64,
}

/// summary.json's `cost`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Everything billed, in dollars.
    pub total_usd: f64,
    /// Over the queries started.
    pub per_query_usd: f64,
    /// Over the good queries (`null` when none was good).
    pub per_good_query_usd: Option<f64>,
    /// Queries that finished with none of their calls failed.
    pub good_queries: u64,
    /// Billed and of no use: unused answers and failed queries' answers, in dollars.
    pub wasted_usd: f64,
    /// `wasted_usd` over `total_usd` (0 when nothing was billed).
    pub wasted_share: f64,
    /// Billed answers no query used (client timeouts, orphans), in dollars.
    pub unused_answers_usd: f64,
    /// Their tokens.
    #[serde(deserialize_with = "capsize_mock::price::wide_count")]
    pub unused_answers_tokens: u128,
    /// Answers used by queries that failed or were abandoned, in dollars.
    pub failed_queries_usd: f64,
    /// Their tokens.
    #[serde(deserialize_with = "capsize_mock::price::wide_count")]
    pub failed_queries_tokens: u128,
    /// The bill by kind of token.
    #[serde(flatten)]
    pub by_kind: ByKind,
    /// Each priced provider's part (a list: not a metric).
    pub providers: Vec<ProviderCost>,
}

/// A bill by kind of token: tokens and dollars (summary.json's and exec's `cost`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ByKind {
    /// Prompt tokens billed at the input rate.
    #[serde(deserialize_with = "capsize_mock::price::wide_count")]
    pub input_tokens: u128,
    /// Prompt tokens billed at the cached rate.
    #[serde(deserialize_with = "capsize_mock::price::wide_count")]
    pub cached_input_tokens: u128,
    /// Answer tokens billed.
    #[serde(deserialize_with = "capsize_mock::price::wide_count")]
    pub output_tokens: u128,
    /// The prompt tokens' price at the input rate, in dollars.
    pub input_usd: f64,
    /// The cached prompt tokens' price, in dollars.
    pub cached_input_usd: f64,
    /// The answer tokens' price, in dollars.
    pub output_usd: f64,
}

impl ByKind {
    /// `bill` by kind.
    pub fn of(bill: &Bill) -> ByKind {
        ByKind {
            input_tokens: bill.input_tokens,
            cached_input_tokens: bill.cached_input_tokens,
            output_tokens: bill.output_tokens,
            input_usd: usd(bill.input_picodollars),
            cached_input_usd: usd(bill.cached_input_picodollars),
            output_usd: usd(bill.output_picodollars),
        }
    }
}

/// Whether dotted `path` is a field of the provider's own bill in summary.json
/// (`provider.billed.input_tokens`, `providers.NAME.billed.requests`: only with a price).
pub fn is_provider_bill(path: &str) -> bool {
    let field = path.strip_prefix("provider.billed.").or_else(|| {
        let rest = path.strip_prefix("providers.")?;
        let (_, rest) = rest.split_once('.')?;
        rest.strip_prefix("billed.")
    });
    let fields = serde_json::to_value(Bill::default()).unwrap_or_default();
    field.is_some_and(|f| fields.get(f).is_some())
}

/// `part` of a bill of `total` picodollars, as a share (0 when nothing was billed).
pub fn share(part: u128, total: u128) -> f64 {
    if total > 0 {
        part as f64 / total as f64
    } else {
        0.0
    }
}

/// What one endpoint billed and what of it the queries used.
#[derive(Debug, Clone)]
pub struct Billed<'a> {
    /// The provider's name.
    pub name: &'a str,
    /// Everything it billed.
    pub billed: Bill,
    /// What the queries used of it.
    pub used: Bill,
}

impl Cost {
    /// The cost of a run whose priced endpoints are `endpoints` (none: the run is not priced,
    /// and has no cost), whose failed or abandoned queries used `used_by_failed`, of
    /// `queries_started` queries of which `good` were good.
    pub fn of(
        endpoints: &[Billed<'_>],
        used_by_failed: Spent,
        queries_started: u64,
        good: u64,
    ) -> Option<Cost> {
        if endpoints.is_empty() {
            return None;
        }
        let total = endpoints
            .iter()
            .fold(Bill::default(), |t, e| t.plus(e.billed));
        let unused = endpoints
            .iter()
            .fold(Bill::default(), |t, e| t.plus(e.billed.since(e.used)));
        let wasted = unused
            .picodollars()
            .saturating_add(used_by_failed.picodollars);
        let per = |n: u64| {
            if n > 0 {
                usd(total.picodollars()) / n as f64
            } else {
                0.0
            }
        };
        Some(Cost {
            total_usd: usd(total.picodollars()),
            per_query_usd: per(queries_started),
            per_good_query_usd: (good > 0).then(|| per(good)),
            good_queries: good,
            wasted_usd: usd(wasted),
            wasted_share: share(wasted, total.picodollars()),
            unused_answers_usd: usd(unused.picodollars()),
            unused_answers_tokens: unused.tokens(),
            failed_queries_usd: usd(used_by_failed.picodollars),
            failed_queries_tokens: used_by_failed.tokens,
            by_kind: ByKind::of(&total),
            providers: endpoints
                .iter()
                .map(|e| ProviderCost {
                    name: e.name.to_string(),
                    total_usd: usd(e.billed.picodollars()),
                    unused_answers_usd: usd(e.billed.since(e.used).picodollars()),
                })
                .collect(),
        })
    }
}
