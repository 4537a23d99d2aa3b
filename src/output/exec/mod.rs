//! What `capsize exec` writes: `summary.json` (`mode = "exec"`: the provider's view of someone
//! else's agent, and how the agent ended), three charts, and the table it prints. The file
//! layout is fixed (keys in a fixed order, the same files every time); the values are real-time
//! measurements.

mod charts;

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use capsize_mock::server::Report;
use capsize_mock::Bill;

use crate::engine::exec::{AgentEnd, Ending};
use crate::engine::scenario::Scenario;
use crate::engine::summary::cost::{share, ByKind};
use crate::engine::summary::{Percentiles, PhaseCounts, ProviderCounts, SCHEMA_VERSION};
use crate::fmt::fmt_num;
use crate::output::files::OutputSet;
use crate::output::report::escape;
pub use charts::{charts, CHARTS};

/// The summary file's name.
pub const SUMMARY: &str = "summary.json";

/// How the agent ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentSummary {
    /// The command line, as given (before `{address}` was replaced).
    pub command: Vec<String>,
    /// `exited`, `timed_out` (`--timeout`) or `interrupted` (SIGINT or SIGTERM to capsize).
    pub ended: String,
    /// Its exit code (`null` if it died of a signal).
    pub exit_code: Option<i64>,
    /// The signal it died of (`null` if it exited).
    pub signal: Option<i64>,
    /// Seconds from its start to its exit.
    pub wall_seconds: f64,
}

/// Requests in flight at the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct InFlight {
    /// The most at once.
    pub peak: u64,
    /// The mean over the mock's run: from its start (just before the agent) or, for a
    /// `--target`, its reset (before the replicas joined), to the reading after the agent.
    pub mean: f64,
}

/// `summary.json` of `capsize exec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecSummary {
    /// Schema version.
    pub schema_version: u32,
    /// The capsize version that wrote it.
    pub capsize_version: String,
    /// Scenario name.
    pub scenario: String,
    /// Seed of the mock's model.
    pub seed: u64,
    /// `exec`.
    pub mode: String,
    /// The agent. Of a fleet of agents run as replicas (`--replica`, merged): the first
    /// replica whose agent failed, else the first, with the longest wall time of them all.
    pub agent: AgentSummary,
    /// A fleet's agents, in replica order (absent for one agent).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<AgentSummary>,
    /// The provider's counters and its busiest 60 s, as in a run's summary.json.
    pub provider: ProviderCounts,
    /// Requests in flight.
    pub in_flight: InFlight,
    /// Requests that said they were a retry (`x-stainless-retry-count` of 1 or more).
    pub retries: u64,
    /// The wait before each retry whose previous attempt was linked by its `Idempotency-Key`
    /// (from that attempt's end to the retry's arrival), in milliseconds.
    pub retry_wait_ms: Percentiles,
    /// Charged requests whose client hung up before the answer.
    pub orphaned_requests: u64,
    /// Charged requests per minute of the agent's wall time (counted as at least a minute) over
    /// the provider's RPM (`null` if unlimited).
    pub rpm_utilization: Option<f64>,
    /// Charged tokens per minute over the provider's TPM (`null` if unlimited).
    pub tpm_utilization: Option<f64>,
    /// The busiest 60 s window's requests over the provider's RPM.
    pub peak_rpm_utilization: Option<f64>,
    /// The busiest 60 s window's tokens over the provider's TPM.
    pub peak_tpm_utilization: Option<f64>,
    /// What the provider billed, when it has a `price`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<ExecCost>,
}

/// What the mock billed the agent (`cost` of exec's summary.json): what it saw only, so the
/// waste is the answers whose client hung up before them (orphans); which answers the agent
/// then used, exec cannot see.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecCost {
    /// Everything billed, in dollars.
    pub total_usd: f64,
    /// Billed answers whose client hung up before them, in dollars.
    pub wasted_usd: f64,
    /// `wasted_usd` over `total_usd` (0 when nothing was billed).
    pub wasted_share: f64,
    /// The bill by kind of token.
    #[serde(flatten)]
    pub by_kind: ByKind,
}

impl ExecCost {
    /// The cost of what a priced provider `billed`, of which its orphans `orphaned`.
    fn of(billed: &Bill, orphaned: &Bill) -> ExecCost {
        ExecCost {
            total_usd: billed.usd(),
            wasted_usd: orphaned.usd(),
            wasted_share: share(orphaned.picodollars(), billed.picodollars()),
            by_kind: ByKind::of(billed),
        }
    }
}

