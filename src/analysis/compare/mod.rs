//! `capsize compare A B`: two runs or two sweeps side by side, the metrics that moved beyond
//! their noise, and whether the two were run on the same load.
//!
//! Two runs are compared on their headline figures ([`runs`]): throughput, query and call
//! percentiles, the share of requests refused with a 429 and of queries that failed, requests,
//! tokens and retries per query started (a count grows with the work done, so it is compared
//! per query, whatever ended the runs), each provider's of several, and, when both runs are
//! priced, the bill per query and per good query and the share of it wasted. Each figure's
//! noise is judged as [`noise::Method`] says. Two sweeps are compared point by point ([`sweep`]), each
//! metric's mean against the other's, beyond their 95 % half-widths combined.
//!
//! Which way is worse comes from the CI gate's table ([`crate::analysis::check::direction`]).

pub mod noise;
pub mod read;
pub mod sweep;

use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::analysis::check::{direction, Direction};
use noise::Method;
pub use read::{read, Record, Run};

/// What cannot be compared: one line naming the input and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompareError {
    /// An input cannot be read or is not a run or a sweep.
    #[error("{path}: {reason}")]
    Input {
        /// The file or folder.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A run against a sweep.
    #[error("A ({a}) is a {a_kind} and B ({b}) a {b_kind}: compare two runs or two sweeps")]
    Mixed {
        /// A's file.
        a: String,
        /// `run` or `sweep`.
        a_kind: &'static str,
        /// B's file.
        b: String,
        /// `run` or `sweep`.
        b_kind: &'static str,
    },
    /// Two sweeps over different keys: no point of one is a point of the other.
    #[error(
        "the sweeps vary different keys (A: {a}; B: {b}): no point of one is a point of the other"
    )]
    Keys {
        /// A's keys.
        a: String,
        /// B's keys.
        b: String,
    },
}

impl CompareError {
    /// Bad input at `path`.
    pub fn input(path: &Path, reason: impl Into<String>) -> CompareError {
        CompareError::Input {
            path: path.display().to_string(),
            reason: reason.into(),
        }
    }
}

/// What a comparison says of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Moved beyond its noise, the better way.
    Better,
    /// Moved beyond its noise, the worse way.
    Worse,
    /// Moved no more than its noise.
    WithinNoise,
    /// The same in both.
    NoChange,
    /// Changed, with no interval to judge it by.
    NoInterval,
    /// Changed, and its noise could not be estimated (the interval's arithmetic left the
    /// finite numbers): never judged within it.
    NoEstimate,
    /// Not judged: no way of it is worse, or one side has no value.
    Info,
}

impl Verdict {
    /// For people: `better`, `worse`, `within noise`, `no change`, `no interval`, `noise
    /// unknown`, `—`.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
            Verdict::NoChange => "no change",
            Verdict::NoInterval => "no interval",
            Verdict::NoEstimate => "noise unknown",
            Verdict::Info => "—",
        }
    }
}

/// One figure of A and B, its change, the change its noise allows, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The figure, for people (`query p95 (ms)`).
    pub metric: String,
    /// What it is in summary.json or sweep.csv (`latency_ms.query.p95`,
    /// `provider.rate_limited / provider.received`).
    pub path: String,
    /// A's value.
    pub a: Option<f64>,
    /// B's value.
    pub b: Option<f64>,
    /// B − A.
    pub change: Option<f64>,
    /// B − A, in % of A (`None` when A is 0).
    pub percent: Option<f64>,
    /// The change beyond which the figure moved (`None`: no interval).
    pub noise: Option<f64>,
    /// How the noise was judged.
    pub method: Method,
    /// The verdict.
    pub verdict: Verdict,
}

impl Row {
    /// A row judged with `way` (`None`: not judged) and `noise` (the change it allows, by
    /// `method`; `None`: no interval). A noise or a change that is not a finite number judges
    /// nothing: every row of a comparison is made here, so none is "within" an infinite band.
    pub fn new(
        metric: impl Into<String>,
        path: impl Into<String>,
        (a, b): (Option<f64>, Option<f64>),
        way: Option<Direction>,
        noise: Option<f64>,
        method: Method,
    ) -> Row {
        let change = a.zip(b).map(|(a, b)| b - a);
        let percent = a
            .zip(change)
            .filter(|(a, _)| *a != 0.0)
            .map(|(a, c)| c / a.abs() * 100.0)
            .filter(|p| p.is_finite());
        let estimable = noise.is_none_or(f64::is_finite) && change.is_none_or(f64::is_finite);
        let gated = matches!(
            way,
            Some(Direction::HigherIsWorse | Direction::LowerIsWorse)
        );
        let verdict = match (a.zip(b), noise) {
            _ if !gated => Verdict::Info,
            (None, _) => Verdict::Info,
            (Some((a, b)), _) if a == b => Verdict::NoChange,
            _ if !estimable => Verdict::NoEstimate,
            (Some(_), None) => Verdict::NoInterval,
            (Some((a, b)), Some(t)) if (b - a).abs() <= t => Verdict::WithinNoise,
            (Some((a, b)), Some(_)) => match (way, b > a) {
                (Some(Direction::HigherIsWorse), true) | (Some(Direction::LowerIsWorse), false) => {
                    Verdict::Worse
                }
                _ => Verdict::Better,
            },
        };
        let method = match (gated, a.zip(b), noise) {
            (false, _, _) | (_, None, _) => Method::Info,
            (true, Some(_), None) => Method::None,
            _ => method,
        };
        Row {
            metric: metric.into(),
            path: path.into(),
            a,
            b,
            change,
            percent,
            noise: noise.filter(|t| method != Method::Info && t.is_finite()),
            method,
            verdict,
        }
    }
}

