//! The article, reproduced: each worked example run from `scenarios/article/`, and a table of
//! its claims with the article's figure, the closed form, the simulated value and a verdict.
//!
//! `capsize article [--out DIR]` writes `DIR/README.md` (default `reports/article/`) and each
//! scenario's `summary.json` beside it. Everything is virtual time: same inputs, same bytes.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::plan::{expected_max_ms, fmt_num};
use crate::report::summary::Summary;
use crate::scenario::Scenario;
use crate::slo::number as at;

/// One claim of the article.
struct Claim {
    /// What the article says, in short.
    claim: &'static str,
    /// The article's own figure, as it writes it.
    article: &'static str,
    /// The closed form under the article's own model (from the scenario), and its formula;
    /// `None` where the article's claim has no closed form (it is measured only).
    exact: fn(&Scenario) -> Option<f64>,
    formula: &'static str,
    /// The scenario (file stem in `scenarios/article/`) and how to read the simulated value.
    scenario: &'static str,
    read: fn(&Value) -> Option<f64>,
    unit: &'static str,
    /// Relative tolerance for "matches" (Monte-Carlo error or rounding of the model).
    tolerance: f64,
    /// What to say when the article's own figure differs from the closed form.
    note: &'static str,
}

const CLAIMS: &[Claim] = &[
    Claim { claim: "10 quotes x 350 ms, sequential", article: "3.5 s", exact: |_| Some(10.0 * 350.0), formula: "10 x 350", scenario: "quotes-sequential", read: |v| at(v, "latency_ms.query.mean"), unit: "ms", tolerance: 0.01, note: "" },
    Claim { claim: "10 quotes x 350 ms, gathered", article: "~0.35 s", exact: |_| Some(350.0), formula: "max of 10 x 350", scenario: "quotes-gathered", read: |v| at(v, "latency_ms.query.mean"), unit: "ms", tolerance: 0.01, note: "" },
    Claim { claim: "semaphore 40 x 400 ms at 10,000 RPM", article: "100 RPS, 60 % of the ceiling", exact: |_| Some(40.0 / 0.4), formula: "40 / 0.4 (Little's law)", scenario: "tier3-semaphore-40", read: |v| at(v, "throughput.calls_per_s"), unit: "calls/s", tolerance: 0.01, note: "" },
    Claim { claim: "semaphore 60 x 400 ms at 10,000 RPM", article: "150 RPS, 90 % of the ceiling", exact: |_| Some(60.0 / 0.4), formula: "60 / 0.4 (Little's law)", scenario: "tier3-semaphore-60", read: |v| at(v, "throughput.calls_per_s"), unit: "calls/s", tolerance: 0.01, note: "" },
    Claim { claim: "200 calls/s x 2,000 tokens vs 10M TPM, fixed window: 429s", article: "budget gone in 25 s, 429s for 35 s", exact: |_| Some((60.0 - 10_000_000.0 / (200.0 * 2000.0)) * 200.0), formula: "(60 - 10,000,000 / (200 x 2,000)) x 200", scenario: "tpm-burst-no-bucket", read: |v| at(v, "provider.rate_limited"), unit: "429s", tolerance: 0.001, note: "" },
    Claim { claim: "the same burst through a client bucket (98 % of TPM)", article: "smoothed, no 429s", exact: |_| Some(0.98 * 10_000_000.0 / 2000.0 / 60.0), formula: "0.98 x 10,000,000 / 2,000 / 60", scenario: "tpm-burst-with-bucket", read: |v| at(v, "throughput.calls_per_s"), unit: "calls/s", tolerance: 0.01, note: "" },
    Claim { claim: "8 calls x U[200, 900] ms in parallel", article: "~800 ms", exact: |_| Some(200.0 + 700.0 * 8.0 / 9.0), formula: "200 + 700 x 8/9", scenario: "research-fanout-uniform", read: |v| at(v, "latency_ms.query.mean"), unit: "ms", tolerance: 0.01, note: "the article rounds 822 ms to about 800" },
    Claim { claim: "8 calls, latency read as \"400 ms avg, 900 ms p95\" (lognormal)", article: "~800 ms", exact: |s| expected_max_ms(&s.provider.latency, 8.0), formula: "E[max of 8] of the fitted lognormal (numeric integral)", scenario: "research-fanout-lognormal", read: |v| at(v, "latency_ms.query.mean"), unit: "ms", tolerance: 0.02, note: "the article is inconsistent: it states 400 ms avg / 900 ms p95 but computes with U[200, 900] (mean 550 ms)" },
    Claim { claim: "semaphore(4) over the 8 calls", article: "two waves", exact: |_| Some(2.0 * (200.0 + 700.0 * 4.0 / 5.0)), formula: "2 x E[max of 4] = 2 x (200 + 700 x 4/5), strict waves", scenario: "research-semaphore-4", read: |v| at(v, "latency_ms.query.mean"), unit: "ms", tolerance: 0.0, note: "a semaphore is work-conserving: it starts a call as soon as one ends, so it beats strict waves" },
    Claim { claim: "600 RPM, 8 calls/query, 70 % headroom", article: "420 slots/min, 52.5 queries/min, 180 RPM spare", exact: |_| Some(0.7 * 600.0 / 8.0), formula: "0.7 x 600 / 8", scenario: "headroom-70", read: |v| at(v, "throughput.queries_per_s").map(|q| q * 60.0), unit: "queries/min", tolerance: 0.01, note: "" },
    Claim { claim: "85 % accuracy per step, 10 steps", article: "19.7 %", exact: |_| Some(100.0 * 0.85f64.powi(10)), formula: "0.85^10", scenario: "compounding-85", read: |v| Some(100.0 * (1.0 - at(v, "queries_failed")? / at(v, "queries")?)), unit: "% of queries", tolerance: 0.03, note: "" },
    Claim { claim: "100 sessions x 8 calls, 5 s parent timeout, no transport cancellation: orphaned share of charged requests", article: "30-40 % of the rate budget", exact: |_| None, formula: "measured", scenario: "orphans-leave", read: |v| Some(100.0 * at(v, "orphaned_requests")? / at(v, "provider.received")?), unit: "%", tolerance: 0.0, note: "every abandoned query's calls still run and are charged" },
    Claim { claim: "the same with transport cancellation", article: "(the fix)", exact: |_| None, formula: "measured", scenario: "orphans-cancel", read: |v| Some(100.0 * at(v, "orphaned_requests")? / at(v, "provider.received")?), unit: "%", tolerance: 0.0, note: "queued calls are never sent; only what was in flight at a deadline is lost" },
    Claim { claim: "30-call hallucinated fan-out at 600 RPM, no cap: 429s", article: "429 storm", exact: |_| None, formula: "measured", scenario: "hallucinated-30-uncapped", read: |v| at(v, "provider.rate_limited"), unit: "429s", tolerance: 0.0, note: "" },
    Claim { claim: "the same capped at 8 calls per turn: 429s", article: "cap prevents it", exact: |_| None, formula: "measured", scenario: "hallucinated-30-capped", read: |v| at(v, "provider.rate_limited"), unit: "429s", tolerance: 0.0, note: "" },
    Claim { claim: "retry storm, fixed 1 s backoff: calls failed for good", article: "synchronized retries", exact: |_| None, formula: "measured", scenario: "retry-fixed", read: |v| at(v, "errors"), unit: "calls", tolerance: 0.0, note: "" },
    Claim { claim: "retry storm, full-jitter backoff: calls failed for good", article: "jitter spreads them", exact: |_| None, formula: "measured", scenario: "retry-jitter", read: |v| at(v, "errors"), unit: "calls", tolerance: 0.0, note: "" },
    Claim { claim: "retry storm, honouring Retry-After: calls failed for good", article: "wait what the provider says", exact: |_| None, formula: "measured", scenario: "retry-retry-after", read: |v| at(v, "errors"), unit: "calls", tolerance: 0.0, note: "" },
];

