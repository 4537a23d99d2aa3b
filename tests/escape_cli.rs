//! Scenario strings in what the commands print and write, from the outside: Markdown (the
//! sweep's report.md, check's --summary-md) shows them as written, with no tag, heading or
//! control character of theirs; the terminal (tables, summaries, error lines) gets no control
//! character from them.

use std::path::Path;

mod common;
use common::capsize;
use common::temp::Temp;

/// Hostile strings in the name and the description (the adversarial pass's report-escape.toml,
/// plus C1 and DEL in the description: a name with a control character is refused, since it
/// names the output folder).
const HOSTILE: &str = r#"name = "x<img src=x onerror=alert(1)>\"'|`*_[l](javascript:alert(2))&amp;"
description = "<script>alert(1)</script> <img src=x onerror=alert(3)> | pipe | \n# Heading\n</td></tr></table><svg onload=alert(4)>\"quotes' & ampersand ]]> <!-- --> ${{ secrets.X }} \u001b[31mRED\u001b[0m\u009b2J\u007f"
seed = 1

[provider]
rpm = 600
latency = { dist = "uniform", min_ms = 200, max_ms = 900 }

[workload]
queries = 3
calls_per_query = 2
tokens_per_call = 100

[scheduler]
max_concurrency = 2

[sweep]
"scheduler.max_concurrency" = [1, 2]

[slo]
"latency_ms.query.p95" = "< 2000"
"provider.rate_limited" = "== 0"
"#;

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// No ESC, DEL or C1 control character, and no other C0 than the newline.
fn assert_no_control(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || ('\u{80}'..='\u{9f}').contains(&c))
        .collect();
    assert!(
        bad.is_empty(),
        "{what} holds control characters {bad:?}:\n{text}"
    );
}

/// `md` without its code spans (where `<` is text), its escaped backticks removed first.
fn outside_code_spans(md: &str) -> String {
    md.replace("\\`", "")
        .split('`')
        .step_by(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The Markdown shows no tag, heading or control character from the scenario's strings (the
/// tags capsize writes itself, `<details>` around check's table, aside).
fn assert_inert_markdown(what: &str, md: &str) {
    assert_no_control(what, md);
    let mut text = outside_code_spans(md);
    for own in ["<details><summary>Every check</summary>", "</details>"] {
        text = text.replace(own, "");
    }
    assert!(
        !text.contains('<'),
        "{what}: a raw '<' outside code spans:\n{md}"
    );
    for line in md.lines() {
        assert!(
            !line.starts_with("# Heading"),
            "{what}: injected heading:\n{md}"
        );
        assert!(
            !line.starts_with("</td>"),
            "{what}: description broke its line:\n{md}"
        );
    }
    for shown in [
        "&lt;img src=x onerror=alert(1)&gt;",
        "\\|",
        "[l\\](javascript",
    ] {
        assert!(
            md.contains(shown),
            "{what}: {shown:?} not shown as text:\n{md}"
        );
    }
}

#[test]
fn the_sweep_report_shows_scenario_strings_as_text() {
    let t = Temp::new("escape", "sweep");
    let scenario = t.write("hostile.toml", HOSTILE);
    let out = t.path("esc");
    let o = capsize(&["sweep", s(&scenario), "--out", s(&out)]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_no_control("sweep's stdout", &String::from_utf8_lossy(&o.stdout));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_inert_markdown("report.md", &md);
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(headings.len(), 1, "{headings:?}");
    assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{md}");
    assert!(
        md.contains(" \\# Heading "),
        "the description's heading is text:\n{md}"
    );
    // The HTML is made from the Markdown: it shows the strings once escaped, not twice.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_no_control("report.html", &html);
    for raw in ["<script", "<img", "<svg onload"] {
        assert!(!html.contains(raw), "{raw} in report.html");
    }
    assert!(
        html.contains("<p>&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(!html.contains("&amp;lt;script"), "escaped twice");
}

#[test]
fn the_check_summary_shows_scenario_strings_as_text() {
    let t = Temp::new("escape", "check");
    let scenario = t.write("hostile.toml", HOSTILE);
    let md = t.path("summary.md");
    let o = capsize(&[
        "check",
        s(&scenario),
        "--out",
        s(&t.path("out")),
        "--summary-md",
        s(&md),
    ]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_no_control("check's stdout", &String::from_utf8_lossy(&o.stdout));
    let text = std::fs::read_to_string(&md).unwrap();
    assert_inert_markdown("--summary-md", &text);
    for line in text.lines().filter(|l| l.starts_with('#')) {
        assert!(
            line.starts_with("## capsize check ") || line == "### Failed",
            "a heading not capsize's: {line:?}"
        );
    }
}

#[test]
fn the_terminal_gets_no_control_character_from_a_scenario() {
    let t = Temp::new("escape", "terminal");
    let scenario = t.write("hostile.toml", HOSTILE);
    let out = t.path("out");
    let run = capsize(&["run", s(&scenario), "--out", s(&out)]);
    assert_eq!(run.status.code(), Some(0));
    let table = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(table.starts_with("scenario x<img"), "{table}");
    assert_no_control("run's table", &table);
    let base = capsize(&["baseline", s(&scenario), "--out", s(&t.path("b.json"))]);
    assert_eq!(base.status.code(), Some(0));
    assert_no_control("baseline's line", &String::from_utf8_lossy(&base.stdout));
    // A name with control characters is refused, in one line that shows none of them.
    let named = t.write(
        "named.toml",
        &HOSTILE.replacen("&amp;\"", "&amp;\\u001b[31m\\u009b\\u007f\"", 1),
    );
    let refused = capsize(&["run", s(&named), "--out", s(&out)]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(err.contains("name: names the output folder"), "{err}");
    assert_eq!(err.lines().count(), 1);
    assert_no_control("the refusal", &err);
    // An error line quoting a file name with an ESC in it.
    let evil = t.path("evil\u{1b}[2J\u{9b}.toml");
    let missing = capsize(&["run", s(&evil), "--out", s(&out)]);
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr).into_owned();
    assert!(err.contains("evil\u{241b}[2J"), "{err}");
    assert_no_control("the error line", &err);
}