/// Two runs or two sweeps, compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Comparison {
    /// Two runs.
    Runs(Runs),
    /// Two sweeps.
    Sweeps(sweep::Sweeps),
}

impl Comparison {
    /// What differs in the load the two were run on (empty: nothing recorded differs).
    pub fn load(&self) -> &[String] {
        match self {
            Comparison::Runs(r) => &r.load,
            Comparison::Sweeps(s) => &s.load,
        }
    }

    /// Whether a figure with a way that is worse moved that way beyond its noise.
    pub fn any_worse(&self) -> bool {
        match self {
            Comparison::Runs(r) => r.rows.iter().any(|r| r.verdict == Verdict::Worse),
            Comparison::Sweeps(s) => s.rows.iter().any(|r| r.row.verdict == Verdict::Worse),
        }
    }
}

/// Compares two records: two runs or two sweeps; a run and a sweep are refused.
pub fn compare(a: &Record, b: &Record) -> Result<Comparison, CompareError> {
    match (a, b) {
        (Record::Run(a), Record::Run(b)) => Ok(Comparison::Runs(runs(a, b))),
        (Record::Sweep(a), Record::Sweep(b)) => sweep::sweeps(a, b).map(Comparison::Sweeps),
        _ => Err(CompareError::Mixed {
            a: a.path().display().to_string(),
            a_kind: a.kind(),
            b: b.path().display().to_string(),
            b_kind: b.kind(),
        }),
    }
}

/// One run, as the comparison names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSide {
    /// Its summary.json.
    pub path: String,
    /// The scenario's name.
    pub scenario: String,
    /// Its seed.
    pub seed: u64,
    /// `virtual` or `realtime`.
    pub mode: String,
    /// Queries started: the counts are compared per query started.
    pub queries_started: u64,
    /// Whether the `.hgrm` files were beside it (the percentiles' intervals).
    pub histograms: bool,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Runs {
    /// A.
    pub a: RunSide,
    /// B.
    pub b: RunSide,
    /// The figures.
    pub rows: Vec<Row>,
    /// What differs in their load (empty: nothing summary.json records).
    pub load: Vec<String>,
}

fn side(r: &Run) -> RunSide {
    RunSide {
        path: r.path.display().to_string(),
        scenario: r.word("scenario"),
        seed: r.count("seed"),
        mode: r.word("mode"),
        queries_started: r.count("queries_started"),
        histograms: r.query.is_some() && r.call.is_some(),
    }
}

