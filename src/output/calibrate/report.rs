//! `calibration.md`: what was read, the fit table (observed against fitted quantiles for each
//! quantity), the structure and arrivals found, the check (observed against predicted), what
//! was assumed and what was skipped.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::analysis::calibrate::{Arrival, Calibration, FitCheck, Fitted, Shape};
use crate::engine::scenario::providers::fit_name;
use crate::fmt::fmt_num;
use crate::output::report::escape;

use super::names;

/// One fitted quantity: how the fit table names it (the input's names as it gave them), the
/// file stem of its charts (from the names as the scenario writes them), and its fit.
pub struct Quantity<'a> {
    /// Its name in the fit table.
    pub what: String,
    /// Its charts' file stem, `fit-...`: no other quantity's.
    pub stem: String,
    /// The fit.
    pub fit: &'a Fitted,
}

/// Every fitted quantity, named as the fit table names it.
pub fn fitted(cal: &Calibration) -> Vec<Quantity<'_>> {
    let mut rows = Vec::new();
    if let Some(p) = &cal.provider {
        let (model, in_stem) = if p.model.is_empty() {
            ("model not named".to_string(), "model not named".to_string())
        } else {
            (names::shown(&p.model), fit_name(&p.model))
        };
        for (what, f) in [
            ("latency, ms", &p.latency),
            ("time to first chunk, ms", &p.ttft),
            ("time per output token, ms", &p.tpot),
            ("input tokens", &p.input),
            ("output tokens", &p.output),
        ] {
            if let Some(f) = f {
                let stem = format!("{} {in_stem} {what}", p.name);
                rows.push((format!("{} ({model}): {what}", p.name), stem, f));
            }
        }
    }
    for (t, name) in cal.tools.iter().zip(names::tools(cal)) {
        if let Some(f) = &t.latency {
            let what = format!("tool {}: latency, ms", names::tool_label(&name, &t.name));
            rows.push((what, format!("tool {name} latency ms"), f));
        }
    }
    if let Some(Arrival::Closed { think: Some(f), .. }) = &cal.arrival {
        rows.push(("think time, ms".into(), "think time ms".into(), f));
    }
    let mut taken = HashSet::new();
    rows.into_iter()
        .map(|(what, words, fit)| {
            let base = super::charts::stem(&words);
            let mut stem = base.clone();
            let mut k = 2;
            while !taken.insert(stem.clone()) {
                stem = format!("{base}-{k}");
                k += 1;
            }
            Quantity { what, stem, fit }
        })
        .collect()
}

/// One quantity's row of the fit table.
fn fit_row(out: &mut String, what: &str, f: &Fitted) {
    let o = &f.observed;
    let fam = &f.fit.family;
    let q = |x: f64| fmt_num(x);
    let _ = writeln!(
        out,
        "| {} | {} | {} / {} / {} | {} / {} / {} | {} | {:.3} ({}) |",
        escape::markdown(what),
        q(o.n as f64),
        q(o.p50),
        q(o.p90),
        q(o.p99),
        q(fam.quantile(0.5)),
        q(fam.quantile(0.9)),
        q(fam.quantile(0.99)),
        fam.name(),
        f.fit.distance,
        if f.fit.distance <= f.fit.accept || fam.name() == "empirical" {
            "fits"
        } else {
            "does not fit"
        },
    );
}

