//! The gate's checks written out: a plain table for the terminal, Markdown for a CI job page,
//! JUnit XML (one testcase per check) for CI test reports.

use std::fmt::Write as _;

use super::Check;
use crate::analysis::plan::fmt_num;
use crate::output::report::escape::{self, terminal, xml};

fn value(c: &Check) -> String {
    c.value.map_or("null".into(), fmt_num)
}

/// The closing line: how many checks, how many failed, and which.
fn outcome(checks: &[Check]) -> String {
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| format!("{} {}", c.kind.name(), c.metric))
        .collect();
    if failed.is_empty() {
        format!("{} checks, all passed", checks.len())
    } else {
        format!(
            "{} checks, {} failed: {}",
            checks.len(),
            failed.len(),
            failed.join(", ")
        )
    }
}

/// A plain-text table of every check, then the outcome.
pub fn table(checks: &[Check]) -> String {
    let head = ["check", "metric", "value", "expected", "verdict"];
    let rows: Vec<[String; 5]> = checks
        .iter()
        .map(|c| {
            [
                c.kind.name().to_string(),
                terminal(&c.metric),
                value(c),
                terminal(&c.expected),
                terminal(&c.verdict),
            ]
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..5).map(width).collect();
    let mut out = String::new();
    let mut line = |cells: [&str; 5]| {
        let _ = writeln!(
            out,
            "{:<a$}  {:<b$}  {:>c$}  {:<d$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            a = w[0],
            b = w[1],
            c = w[2],
            d = w[3]
        );
    };
    line(head);
    for r in &rows {
        line([&r[0], &r[1], &r[2], &r[3], &r[4]]);
    }
    let _ = writeln!(out, "\n{}", terminal(&outcome(checks)));
    out
}

/// A Markdown summary for a CI job page: the outcome, the failed checks, then every check.
/// `title` names the run (scenario, seed, mode, baseline); it is escaped.
pub fn markdown(title: &str, checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.pass).count();
    let mark = if failed == 0 { "passed" } else { "FAILED" };
    let mut md = format!("## capsize check {mark}\n\n{}\n\n", escape::markdown(title));
    let _ = writeln!(md, "{}\n", escape::markdown(&outcome(checks)));
    let rows = |md: &mut String, pick: &dyn Fn(&Check) -> bool| {
        md.push_str(
            "| | check | metric | value | expected | verdict |\n|---|---|---|---:|---|---|\n",
        );
        for c in checks.iter().filter(|c| pick(c)) {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                if c.pass { "✅" } else { "❌" },
                c.kind.name(),
                escape::markdown(&c.metric),
                escape::markdown(&value(c)),
                escape::markdown(&c.expected),
                escape::markdown(&c.verdict)
            );
        }
    };
    if failed > 0 {
        md.push_str("### Failed\n\n");
        rows(&mut md, &|c| !c.pass);
        md.push('\n');
    }
    md.push_str("<details><summary>Every check</summary>\n\n");
    rows(&mut md, &|_| true);
    md.push_str("\n</details>\n");
    md
}

/// JUnit XML: one testsuite named `suite`, one testcase per check, a `<failure>` for each that
/// failed.
pub fn junit(suite: &str, checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.pass).count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"capsize check\" tests=\"{}\" failures=\"{failed}\">",
        checks.len()
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">",
        xml(suite),
        checks.len()
    );
    for c in checks {
        let name = xml(&format!("{} {}", c.metric, c.expected));
        let class = format!("capsize.{}", c.kind.name());
        if c.pass {
            let _ = writeln!(x, "    <testcase classname=\"{class}\" name=\"{name}\"/>");
        } else {
            let _ = writeln!(
                x,
                "    <testcase classname=\"{class}\" name=\"{name}\">\n      <failure message=\"{}\">{} is {}; expected {}</failure>\n    </testcase>",
                xml(&c.verdict),
                xml(&c.metric),
                xml(&value(c)),
                xml(&c.expected)
            );
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}