/// How one agent ended, as summary.json writes it.
fn agent_summary(command: &[String], a: &AgentEnd) -> AgentSummary {
    AgentSummary {
        command: command.to_vec(),
        ended: a.ending.name().into(),
        exit_code: a.exit_code.map(i64::from),
        signal: a.signal.map(i64::from),
        wall_seconds: round3(a.wall.as_secs_f64()),
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn ratio(v: f64, limit: Option<f64>) -> Option<f64> {
    limit.map(|l| (v / l * 10_000.0).round() / 10_000.0)
}

impl ExecSummary {
    /// The summary of `agents` (each its command line and end: one, or a fleet's in replica
    /// order) run against `scenario`'s provider, which saw what `report` holds.
    pub fn new(scenario: &Scenario, agents: &[(Vec<String>, AgentEnd)], report: &Report) -> Self {
        let members: Vec<AgentSummary> = agents.iter().map(|(c, a)| agent_summary(c, a)).collect();
        let wall = agents.iter().map(|(_, a)| a.wall).max().unwrap_or_default();
        let mut agent = members
            .iter()
            .find(|a| agent_failed(a))
            .or(members.first())
            .cloned()
            .unwrap_or_default();
        agent.wall_seconds = round3(wall.as_secs_f64());
        let t = &report.traffic;
        let charged: u64 = t.series.bins.iter().map(|b| b.charged).sum();
        // Over at least a minute: a run of a few seconds is not a rate per minute.
        let minutes = wall.as_secs_f64().max(60.0) / 60.0;
        let per_min = |n: u64| n as f64 / minutes;
        let p = &report.counters;
        ExecSummary {
            schema_version: SCHEMA_VERSION,
            capsize_version: crate::engine::VERSION.into(),
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            mode: "exec".into(),
            agent,
            replicas: if members.len() > 1 {
                members
            } else {
                Vec::new()
            },
            provider: ProviderCounts {
                counters: *p,
                peak_requests_per_60s: t.peak_requests_per_60s,
                peak_tokens_per_60s: t.peak_tokens_per_60s,
                phases: PhaseCounts::of(scenario.provider(), &report.phases),
            },
            in_flight: InFlight {
                peak: t.traffic.in_flight_peak,
                mean: round3(t.traffic.in_flight_mean),
            },
            retries: t.traffic.retried,
            retry_wait_ms: Percentiles::of(&t.retry_waits),
            orphaned_requests: t.traffic.orphaned,
            rpm_utilization: ratio(per_min(charged), scenario.provider().rpm),
            tpm_utilization: ratio(per_min(p.tokens_charged), scenario.provider().tpm),
            peak_rpm_utilization: ratio(t.peak_requests_per_60s as f64, scenario.provider().rpm),
            peak_tpm_utilization: ratio(t.peak_tokens_per_60s as f64, scenario.provider().tpm),
            cost: scenario
                .provider()
                .priced()
                .then(|| ExecCost::of(&p.billed, &t.traffic.orphaned_billed)),
        }
    }

    /// Every metric an `[slo]` objective of `capsize exec --check` may name (sorted).
    pub fn metric_paths() -> Vec<String> {
        let json = serde_json::to_value(ExecSummary::template()).expect("a summary serialises");
        crate::engine::summary::slo::metric_paths(&json)
    }

    /// A summary with every optional section present: every field exec's summary.json can
    /// hold.
    fn template() -> ExecSummary {
        ExecSummary {
            cost: Some(ExecCost::default()),
            ..ExecSummary::default()
        }
    }

    /// [`ExecSummary::metric_paths`] in short, in the file's order: a section's metrics as
    /// `SECTION.*`, a top-level metric by its name (`schema_version` and `seed` left out).
    pub fn metric_families() -> Vec<String> {
        let mut families: Vec<(String, String)> = Vec::new();
        for path in ExecSummary::metric_paths() {
            let (key, family) = match path.split_once('.') {
                Some((section, _)) => (section.to_string(), format!("{section}.*")),
                None if path == "schema_version" || path == "seed" => continue,
                None => (path.clone(), path),
            };
            if !families.iter().any(|(k, _)| *k == key) {
                families.push((key, family));
            }
        }
        // The paths come sorted; the file's text has its keys in order.
        let text = ExecSummary::template().to_json();
        families.sort_by_key(|(key, _)| text.find(&format!("\n  \"{key}\":")));
        families.into_iter().map(|(_, f)| f).collect()
    }

    /// The summary as pretty JSON, with a final newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a summary always serialises");
        s.push('\n');
        s
    }

    /// The summary as a JSON value, what `--check` reads (a bill above `u64` as an `f64`).
    pub fn to_value(&self) -> serde_json::Value {
        crate::engine::summary::json_value(self)
    }
}

/// Declares every file `capsize exec` writes into `dir`.
pub fn declare(set: &mut OutputSet, dir: &Path) {
    set.output(dir.join(SUMMARY), "--out");
    for stem in CHARTS {
        crate::output::report::charts::declare(set, dir, stem);
    }
}

/// How the agent ended, in words: `exited with code 3`, `timed out (killed by signal 15)`.
pub fn agent_end(s: &AgentSummary) -> String {
    let how = match (s.exit_code, s.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "no exit status".into(),
    };
    match s.ended.as_str() {
        "timed_out" => format!("stopped by --timeout ({how})"),
        "interrupted" => format!("stopped by a signal to capsize ({how})"),
        _ => how,
    }
}

/// Whether the agent failed: it did not exit by itself with code 0.
pub fn agent_failed(s: &AgentSummary) -> bool {
    !(s.ended == Ending::Exited.name() && s.exit_code == Some(0))
}

/// The limit the agent came closest to in its busiest minute, and how close: `  closest limit
/// TPM: 95.0 % in the busiest 60 s (38,000 of 40,000 tokens)`; `None` when the provider has
/// neither an RPM nor a TPM, or the agent sent nothing.
fn closest(s: &ExecSummary) -> Option<String> {
    let p = &s.provider;
    let limits = [
        (
            "RPM",
            s.peak_rpm_utilization,
            p.peak_requests_per_60s,
            "requests",
        ),
        (
            "TPM",
            s.peak_tpm_utilization,
            p.peak_tokens_per_60s,
            "tokens",
        ),
    ];
    let (name, used, peak, unit) = limits
        .into_iter()
        .filter_map(|(n, u, peak, unit)| Some((n, u?, peak, unit)))
        .filter(|l| l.1 > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let limit = peak as f64 / used;
    Some(format!(
        "  closest limit  the provider's {name}: {:.1} % in the busiest 60 s ({} of {} {unit})",
        used * 100.0,
        fmt_num(peak as f64),
        fmt_num(limit.round()),
    ))
}

/// The summary as a readable table.
pub fn table(s: &ExecSummary) -> String {
    let mut out = String::new();
    let command = s
        .agent
        .command
        .iter()
        .map(|a| escape::terminal(a))
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(
        out,
        "scenario {} (seed {}, exec mode): {command}",
        escape::terminal(&s.scenario),
        s.seed
    );
    let verdict = if agent_failed(&s.agent) {
        "FAILED"
    } else {
        "ok"
    };
    let _ = writeln!(
        out,
        "  agent          {verdict}: {} after {:.1} s",
        agent_end(&s.agent),
        s.agent.wall_seconds
    );
    let p = &s.provider;
    let c = &p.counters;
    let _ = writeln!(
        out,
        "  provider       {} received, {} served, {} rate-limited (429), {} errors, {} timeouts, {} tokens charged",
        c.received, c.served, c.rate_limited, c.errored, c.timed_out, c.tokens_charged
    );
    let pct = |v: Option<f64>| {
        v.map_or(String::new(), |v| {
            format!(" ({:.1} % of the RPM)", v * 100.0)
        })
    };
    let _ = writeln!(
        out,
        "  busiest 60 s   {} requests{}, {} tokens charged",
        p.peak_requests_per_60s,
        pct(s.peak_rpm_utilization),
        p.peak_tokens_per_60s
    );
    if let Some(line) = closest(s) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "  in flight      peak {}, mean {:.2}",
        s.in_flight.peak, s.in_flight.mean
    );
    let w = &s.retry_wait_ms;
    let waits = if w.count > 0 {
        format!(
            "; {} waits measured: p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms",
            w.count, w.p50, w.p95, w.max
        )
    } else {
        String::new()
    };
    let _ = writeln!(out, "  retries        {}{waits}", s.retries);
    let _ = writeln!(
        out,
        "  orphaned       {} requests (charged, their client hung up)",
        s.orphaned_requests
    );
    out
}
