//! Reports: `summary.json`, `.hgrm` histograms, and the summary table printed by `capsize run`;
//! [`binds`] names the limit that binds a query; [`escape`] shows untrusted text as written in each of them; [`metrics`] names summary.json's
//! metrics for the code that reads them.

pub mod binds;
pub mod charts;
pub mod escape;
pub mod hgrm;
pub mod html;

use std::fmt::Write as _;
use std::path::Path;

use crate::engine::recorder::Recording;
use crate::engine::summary::{Percentiles, Summary};
use crate::output::files::OutputSet;

/// The files of a run, in the order they are written: the summary and the two histograms.
pub const RUN_FILES: [&str; 3] = ["summary.json", "query_latency.hgrm", "call_latency.hgrm"];

/// Declares the files of a run ([`RUN_FILES`]) in `dir` as outputs of `set`, named by `--out`.
pub fn declare_run(set: &mut OutputSet, dir: &Path) {
    for name in RUN_FILES {
        set.output(dir.join(name), "--out");
    }
}

/// Gives the files of a run in `dir` their content: `summary.json`, `query_latency.hgrm` and
/// `call_latency.hgrm`.
pub fn put_run(set: &mut OutputSet, dir: &Path, summary: &Summary, recording: &Recording) {
    let [json, query, call] = RUN_FILES;
    set.put(dir.join(json), summary.to_json())
        .put(
            dir.join(query),
            hgrm::percentile_distribution(&recording.query),
        )
        .put(
            dir.join(call),
            hgrm::percentile_distribution(&recording.call),
        );
}

fn row(out: &mut String, name: &str, p: &Percentiles) {
    let _ = writeln!(
        out,
        "  {name:<14} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
        p.mean, p.p50, p.p90, p.p95, p.p99, p.max
    );
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0))
}

/// The summary as a readable table.
/// The cost line: `  cost           $0.0083 in all, $0.0021 a good query (4); wasted
/// $0.0000 (0.0 %): ...`.
fn cost_line(c: &crate::engine::summary::cost::Cost) -> String {
    let per_good = c
        .per_good_query_usd
        .map_or("no good query".to_string(), |v| {
            format!("${} a good query ({})", dollars(v), c.good_queries)
        });
    format!(
        "  cost           ${} in all, {per_good}; wasted ${} ({:.1} %): ${} of answers no query used, ${} used by failed queries",
        dollars(c.total_usd),
        dollars(c.wasted_usd),
        c.wasted_share * 100.0,
        dollars(c.unused_answers_usd),
        dollars(c.failed_queries_usd)
    )
}

/// Why the attempts that got no answer at all failed: their connection, by class.
fn transport_line(t: &crate::engine::provider::transport::TransportErrors) -> String {
    let classes: Vec<String> = t
        .by_class()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| format!("{n} {}", c.words()))
        .collect();
    format!(
        "  transport      {} attempts failed on their connection: {}",
        t.total(),
        classes.join(", ")
    )
}

/// Dollars to four significant digits (at least to the cent): `0.002085`, `12.35`, `1234`.
pub fn dollars(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(2, 12) as usize;
    format!("{v:.digits$}")
}

pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} (seed {}, {} mode)",
        escape::terminal(&s.scenario),
        s.seed,
        s.mode
    );
    let _ = writeln!(
        out,
        "  {} queries ({} failed, {} abandoned), {} calls in {:.1} s of model time",
        s.queries, s.queries_failed, s.queries_abandoned, s.calls, s.virtual_seconds
    );
    let _ = writeln!(
        out,
        "  throughput     {:.3} queries/s, {:.3} calls/s",
        s.throughput.queries_per_s, s.throughput.calls_per_s
    );
    let _ = writeln!(
        out,
        "\n  latency (ms)         mean        p50        p90        p95        p99        max"
    );
    let l = &s.latency_ms;
    for (name, p) in [
        ("query", &l.query),
        ("call", &l.call),
        ("  queue", &l.call_queue),
        ("  limiter", &l.call_limiter),
        ("  backoff", &l.call_backoff),
        ("  service", &l.call_service),
    ] {
        row(&mut out, name, p);
    }
    if let Some(client) = &l.client {
        // Per attempt, and part of service: the client's own time.
        row(&mut out, "    client", client);
    }
    let p = &s.provider.counters;
    let _ = writeln!(
        out,
        "\n  provider       {} received, {} served, {} rate-limited (429), {} errors, {} never answered",
        p.received, p.served, p.rate_limited, p.errored, p.timed_out
    );
    // The client's side of the same attempts, so its failures read beside the provider's
    // counts: an attempt the provider answered slowly still times out here.
    let _ = writeln!(
        out,
        "  client         {} attempts ({} timed out at the client), {} retries; calls: {} failed for good, {} cancelled, {} not run; {} orphaned requests",
        s.attempts, s.attempts_timed_out, s.retries, s.errors, s.cancelled, s.not_run, s.orphaned_requests
    );
    if let Some(t) = &s.transport_errors {
        let _ = writeln!(out, "{}", transport_line(t));
    }
    if let Some(c) = &s.cost {
        let _ = writeln!(out, "{}", cost_line(c));
    }
    if let Some(l) = &s.concurrency_limit {
        let _ = writeln!(
            out,
            "  concurrency    {} limit: mean {:.1}, from {} to {}, cut {} times",
            l.policy, l.mean, l.min, l.max, l.cuts
        );
    }
    if s.providers.is_empty() {
        let _ = writeln!(
            out,
            "  utilization    RPM {} (peak 60 s window {}), TPM {}",
            pct(s.rpm_utilization),
            pct(s.peak_rpm_utilization),
            pct(s.tpm_utilization)
        );
    }
    // Several providers: each one's counts and utilization, the binding one visible.
    for (name, n) in &s.providers {
        let c = &n.counts.counters;
        let _ = writeln!(
            out,
            "  {:<14} {} received, {} rate-limited (429), {} errors; RPM {} (peak 60 s {}), TPM {}",
            escape::terminal(name),
            c.received,
            c.rate_limited,
            c.errored,
            pct(n.rpm_utilization),
            pct(n.peak_rpm_utilization),
            pct(n.tpm_utilization)
        );
    }
    // Incidents: what each phase of each provider saw.
    let phases = std::iter::once((None, &s.provider.phases))
        .chain(s.providers.iter().map(|(n, p)| (Some(n), &p.counts.phases)));
    for (name, list) in phases {
        for ph in list {
            let when = match ph.to_s {
                Some(to) => format!("{}-{} s", ph.from_s, to),
                None => format!("from {} s", ph.from_s),
            };
            let whose = name.map_or(String::new(), |n| format!("{} ", escape::terminal(n)));
            let c = &ph.counters;
            let _ = writeln!(
                out,
                "  phase          {whose}{when}: {} received, {} served, {} rate-limited (429), {} errors, {} never answered",
                c.received, c.served, c.rate_limited, c.errored, c.timed_out
            );
        }
    }
    out
}
