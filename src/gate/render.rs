//! The gate's checks written out: a plain table for the terminal, Markdown for a CI job page,
//! JUnit XML (one testcase per check) for CI test reports.

use std::fmt::Write as _;

use super::Check;
use crate::plan::fmt_num;

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
                c.metric.clone(),
                value(c),
                c.expected.clone(),
                c.verdict.clone(),
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
    let _ = writeln!(out, "\n{}", outcome(checks));
    out
}

/// `s` with `&`, `<` and `>` as entities, and every other character through `other`.
fn escape(s: &str, other: impl Fn(char, &mut String)) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => other(c, &mut out),
        }
    }
    out
}

/// Text that Markdown (and the HTML it may hold) shows as written, on one line.
fn md_cell(s: &str) -> String {
    escape(s, |ch, out| match ch {
        '\n' | '\r' => out.push(' '),
        '|' | '`' | '*' | '_' | '[' | ']' | '\\' | '#' => {
            out.push('\\');
            out.push(ch);
        }
        c => out.push(c),
    })
}

/// A Markdown summary for a CI job page: the outcome, the failed checks, then every check.
/// `title` names the run (scenario, seed, mode, baseline); it is escaped.
pub fn markdown(title: &str, checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.pass).count();
    let mark = if failed == 0 { "passed" } else { "FAILED" };
    let mut md = format!("## capsize check {mark}\n\n{}\n\n", md_cell(title));
    let _ = writeln!(md, "{}\n", md_cell(&outcome(checks)));
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
                md_cell(&c.metric),
                md_cell(&value(c)),
                md_cell(&c.expected),
                md_cell(&c.verdict)
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

fn xml(s: &str) -> String {
    escape(s, |ch, out| match ch {
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&apos;"),
        // Characters XML 1.0 cannot hold at all.
        c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
        c => out.push(c),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_xml_show_hostile_text_as_written() {
        assert_eq!(md_cell("a`b <!-- | x_y\n#"), "a\\`b &lt;!-- \\| x\\_y \\#");
        assert_eq!(
            xml("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;"
        );
    }
}
