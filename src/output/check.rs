//! The gate's checks written out: a plain table for the terminal, Markdown for a CI job page,
//! JUnit XML (one testcase per check) for CI test reports.

use std::fmt::Write as _;

use crate::analysis::check::Check;
use crate::fmt::fmt_num;
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
    let n = checks.len();
    let count = format!("{n} check{}", if n == 1 { "" } else { "s" });
    if failed.is_empty() {
        format!("{count}, all passed")
    } else {
        format!("{count}, {} failed: {}", failed.len(), failed.join(", "))
    }
}

/// Which checks a table or a Markdown summary lists (its closing line counts them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rows {
    /// Every check.
    #[default]
    All,
    /// The checks that failed (`--only-failures`).
    Failures,
}

impl Rows {
    fn shows(self, c: &Check) -> bool {
        self == Rows::All || !c.pass
    }
}

/// A plain-text table of every check, then the outcome.
pub fn table(checks: &[Check]) -> String {
    table_of(checks, Rows::All)
}

/// A plain-text table of the checks `rows` picks (none: no table), then the outcome of all.
pub fn table_of(checks: &[Check], rows: Rows) -> String {
    let head = ["check", "metric", "value", "expected", "verdict"];
    let rows: Vec<[String; 5]> = checks
        .iter()
        .filter(|c| rows.shows(c))
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
    if !rows.is_empty() {
        line(head);
        for r in &rows {
            line([&r[0], &r[1], &r[2], &r[3], &r[4]]);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{}", terminal(&outcome(checks)));
    out
}

/// A Markdown summary for a CI job page: the outcome, the failed checks, then every check
/// (unless `rows` asks for the failures alone). `title` names the run (scenario, seed, mode,
/// baseline); it is escaped.
pub fn markdown(title: &str, checks: &[Check], rows: Rows) -> String {
    let failed = checks.iter().filter(|c| !c.pass).count();
    let mark = if failed == 0 { "passed" } else { "FAILED" };
    let mut md = format!("## capsize check {mark}\n\n{}\n\n", escape::markdown(title));
    let _ = writeln!(md, "{}\n", escape::markdown(&outcome(checks)));
    let table = |md: &mut String, pick: &dyn Fn(&Check) -> bool| {
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
        table(&mut md, &|c| !c.pass);
        md.push('\n');
    }
    if rows == Rows::All {
        md.push_str("<details><summary>Every check</summary>\n\n");
        table(&mut md, &|_| true);
        md.push_str("\n</details>\n");
    }
    md
}

/// JUnit XML: one testsuite named `suite`, one testcase per check, a `<failure>` for each that
/// failed. A testcase is named by its check's kind and metric alone (`baseline
/// latency_ms.query.p95`, class `capsize.baseline`), never by a threshold or a baseline value,
/// so a CI's test history follows it from one baseline to the next; what it was held to is in
/// its `<system-out>` and its failure's message.
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
        let name = xml(&format!("{} {}", c.kind.name(), c.metric));
        let class = format!("capsize.{}", c.kind.name());
        let held = format!("{} is {}; expected {}", c.metric, value(c), c.expected);
        let _ = writeln!(x, "    <testcase classname=\"{class}\" name=\"{name}\">");
        if !c.pass {
            let _ = writeln!(
                x,
                "      <failure message=\"{}\">{}</failure>",
                xml(&format!("{}; expected {}", c.verdict, c.expected)),
                xml(&held)
            );
        }
        let _ = writeln!(x, "      <system-out>{}</system-out>", xml(&held));
        x.push_str("    </testcase>\n");
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::check::Kind;

    fn check(metric: &str, expected: &str, pass: bool) -> Check {
        Check {
            kind: Kind::Baseline,
            metric: metric.into(),
            value: Some(1.0),
            expected: expected.into(),
            pass,
            verdict: if pass { "pass" } else { "FAIL: 9.0 % worse" }.into(),
        }
    }

    #[test]
    fn only_failures_hides_passing_rows_but_counts_them() {
        let checks = [
            check("latency_ms.query.p95", "<= 2", true),
            check("throughput.queries_per_s", ">= 2", false),
        ];
        let t = table_of(&checks, Rows::Failures);
        assert!(!t.contains("latency_ms.query.p95"), "{t}");
        assert!(t.contains("baseline  throughput.queries_per_s"), "{t}");
        assert!(
            t.ends_with("2 checks, 1 failed: baseline throughput.queries_per_s\n"),
            "{t}"
        );
        assert!(table_of(&checks, Rows::All).contains("latency_ms.query.p95"));
        let md = markdown("t", &checks, Rows::Failures);
        assert!(
            !md.contains("latency_ms.query.p95") && !md.contains("Every check"),
            "{md}"
        );
        assert!(markdown("t", &checks, Rows::All).contains("latency_ms.query.p95"));
        // Nothing failed: no table, the closing line alone.
        let t = table_of(&checks[..1], Rows::Failures);
        assert_eq!(t, "1 check, all passed\n");
    }

    #[test]
    fn junit_names_hold_no_threshold() {
        let x = junit(
            "s",
            &[check(
                "latency_ms.query.p95",
                "<= 1,050 (baseline 1,000, 5 %)",
                false,
            )],
        );
        assert!(x.contains("name=\"baseline latency_ms.query.p95\">"), "{x}");
        assert!(
            x.contains("<failure message=\"FAIL: 9.0 % worse; expected &lt;= 1,050"),
            "{x}"
        );
        assert!(
            x.contains("<system-out>latency_ms.query.p95 is 1; expected &lt;= 1,050"),
            "{x}"
        );
    }
}