/// The verdict of one claim.
fn verdict(c: &Claim, exact: Option<f64>, simulated: Option<f64>) -> String {
    let Some(sim) = simulated else {
        return "not measured".into();
    };
    let Some(exact) = exact else {
        return if c.note.is_empty() {
            "measured (no closed form)".into()
        } else {
            format!("measured: {}", c.note)
        };
    };
    let off = (sim - exact) / exact;
    if c.tolerance == 0.0 {
        return format!("{} ({:+.1} % against the closed form)", c.note, off * 100.0);
    }
    let base = if off.abs() <= c.tolerance {
        "matches".to_string()
    } else {
        format!("differs by {:+.1} %", off * 100.0)
    };
    if c.note.is_empty() {
        base
    } else {
        format!("{base}; {}", c.note)
    }
}

/// Runs every scenario of `scenarios` (the folder of the article's scenarios), writes the
/// summaries and `README.md` into `out`, and returns the README.
pub fn reproduce(scenarios: &Path, out: &Path) -> anyhow::Result<String> {
    let mut md = String::from("# The article, reproduced\n\nGenerated by `capsize article` from `scenarios/article/` (virtual time; the same inputs give the same bytes). Each claim: the article's own figure, the closed form under the article's own model, the simulated value, and a verdict.\n\n| claim | article | closed form | simulated | verdict | scenario |\n|---|---|---:|---:|---|---|\n");
    for c in CLAIMS {
        let path = scenarios.join(format!("{}.toml", c.scenario));
        let s = crate::scenario::load(&path, &[])?;
        let outcome = crate::sim::run(&s)?;
        let summary = Summary::new(&s, &outcome);
        let json = serde_json::to_value(&summary)?;
        let dir = out.join(c.scenario);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("summary.json"), summary.to_json())?;
        let sim = (c.read)(&json);
        let exact = (c.exact)(&s);
        let closed = exact.map_or("-".into(), |e| {
            format!("{} {} (`{}`)", fmt_num(e), c.unit, c.formula)
        });
        let _ = writeln!(
            md,
            "| {} | {} | {closed} | {} {} | {} | `{}` |",
            c.claim,
            c.article,
            sim.map_or("-".into(), fmt_num),
            c.unit,
            verdict(c, exact, sim),
            c.scenario
        );
    }
    std::fs::write(out.join("README.md"), &md)?;
    Ok(md)
}