/// Two runs' headline figures compared.
pub fn runs(a: &Run, b: &Run) -> Runs {
    let mut rows = Vec::new();
    let both = |f: &dyn Fn(&Run) -> f64| (Some(f(a)), Some(f(b)));
    let way = |path: &str| direction(path);
    // Throughput: the queries finished as a Poisson count.
    for (label, path) in [
        ("queries/s", "throughput.queries_per_s"),
        ("calls/s", "throughput.calls_per_s"),
    ] {
        let half = |r: &Run| noise::poisson_rate(r.num(path), r.num("queries"));
        let values = both(&|r| r.num(path));
        let t = noise::combined(half(a), half(b));
        rows.push(Row::new(
            label,
            path,
            values,
            way(path),
            Some(t),
            Method::Poisson,
        ));
    }
    // Percentiles, by the order statistics of their .hgrm.
    let percentile = |hist: &str, stat: &str, p: f64| {
        let path = format!("latency_ms.{hist}.{stat}");
        let (va, vb) = (a.num(&path), b.num(&path));
        let h = |r: &Run| {
            if hist == "query" {
                r.query.clone()
            } else {
                r.call.clone()
            }
        };
        let t = match (
            h(a).and_then(|h| h.quantile_interval(p)),
            h(b).and_then(|h| h.quantile_interval(p)),
        ) {
            (Some((al, au)), Some((bl, bu))) => {
                let (ea, eb) = if vb >= va {
                    (au - va, vb - bl)
                } else {
                    (va - al, bu - vb)
                };
                Some(noise::combined(ea.max(0.0), eb.max(0.0)))
            }
            _ => None,
        };
        Row::new(
            format!("{hist} {stat} (ms)"),
            path.clone(),
            (Some(va), Some(vb)),
            way(&path),
            t,
            Method::OrderStatistics,
        )
    };
    let mean = {
        let path = "latency_ms.query.mean";
        let t = a
            .query
            .as_ref()
            .and_then(|h| h.mean_half_width())
            .zip(b.query.as_ref().and_then(|h| h.mean_half_width()))
            .map(|(x, y)| noise::combined(x, y));
        Row::new(
            "query mean (ms)",
            path,
            both(&|r| r.num(path)),
            way(path),
            t,
            Method::Mean,
        )
    };
    rows.push(mean);
    for (stat, p) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)] {
        rows.push(percentile("query", stat, p));
    }
    rows.push(percentile("call", "p95", 0.95));
    // Shares: 429s of requests, failed or abandoned queries of those started, failed calls.
    let share = |label: &str,
                 path: String,
                 k: &dyn Fn(&Run) -> f64,
                 n: &dyn Fn(&Run) -> f64,
                 lead: &str| {
        let p = |r: &Run| (n(r) > 0.0).then(|| k(r) / n(r));
        let t = noise::two_proportions(k(a), n(a), k(b), n(b));
        let t = t.filter(|_| p(a).is_some() && p(b).is_some());
        Row::new(label, path, (p(a), p(b)), way(lead), t, Method::Binomial)
    };
    rows.push(share(
        "429s of requests",
        "provider.rate_limited / provider.received".into(),
        &|r| r.num("provider.rate_limited"),
        &|r| r.num("provider.received"),
        "provider.rate_limited",
    ));
    rows.push(share(
        "queries failed or abandoned, of started",
        "(queries_failed + queries_abandoned) / queries_started".into(),
        &|r| r.num("queries_failed") + r.num("queries_abandoned"),
        &|r| r.num("queries_started"),
        "queries_failed",
    ));
    rows.push(share(
        "calls failed, of calls",
        "errors / calls".into(),
        &|r| r.num("errors"),
        &|r| r.num("calls"),
        "errors",
    ));
    // Counts per query started: each as Poisson in its own events.
    let per_query = |label: &str, path: &str, events: &str| {
        let started = |r: &Run| r.num("queries_started");
        let v = |r: &Run| (started(r) > 0.0).then(|| r.num(path) / started(r));
        let half = |r: &Run| {
            let x = v(r)?;
            Some(noise::poisson_rate(x, r.num(events)))
        };
        let t = half(a).zip(half(b)).map(|(x, y)| noise::combined(x, y));
        Row::new(
            label,
            format!("{path} / queries_started"),
            (v(a), v(b)),
            way(path),
            t,
            Method::Poisson,
        )
    };
    rows.push(per_query(
        "requests per query",
        "provider.received",
        "provider.received",
    ));
    rows.push(per_query(
        "tokens per query",
        "provider.tokens_charged",
        "provider.received",
    ));
    rows.push(per_query("retries per query", "retries", "retries"));
    // What a setting costs beside its alternative (both runs priced): the bill per query and
    // per good query, as rates in the answers billed (each served answer is one), and the
    // share of the bill wasted, as a proportion of them.
    if a.priced() && b.priced() {
        let served = |r: &Run| r.num("provider.served");
        for (label, path, over) in [
            ("$ per query", "cost.per_query_usd", "queries_started"),
            (
                "$ per good query",
                "cost.per_good_query_usd",
                "cost.good_queries",
            ),
        ] {
            let v = |r: &Run| (r.num(over) > 0.0).then(|| r.num("cost.total_usd") / r.num(over));
            let half = |r: &Run| Some(noise::poisson_rate(v(r)?, served(r)));
            let t = half(a).zip(half(b)).map(|(x, y)| noise::combined(x, y));
            rows.push(Row::new(
                label,
                path,
                (v(a), v(b)),
                way(path),
                t,
                Method::Poisson,
            ));
        }
        let share = |r: &Run| r.num("cost.wasted_share");
        let t = noise::two_proportions(
            share(a) * served(a),
            served(a),
            share(b) * served(b),
            served(b),
        );
        rows.push(Row::new(
            "share of the bill wasted",
            "cost.wasted_share",
            (Some(share(a)), Some(share(b))),
            way("cost.wasted_share"),
            t,
            Method::Binomial,
        ));
    }
    // Each provider of several.
    let mut names = a.providers();
    for n in b.providers() {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names.sort();
    for name in names {
        let field = |r: &Run, f: &str| r.provider(&name, f);
        let path = |f: &str| format!("providers.{name}.{f}");
        let ratio = |r: &Run| {
            let n = field(r, "received").filter(|n| *n > 0.0)?;
            Some(field(r, "rate_limited")? / n)
        };
        let counts = |r: &Run| field(r, "rate_limited").zip(field(r, "received"));
        let t = counts(a)
            .zip(counts(b))
            .and_then(|((ka, na), (kb, nb))| noise::two_proportions(ka, na, kb, nb))
            .filter(|_| ratio(a).is_some() && ratio(b).is_some());
        rows.push(Row::new(
            format!("{name}: 429s of requests"),
            format!("{} / {}", path("rate_limited"), path("received")),
            (ratio(a), ratio(b)),
            way(&path("rate_limited")),
            t,
            Method::Binomial,
        ));
        for (label, f) in [
            ("requests per query", "received"),
            ("tokens per query", "tokens_charged"),
        ] {
            let v = |r: &Run| {
                let started = r.num("queries_started");
                (started > 0.0).then_some(())?;
                Some(field(r, f)? / started)
            };
            let half = |r: &Run| Some(noise::poisson_rate(v(r)?, field(r, "received")?));
            let t = half(a).zip(half(b)).map(|(x, y)| noise::combined(x, y));
            rows.push(Row::new(
                format!("{name}: {label}"),
                format!("{} / queries_started", path(f)),
                (v(a), v(b)),
                way(&path(f)),
                t,
                Method::Poisson,
            ));
        }
    }
    // The load: informational.
    for (label, path) in [
        ("queries started", "queries_started"),
        ("queries finished", "queries"),
    ] {
        rows.push(Row::new(
            label,
            path,
            both(&|r| r.num(path)),
            None,
            None,
            Method::Info,
        ));
    }
    Runs {
        a: side(a),
        b: side(b),
        rows,
        load: load(a, b),
    }
}

