//! `capsize check` and `capsize baseline` from the outside: exit 0 when every check passes, 1
//! when an objective or a baseline comparison fails, 2 on bad input with nothing written;
//! JUnit XML that parses, and a Markdown summary.

use std::path::Path;
use std::process::Output;

mod common;
use common::capsize;
use common::temp::Temp;

/// Writes `text` to `name` in `t` and returns its path as a string.
fn file(t: &Temp, name: &str, text: &str) -> String {
    t.write(name, text)
        .to_str()
        .expect("UTF-8 path")
        .to_string()
}

/// `capsize check SCENARIO --baseline BASE --out OUT` and `extra`.
fn against(scenario: &str, base: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", scenario, "--baseline", s(base), "--out", s(out)];
    args.extend_from_slice(extra);
    capsize(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The table row of `kind` (objective or baseline) for `metric`, if printed.
fn row(text: &str, kind: &str, metric: &str) -> Option<String> {
    text.lines()
        .find(|l| {
            let mut cells = l.split_whitespace();
            cells.next() == Some(kind) && cells.next() == Some(metric)
        })
        .map(str::to_string)
}

const AGENT: &str = "scenarios/research-agent.toml";

/// A small research agent with no objectives, for baseline comparisons alone.
const SMALL: &str = r#"
name = "small-agent"
seed = 7
[provider]
rpm = 600
latency = { dist = "uniform", min_ms = 200, max_ms = 900 }
[workload]
sessions = 4
queries = 200
calls_per_query = 8
tokens_per_call = 2000
[scheduler]
max_concurrency = 8
"#;

#[test]
fn the_research_agent_meets_its_objectives_and_a_worse_setting_fails_them() {
    let t = Temp::new("check", "objectives");
    let out = t.path("out");
    let ok = capsize(&["check", AGENT, "--out", s(&out)]);
    assert_eq!(ok.status.code(), Some(0), "{}{}", stdout(&ok), stderr(&ok));
    let text = stdout(&ok);
    assert!(text.contains("2 checks, all passed"), "{text}");
    assert!(
        out.join("summary.json").exists(),
        "the run's reports are written"
    );
    // One call at a time: every query takes 8 calls in sequence, p95 far over 2 s.
    let bad = capsize(&[
        "check",
        AGENT,
        "--out",
        s(&out),
        "--set",
        "scheduler.max_concurrency=1",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    let text = stdout(&bad);
    let row = row(&text, "objective", "latency_ms.query.p95").unwrap_or_else(|| panic!("{text}"));
    assert!(row.ends_with("FAIL"), "{row}");
    assert!(
        text.contains("2 checks, 1 failed: objective latency_ms.query.p95"),
        "{text}"
    );
}

#[test]
fn a_baseline_passes_against_itself_and_catches_a_regression() {
    let t = Temp::new("check", "baseline");
    let scenario = file(&t, "small.toml", SMALL);
    let base = t.path("baselines/small.json");
    let wrote = capsize(&["baseline", &scenario, "--out", s(&base)]);
    assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
    let out = t.path("out");
    let same = against(&scenario, &base, &out, &[]);
    assert_eq!(same.status.code(), Some(0), "{}", stdout(&same));
    // The run is deterministic: the summary it wrote is the baseline, byte for byte.
    assert_eq!(
        std::fs::read(&base).unwrap(),
        std::fs::read(out.join("summary.json")).unwrap()
    );
    // Two calls in flight instead of 8: queries take longer, throughput falls.
    let worse = against(
        &scenario,
        &base,
        &out,
        &["--set", "scheduler.max_concurrency=2"],
    );
    assert_eq!(worse.status.code(), Some(1), "{}", stderr(&worse));
    let text = stdout(&worse);
    for metric in ["latency_ms.query.p95", "throughput.queries_per_s"] {
        let row = row(&text, "baseline", metric).unwrap_or_else(|| panic!("no {metric}: {text}"));
        assert!(row.contains("FAIL: ") && row.contains("% worse"), "{row}");
    }
}

#[test]
fn a_real_improvement_passes_at_zero_tolerance() {
    // 10,000 RPM and 400 ms calls: 50 in flight instead of 40 is 25 % more throughput, no
    // 429s, nothing wasted. Every gated metric is as good or better, so it passes at 0 %.
    let t = Temp::new("check", "better");
    let scenario = "scenarios/article/tier3-semaphore-40.toml";
    let base = t.path("tier3.json");
    let wrote = capsize(&["baseline", scenario, "--out", s(&base)]);
    assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
    let out = t.path("out");
    let better = against(
        scenario,
        &base,
        &out,
        &["--tolerance", "0%", "--set", "scheduler.max_concurrency=50"],
    );
    let text = stdout(&better);
    assert_eq!(better.status.code(), Some(0), "{text}");
    let qps =
        row(&text, "baseline", "throughput.queries_per_s").unwrap_or_else(|| panic!("{text}"));
    assert!(qps.ends_with("pass"), "{qps}");
    // The same change the other way is a regression.
    let worse = against(
        scenario,
        &base,
        &out,
        &["--set", "scheduler.max_concurrency=30"],
    );
    assert_eq!(worse.status.code(), Some(1), "{}", stdout(&worse));
}

#[test]
fn a_tolerance_in_the_scenario_overrides_the_flag_for_its_metric() {
    let t = Temp::new("check", "tolerance");
    let scenario = file(&t, "small.toml", SMALL);
    let base = t.path("small.json");
    assert_eq!(
        capsize(&["baseline", &scenario, "--out", s(&base)])
            .status
            .code(),
        Some(0)
    );
    // 6 in flight instead of 8 is a few % slower: the p95 row fails at 0 %, passes at 50 %.
    let loose = file(
        &t,
        "loose.toml",
        &format!("{SMALL}[slo.tolerance]\n\"latency_ms.query.p95\" = \"50%\"\n"),
    );
    let out = t.path("out");
    let args = |file: &str| {
        let extra = ["--tolerance", "0", "--set", "scheduler.max_concurrency=6"];
        against(file, &base, &out, &extra)
    };
    let p95 = |o: &Output| row(&stdout(o), "baseline", "latency_ms.query.p95").unwrap_or_default();
    let strict = args(&scenario);
    assert!(p95(&strict).contains("FAIL"), "{}", stdout(&strict));
    let relaxed = args(&loose);
    assert!(p95(&relaxed).ends_with("pass"), "{}", p95(&relaxed));
    assert!(p95(&relaxed).contains("50 %"), "{}", p95(&relaxed));
}

#[test]
fn junit_and_markdown_describe_every_check() {
    let t = Temp::new("check", "junit");
    let (junit, md) = (t.path("ci/junit.xml"), t.path("ci/summary.md"));
    let o = capsize(&[
        "check",
        AGENT,
        "--out",
        s(&t.path("out")),
        "--set",
        "scheduler.max_concurrency=1",
        "--junit",
        s(&junit),
        "--summary-md",
        s(&md),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    let doc = roxmltree::Document::parse(&xml).expect("well-formed JUnit XML");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("a testsuite");
    assert_eq!(suite.attribute("name"), Some("research-agent"));
    assert_eq!(suite.attribute("tests"), Some("2"));
    assert_eq!(suite.attribute("failures"), Some("1"));
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 2);
    let failed: Vec<_> = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].attribute("name"),
        Some("latency_ms.query.p95 < 2000")
    );
    assert_eq!(failed[0].attribute("classname"), Some("capsize.objective"));
    let md = std::fs::read_to_string(&md).expect("summary written");
    assert!(md.starts_with("## capsize check FAILED"), "{md}");
    assert!(
        md.contains("| ❌ | objective | latency_ms.query.p95 | "),
        "{md}"
    );
}

#[test]
fn bad_input_exits_2_in_one_line_and_writes_nothing() {
    let t = Temp::new("check", "bad");
    let out = t.path("out");
    let base = t.path("small.json");
    let scenario = file(&t, "small.toml", SMALL);
    assert_eq!(
        capsize(&["baseline", &scenario, "--out", s(&base)])
            .status
            .code(),
        Some(0)
    );
    let unknown = file(
        &t,
        "unknown.toml",
        &format!("{SMALL}[slo]\n\"latency_ms.querry.p95\" = \"< 2000\"\n"),
    );
    let malformed = file(
        &t,
        "malformed.toml",
        &format!("{SMALL}[slo]\n\"latency_ms.query.p95\" = \"about 2 s\"\n"),
    );
    let bad_tol = file(
        &t,
        "tolerance.toml",
        &format!("{SMALL}[slo.tolerance]\n\"throughput.qps\" = 5\n"),
    );
    let other = file(
        &t,
        "other.toml",
        &SMALL.replace("small-agent", "other-agent"),
    );
    let missing = t.path("no-such.json");
    let o = s(&out);
    let absent = unknown.replace("unknown", "absent");
    let new_base = t.path("b.json");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["check", &unknown, "--out", o],
            "\"latency_ms.querry.p95\" is not a summary.json metric",
        ),
        (vec!["check", &malformed, "--out", o], "is not a comparison"),
        (
            vec!["check", &bad_tol, "--out", o],
            "[slo.tolerance]: \"throughput.qps\" is not a summary.json metric",
        ),
        (
            vec!["check", &scenario, "--out", o, "--baseline", s(&missing)],
            "cannot read",
        ),
        (
            vec!["check", &other, "--out", o, "--baseline", s(&base)],
            "is a run of scenario \"small-agent\", not \"other-agent\"",
        ),
        (vec!["check", &scenario, "--out", o], "nothing to check"),
        (
            vec![
                "check",
                &scenario,
                "--out",
                o,
                "--baseline",
                s(&base),
                "--tolerance",
                "five",
            ],
            "is not a percentage",
        ),
        (
            vec!["check", &scenario, "--out", o, "--baseline", &scenario],
            "not JSON",
        ),
        (
            vec!["baseline", &absent, "--out", s(&new_base)],
            "absent.toml",
        ),
    ];
    for (args, says) in cases {
        let r = capsize(&args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        let err = stderr(&r);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(r.stdout.is_empty(), "{args:?} printed to stdout");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
        assert!(!t.path("b.json").exists(), "{args:?} wrote a baseline");
    }
}