/// The whole report.
pub fn markdown(
    name: &str,
    cal: &Calibration,
    check: Option<&FitCheck>,
    assumed: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Calibration: {}\n", escape::markdown(name));
    let _ = writeln!(out, "_Written by capsize {}._\n", crate::engine::VERSION);
    out.push_str("## What was read\n\n| file | read as | spans or rows | skipped or assumed |\n|---|---|---:|---:|\n");
    for r in &cal.reads {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            escape::markdown(&r.path.display().to_string()),
            r.format,
            fmt_num(r.spans as f64),
            fmt_num(r.skipped.total() as f64)
        );
    }
    let _ = writeln!(
        out,
        "\n{} queries, over {} s (first start to last).\n",
        fmt_num(cal.queries as f64),
        fmt_num(cal.window_s)
    );

    out.push_str("## The fit\n\nEach quantity's observed quantiles (p50 / p90 / p99) beside the fitted distribution's, the family chosen and its Kolmogorov-Smirnov distance (the largest gap between the two CDFs). A family is kept if within 1.36/sqrt(n) (at least 0.03); otherwise the observed values are (empirical).\n\n");
    out.push_str(
        "| quantity | n | observed | fitted | family | KS |\n|---|---:|---|---|---|---|\n",
    );
    let quantities = fitted(cal);
    for q in &quantities {
        fit_row(&mut out, &q.what, q.fit);
    }
    out.push('\n');
    for q in &quantities {
        let _ = writeln!(
            out,
            "![{}: observed and fitted CDFs]({}.png)\n",
            escape::markdown(&q.what),
            q.stem
        );
    }
    out.push_str("\n## The structure found\n\n");
    let s = &cal.structure;
    let total: u64 = s.shapes.values().sum();
    for (shape, n) in &s.shapes {
        let what = match shape {
            Shape::Single => "one model call",
            Shape::Around => "model turns around rounds of tool calls",
            Shape::Between => "model turns between rounds of tool calls",
            Shape::ToolsOnly => "tool calls only",
            Shape::Other => "another shape (a turn on one side of the rounds only: written as turns before them)",
        };
        let _ = writeln!(
            out,
            "- {what}: {} queries ({:.1} %)",
            fmt_num(*n as f64),
            100.0 * *n as f64 / total.max(1) as f64
        );
    }
    if !s.rounds_seen.is_empty() {
        let r: Vec<String> = s
            .rounds_seen
            .iter()
            .map(|(k, n)| format!("{k}: {}", fmt_num(*n as f64)))
            .collect();
        let _ = writeln!(out, "- rounds per query (count: queries): {}", r.join(", "));
    }
    if !s.per_round_seen.is_empty() {
        let r: Vec<String> = s
            .per_round_seen
            .iter()
            .map(|(k, n)| format!("{k}: {}", fmt_num(*n as f64)))
            .collect();
        let _ = writeln!(
            out,
            "- tool calls per round (count: rounds): {}",
            r.join(", ")
        );
    }
    if let Some((n, seq)) = s.sequential {
        let _ = writeln!(
            out,
            "- rounds of two or more calls: {}, {:.0} % of them run one call after another",
            fmt_num(n as f64),
            100.0 * seq
        );
    }
    if let Some(o) = &s.own {
        let _ = writeln!(
            out,
            "- the agent's own time per query (inside the query, in no call): p50 {} ms, p95 {} ms. capsize does not simulate it yet: it is in the observed query time, not the predicted one",
            fmt_num(o.p50),
            fmt_num(o.p95)
        );
    }
    if let Some(fit) = &cal.client {
        let _ = writeln!(out, "{}", super::client::sentence(fit));
    }
    if s.nested > 0 {
        let _ = writeln!(out, "- {} model calls were made inside a tool (a subagent's): fitted with the model's calls, not placed as turns", fmt_num(s.nested as f64));
    }
    for o in &cal.others {
        let _ = writeln!(
            out,
            "- not in the scenario: {} calls to {} {} (the queries' turns go to one model: the one called most)",
            fmt_num(o.calls as f64),
            escape::markdown(&if o.provider.is_empty() { "(provider not named)".into() } else { names::shown(&o.provider) }),
            escape::markdown(&names::shown(&o.model))
        );
    }
    match &cal.arrival {
        Some(Arrival::Open {
            rate_per_s,
            cv,
            poisson_distance,
            accept,
        }) => {
            let _ = writeln!(
                out,
                "- arrivals: open, {} queries/s; gaps' CV {cv:.2}, KS to an exponential {poisson_distance:.3} ({})",
                fmt_num(*rate_per_s),
                if poisson_distance <= accept { "Poisson fits" } else { "Poisson does not fit" }
            );
        }
        Some(Arrival::Closed {
            seen,
            active,
            per_session,
            ..
        }) => {
            let _ = writeln!(
                out,
                "- arrivals: closed, {} sessions seen, {} active at once on average, {} queries each",
                fmt_num(*seen as f64),
                fmt_num(*active),
                fmt_num(*per_session)
            );
        }
        None => out.push_str("- arrivals: fewer than two queries\n"),
    }

    if let Some(c) = check {
        let _ = write!(
            out,
            "\n## The check: observed against predicted\n\nThe calibrated scenario run in virtual time under the observed conditions (the same sessions or arrival rate, for as long, with the client settings the scenario gives), under {} seed{} pooled.\n\n| figure | observed | predicted | predicted / observed | target |\n|---|---:|---:|---:|---|\n",
            c.runs,
            if c.runs == 1 { "" } else { "s" }
        );
        for r in &c.rows {
            let ratio = r.ratio().map_or("n/a".into(), |x| format!("{x:.3}"));
            let target = r.verdict().unwrap_or_default();
            let _ = writeln!(
                out,
                "| {}{} | {} | {} | {ratio} | {target} |",
                escape::markdown(&r.what),
                if r.unit.is_empty() {
                    String::new()
                } else {
                    format!(", {}", r.unit)
                },
                fmt_num(r.observed),
                fmt_num(r.predicted)
            );
        }
    }
    out.push_str("\n## What was assumed\n\n");
    for a in assumed {
        let _ = writeln!(out, "- {}", escape::markdown(a));
    }
    if cal.skipped.total() > 0 {
        out.push_str("\n## What was skipped, or read by assumption\n\n| what | count | first at |\n|---|---:|---|\n");
        for (reason, n, at) in cal.skipped.iter() {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                escape::markdown(reason),
                fmt_num(n as f64),
                escape::markdown(at)
            );
        }
    }
    out
}
