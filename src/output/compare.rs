//! `capsize compare`'s outputs: the comparison as a table for the terminal, or as JSON (in the
//! order of its fields, so the same inputs give the same bytes).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::analysis::compare::noise::Method;
use crate::analysis::compare::sweep::{Setting, Sweeps};
use crate::analysis::compare::{Comparison, Row, RunSide, Runs, Verdict};
use crate::fmt::fmt_num;
use crate::output::report::escape::terminal;

/// Which rows of a sweep comparison the table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The metrics that moved beyond their noise, or changed with no interval to judge by.
    Moved,
    /// Every metric of every matched point (`--all`).
    All,
}

/// The comparison as pretty JSON, with a final newline.
pub fn json(c: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(c).expect("a comparison always serialises");
    s.push('\n');
    s
}

/// The comparison as a table for the terminal (every string from the inputs escaped).
pub fn table(c: &Comparison, shown: Shown) -> String {
    match c {
        Comparison::Runs(r) => runs(r),
        Comparison::Sweeps(s) => sweeps(s, shown),
    }
}

fn signed(v: f64) -> String {
    if v > 0.0 {
        format!("+{}", fmt_num(v))
    } else {
        fmt_num(v)
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or("—".into(), fmt_num)
}

fn percent(v: Option<f64>) -> String {
    v.map_or("—".into(), |p| format!("{:+.1} %", p))
}

/// Rows of cells as aligned columns, each column left-aligned (`l` in `align`) or right-aligned
/// (numbers, `r`).
fn columns(head: &[&str], rows: &[Vec<String>], align: &str) -> String {
    let left: Vec<bool> = align.chars().map(|c| c == 'l').collect();
    let n = head.len();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([head[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..n).map(width).collect();
    let mut out = String::new();
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            let pad = w[i].saturating_sub(cell.chars().count());
            if i > 0 {
                line.push_str("  ");
            }
            if left.get(i).copied().unwrap_or(true) {
                line.push_str(cell);
                if i < n - 1 {
                    line.push_str(&" ".repeat(pad));
                }
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// How the noise was judged, one line per method the rows used.
fn legend(out: &mut String, rows: &[&Row]) {
    let used: BTreeSet<Method> = rows.iter().map(|r| r.method).collect();
    let lines: Vec<String> = used
        .iter()
        .filter_map(|m| m.legend().map(|l| format!("  {}: {l}", m.tag())))
        .collect();
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nnoise, at 95 % (samples taken as independent):");
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
}

/// The closing line: how many figures were judged, and how each came out.
fn tally(rows: &[&Row], what: &str) -> String {
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let judged = rows.iter().filter(|r| r.verdict != Verdict::Info).count();
    let unknown = match count(Verdict::NoEstimate) {
        0 => String::new(),
        n => format!(", {n} noise unknown"),
    };
    format!(
        "{judged} {what} judged: {} worse, {} better, {} within noise, {} no change, {} no interval{unknown}",
        count(Verdict::Worse),
        count(Verdict::Better),
        count(Verdict::WithinNoise),
        count(Verdict::NoChange),
        count(Verdict::NoInterval)
    )
}

fn run_side(label: &str, s: &RunSide) -> String {
    format!(
        "{label} {} ({}, seed {}, {}, {} queries started{})",
        terminal(&s.path),
        terminal(&s.scenario),
        s.seed,
        terminal(&s.mode),
        fmt_num(s.queries_started as f64),
        if s.histograms {
            ""
        } else {
            "; no .hgrm beside it"
        }
    )
}

fn runs(r: &Runs) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "capsize compare: {}", run_side("A", &r.a));
    let _ = writeln!(out, "                 {}\n", run_side("B", &r.b));
    let head = [
        "metric",
        "A",
        "B",
        "change",
        "%",
        "noise ±",
        "judged by",
        "verdict",
    ];
    let cells: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            vec![
                terminal(&row.metric),
                opt(row.a),
                opt(row.b),
                row.change.map_or("—".into(), signed),
                percent(row.percent),
                row.noise.map_or(String::new(), fmt_num),
                row.method.tag().to_string(),
                row.verdict.words().to_string(),
            ]
        })
        .collect();
    out.push_str(&columns(&head, &cells, "lrrrrrll"));
    let _ = writeln!(
        out,
        "\ncounts are taken per query started (a count grows with the work a run does)."
    );
    let rows: Vec<&Row> = r.rows.iter().collect();
    legend(&mut out, &rows);
    let _ = writeln!(out, "\n{}", tally(&rows, "figures"));
    out
}

/// A point as `key=value key=value`, each key by its last part when those are distinct.
fn point(p: &[Setting], short: bool) -> String {
    p.iter()
        .map(|s| {
            let key = if short {
                s.key.rsplit('.').next().unwrap_or(&s.key)
            } else {
                &s.key
            };
            terminal(&format!("{key}={}", s.value))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn sweep_side(label: &str, s: &crate::analysis::compare::sweep::SweepSide) -> String {
    let scenario = s
        .scenario
        .as_deref()
        .map_or(String::new(), |n| format!("{}, ", terminal(n)));
    format!(
        "{label} {} ({scenario}{} points, {} run{} each)",
        terminal(&s.path),
        s.points,
        s.repeats,
        if s.repeats == 1 { "" } else { "s" }
    )
}

fn with_ci(v: Option<f64>, ci: Option<f64>) -> String {
    match (v, ci) {
        (Some(v), Some(ci)) => format!("{} ± {}", fmt_num(v), fmt_num(ci)),
        (v, _) => opt(v),
    }
}

fn sweeps(s: &Sweeps, shown: Shown) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "capsize compare: {}", sweep_side("A", &s.a));
    let _ = writeln!(out, "                 {}", sweep_side("B", &s.b));
    let matched = s.a.points - s.only_a.len();
    let _ = writeln!(
        out,
        "points: {matched} matched, {} only in A, {} only in B\n",
        s.only_a.len(),
        s.only_b.len()
    );
    let shorts: BTreeSet<&str> = s
        .keys
        .iter()
        .map(|k| k.rsplit('.').next().unwrap_or(k))
        .collect();
    let short = shorts.len() == s.keys.len();
    let picked: Vec<_> = s
        .rows
        .iter()
        .filter(|r| {
            shown == Shown::All
                || matches!(
                    r.row.verdict,
                    Verdict::Worse | Verdict::Better | Verdict::NoInterval | Verdict::NoEstimate
                )
        })
        .collect();
    if picked.is_empty() {
        let _ = writeln!(out, "no metric of a matched point moved beyond its noise.");
    } else {
        let head = ["point", "metric", "A", "B", "change", "%", "verdict"];
        let cells: Vec<Vec<String>> = picked
            .iter()
            .map(|r| {
                vec![
                    point(&r.point, short),
                    terminal(&r.row.metric),
                    with_ci(r.row.a, r.a_ci95),
                    with_ci(r.row.b, r.b_ci95),
                    r.row.change.map_or("—".into(), signed),
                    percent(r.row.percent),
                    r.row.verdict.words().to_string(),
                ]
            })
            .collect();
        out.push_str(&columns(&head, &cells, "llrrrrl"));
    }
    if shown == Shown::Moved {
        let _ = writeln!(
            out,
            "(the metrics that moved beyond their noise or changed with no interval; --all shows every one)"
        );
    }
    for (label, points) in [("only in A", &s.only_a), ("only in B", &s.only_b)] {
        for p in points {
            let _ = writeln!(out, "{label}: {}", point(p, short));
        }
    }
    if let (Some(a), Some(b)) = (&s.a.recommended, &s.b.recommended) {
        let b = if a == b {
            "B the same".to_string()
        } else {
            format!("B {}", terminal(b))
        };
        let _ = writeln!(out, "recommended: A {}, {b}", terminal(a));
    }
    if s.a.repeats < 2 || s.b.repeats < 2 {
        let _ = writeln!(
            out,
            "\none run per point in {}: no interval, so no verdict (sweep with --repeats 3 or more for one)",
            match (s.a.repeats < 2, s.b.repeats < 2) {
                (true, true) => "both",
                (true, false) => "A",
                _ => "B",
            }
        );
    }
    let rows: Vec<&Row> = s.rows.iter().map(|r| &r.row).collect();
    legend(&mut out, &rows);
    let _ = writeln!(
        out,
        "  counts that grow with the work done (retries, orphaned requests) are shown, not judged: sweep.csv has no queries started to take them per query"
    );
    let _ = writeln!(out, "\n{}", tally(&rows, "point metrics"));
    out
}