/// What summary.json records of the load that differs between two runs: the scenario's name,
/// the mode, and the queries started when no one stop explains them (the same number of
/// queries, or, each run's last query having started by its end less its longest query, the
/// same duration). Seeds are not compared.
pub fn load(a: &Run, b: &Run) -> Vec<String> {
    let mut out = Vec::new();
    let f = crate::fmt::fmt_num;
    for field in ["scenario", "mode"] {
        let (x, y) = (a.word(field), b.word(field));
        if x != y {
            out.push(format!("{field}: A {x:?}, B {y:?}"));
        }
    }
    let started = |r: &Run| r.num("queries_started");
    if started(a) != started(b) {
        // The window a duration-bound run's duration lies in: no query starts after it, so
        // it ends at most one query later. A failed or abandoned query may have run longer
        // than the longest finished one: then only the end bounds it.
        let window = |r: &Run| {
            let end = r.num("virtual_seconds");
            let clean = r.num("queries_failed") + r.num("queries_abandoned") == 0.0;
            let longest = r.num("latency_ms.query.max") / 1000.0;
            (if clean { end - longest } else { 0.0 }, end)
        };
        let ((a0, a1), (b0, b1)) = (window(a), window(b));
        if a0 > b1 || b0 > a1 {
            out.push(format!(
                "queries started: A {}, B {}, and their ends (A {} s, B {} s) fit no one duration",
                f(started(a)),
                f(started(b)),
                f(a1),
                f(b1)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noise_or_a_change_that_is_not_finite_judges_nothing() {
        let way = Some(Direction::LowerIsWorse);
        let row = |a: f64, b: f64, noise: f64| {
            Row::new(
                "m",
                "p",
                (Some(a), Some(b)),
                way,
                Some(noise),
                Method::Poisson,
            )
        };
        for r in [
            row(1.0, 2.0, f64::INFINITY),
            row(1.0, 2.0, f64::NAN),
            row(-1e308, 1e308, 1.0),
        ] {
            assert_eq!(r.verdict, Verdict::NoEstimate, "{r:?}");
            assert_eq!(r.noise.filter(|n| !n.is_finite()), None, "{r:?}");
        }
        assert_eq!(Verdict::NoEstimate.words(), "noise unknown");
        // Unchanged is unchanged whatever the noise; a finite one still judges.
        assert_eq!(row(3.0, 3.0, f64::INFINITY).verdict, Verdict::NoChange);
        assert_eq!(row(1.0, 2.0, 0.5).verdict, Verdict::Better);
        assert_eq!(row(1.0, 1.2, 0.5).verdict, Verdict::WithinNoise);
        // A Poisson half-width near f64::MAX stays finite.
        assert!(noise::poisson_rate(1e308, 200.0).is_finite());
    }
}
