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

/// Copies the baseline at `from` to `to` with the metrics at dotted paths set to new values.
fn edited(from: &Path, to: &Path, set: &[(&str, f64)]) {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from).expect("baseline")).expect("JSON");
    for (path, v) in set {
        let pointer = format!("/{}", path.replace('.', "/"));
        *json
            .pointer_mut(&pointer)
            .unwrap_or_else(|| panic!("no {path}")) = (*v).into();
    }
    std::fs::write(to, serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

/// The number at dotted `path` of the JSON file at `file`.
fn metric(file: &Path, path: &str) -> f64 {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).expect("summary")).expect("JSON");
    json.pointer(&format!("/{}", path.replace('.', "/")))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("no {path}"))
}

/// Writes SMALL to `small.toml` in `t` and its baseline to `small.json`; returns both.
fn small_with_baseline(t: &Temp) -> (String, std::path::PathBuf) {
    let scenario = file(t, "small.toml", SMALL);
    let base = t.path("small.json");
    let wrote = capsize(&["baseline", &scenario, "--out", s(&base)]);
    assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
    (scenario, base)
}

/// SMALL and its baseline (as [`small_with_baseline`]), and a copy of the baseline at
/// `edited.json` with the metric at `path` changed by `change`.
fn small_edited(
    t: &Temp,
    path: &str,
    change: impl Fn(f64) -> f64,
) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let (scenario, base) = small_with_baseline(t);
    let to = t.path("edited.json");
    edited(&base, &to, &[(path, change(metric(&base, path)))]);
    (scenario, base, to)
}

/// Whether `text` has a baseline row for `metric`.
fn shown(text: &str, metric: &str) -> bool {
    row(text, "baseline", metric).is_some()
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
    let (scenario, base) = small_with_baseline(&t);
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
    // The same tolerance as a fraction below 1.
    let fraction = file(
        &t,
        "fraction.toml",
        &format!("{SMALL}[slo.tolerance]\n\"latency_ms.query.p95\" = 0.5\n"),
    );
    let relaxed = args(&fraction);
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
        Some("objective latency_ms.query.p95")
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
    let (scenario, base) = small_with_baseline(&t);
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
        &format!("{SMALL}[slo.tolerance]\n\"throughput.qps\" = \"5%\"\n"),
    );
    let ambiguous = file(
        &t,
        "ambiguous.toml",
        &format!("{SMALL}[slo.tolerance]\n\"latency_ms.query.p95\" = 5\n"),
    );
    let bad_list = file(
        &t,
        "list.toml",
        &format!("{SMALL}[check]\nmetrics = [\"latency_ms.query\", \"latency_ms.nope\"]\n"),
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
    let flag = |name: &'static str, value: &'static str| {
        let base = s(&base);
        vec![
            "check",
            &scenario,
            "--out",
            o,
            "--baseline",
            base,
            name,
            value,
        ]
    };
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
            flag("--tolerance", "five"),
            "\"five\" is not a percentage such as 5% or a fraction below 1 such as 0.05",
        ),
        (
            flag("--tolerance", "5"),
            "'--tolerance <TOL>': \"5\" is ambiguous: write 5% (percent) or 0.05 (a fraction)",
        ),
        (
            vec!["check", &ambiguous, "--out", o, "--baseline", s(&base)],
            ":15:1: slo.tolerance.\"latency_ms.query.p95\": 5 is ambiguous: write \"5%\" (percent) or 0.05 (a fraction)",
        ),
        (
            flag("--metrics", "latency_ms.querry"),
            "--metrics: \"latency_ms.querry\" is not a summary.json metric or a prefix",
        ),
        (
            flag("--metrics", "seed"),
            "--metrics: \"seed\" is not compared with a baseline",
        ),
        (
            vec!["check", &bad_list, "--out", o, "--baseline", s(&base)],
            "[check] metrics: \"latency_ms.nope\" is not a summary.json metric or a prefix",
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

#[test]
fn a_tolerance_is_a_percentage_or_a_fraction_below_1() {
    let t = Temp::new("check", "units");
    // A baseline 3 % faster at the p95 than the run: the run is 3 % worse there, and the same
    // everywhere else.
    let (scenario, _, faster) = small_edited(&t, "latency_ms.query.p95", |v| v / 1.03);
    let out = t.path("out");
    for (tolerance, code, shown) in [
        ("0.05", 0, "5 %"),
        ("5%", 0, "5 %"),
        ("0.02", 1, "2 %"),
        ("2%", 1, "2 %"),
    ] {
        let o = against(&scenario, &faster, &out, &["--tolerance", tolerance]);
        let text = stdout(&o);
        assert_eq!(o.status.code(), Some(code), "{tolerance}: {text}");
        assert!(
            text.contains(&format!("at {shown} tolerance")),
            "{tolerance}: {text}"
        );
        let row = row(&text, "baseline", "latency_ms.query.p95").unwrap_or_default();
        assert!(row.contains(&format!(", {shown})")), "{tolerance}: {row}");
    }
}

#[test]
fn a_zero_baseline_of_a_time_allows_a_few_ms() {
    // Calls of a constant 3 ms (then 8 ms), against a baseline of the same run whose call
    // service p95 is 0: 3 ms is within the 5 ms slack of a time, 8 ms is not.
    let t = Temp::new("check", "zero");
    let scenario = file(
        &t,
        "fast.toml",
        &SMALL.replace(
            r#"{ dist = "uniform", min_ms = 200, max_ms = 900 }"#,
            r#"{ dist = "constant", ms = 3 }"#,
        ),
    );
    let out = t.path("out");
    for (ms, code) in [("3", 0), ("8", 1)] {
        let set = format!("provider.latency.ms={ms}");
        let base = t.path(&format!("{ms}.json"));
        let wrote = capsize(&["baseline", &scenario, "--out", s(&base), "--set", &set]);
        assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
        let metric_ms = metric(&base, "latency_ms.call_service.p95");
        assert!(metric_ms > 0.0 && metric_ms < 10.0, "{metric_ms}");
        let zero = t.path(&format!("{ms}-zero.json"));
        edited(&base, &zero, &[("latency_ms.call_service.p95", 0.0)]);
        let o = against(
            &scenario,
            &zero,
            &out,
            &["--tolerance", "0%", "--set", &set],
        );
        let text = stdout(&o);
        assert_eq!(o.status.code(), Some(code), "{ms} ms: {text}");
        let row = row(&text, "baseline", "latency_ms.call_service.p95")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("(baseline 0, 5 ms slack)"), "{row}");
        if code == 1 {
            assert!(row.ends_with("where the baseline had 0"), "{row}");
            assert!(
                text.contains("1 failed: baseline latency_ms.call_service.p95"),
                "{text}"
            );
        }
    }
}

#[test]
fn maxima_are_compared_only_when_named() {
    let t = Temp::new("check", "max");
    // A baseline whose slowest query took 1 ms: every run is far worse at the maximum.
    let (scenario, _, lucky) = small_edited(&t, "latency_ms.query.max", |_| 1.0);
    let out = t.path("out");
    let o = against(&scenario, &lucky, &out, &[]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(!shown(&text, "latency_ms.query.max"), "{text}");
    assert!(shown(&text, "latency_ms.query.p95"), "{text}");
    // Named in full, it is compared (a prefix does not name it).
    let asked = against(
        &scenario,
        &lucky,
        &out,
        &["--metrics", "latency_ms.query.max"],
    );
    let text = stdout(&asked);
    assert_eq!(asked.status.code(), Some(1), "{text}");
    assert!(
        text.contains("1 check, 1 failed: baseline latency_ms.query.max"),
        "{text}"
    );
    let prefix = against(&scenario, &lucky, &out, &["--metrics", "latency_ms.query"]);
    assert_eq!(prefix.status.code(), Some(0), "{}", stdout(&prefix));
}

#[test]
fn a_list_of_metrics_restricts_what_is_compared() {
    let t = Temp::new("check", "metrics");
    // A baseline with twice the throughput: the run fails there, and nowhere else.
    let (scenario, _, quick) = small_edited(&t, "throughput.queries_per_s", |v| v * 2.0);
    let out = t.path("out");
    let all = against(&scenario, &quick, &out, &[]);
    assert_eq!(all.status.code(), Some(1), "{}", stdout(&all));
    let only = ["--metrics", "latency_ms.query,provider.rate_limited"];
    let some = against(&scenario, &quick, &out, &only);
    let text = stdout(&some);
    assert_eq!(some.status.code(), Some(0), "{text}");
    let metrics: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("baseline "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        metrics,
        [
            "latency_ms.query.count",
            "latency_ms.query.mean",
            "latency_ms.query.p50",
            "latency_ms.query.p90",
            "latency_ms.query.p95",
            "latency_ms.query.p99",
            "provider.rate_limited"
        ],
        "{text}"
    );
    // [check] metrics in the scenario does the same; --metrics overrides it.
    let listed = file(
        &t,
        "listed.toml",
        &format!("{SMALL}[check]\nmetrics = [\"latency_ms.query.p95\"]\n"),
    );
    let o = against(&listed, &quick, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("1 check, all passed"), "{}", stdout(&o));
    let o = against(&listed, &quick, &out, &["--metrics", "throughput"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

#[test]
fn only_failures_prints_the_failed_rows_and_counts_every_check() {
    let t = Temp::new("check", "only");
    let (scenario, _, quick) = small_edited(&t, "throughput.queries_per_s", |v| v * 2.0);
    let out = t.path("out");
    let md = t.path("summary.md");
    let full = stdout(&against(&scenario, &quick, &out, &[]));
    let o = against(
        &scenario,
        &quick,
        &out,
        &["--only-failures", "--summary-md", s(&md)],
    );
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(shown(&text, "throughput.queries_per_s"), "{text}");
    assert!(!shown(&text, "latency_ms.query.p95"), "{text}");
    assert!(shown(&full, "latency_ms.query.p95"), "{full}");
    // The closing line is the same, counting every check.
    let closing = |t: &str| t.lines().last().unwrap_or_default().to_string();
    assert_eq!(closing(&text), closing(&full));
    assert!(
        closing(&text).ends_with("checks, 1 failed: baseline throughput.queries_per_s"),
        "{text}"
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("| ❌ | baseline | throughput.queries_per_s |"),
        "{md}"
    );
    assert!(!md.contains("✅"), "{md}");
}

#[test]
fn junit_testcase_names_do_not_change_with_the_baseline() {
    let t = Temp::new("check", "names");
    let (scenario, base, other) = small_edited(&t, "latency_ms.query.p95", |v| v / 2.0);
    let out = t.path("out");
    let names = |baseline: &Path, junit: &str| {
        let path = t.path(junit);
        let extra = ["--junit", s(&path)];
        let o = against(&scenario, baseline, &out, &extra);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
        let xml = std::fs::read_to_string(&path).unwrap();
        let doc = roxmltree::Document::parse(&xml).expect("well-formed JUnit XML");
        let cases: Vec<(String, String)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .map(|n| {
                let attr = |a: &str| n.attribute(a).unwrap_or_default().to_string();
                (attr("classname"), attr("name"))
            })
            .collect();
        (cases, xml)
    };
    let (same, _) = names(&base, "same.xml");
    let (halved, xml) = names(&other, "halved.xml");
    assert!(same.len() > 10, "{same:?}");
    assert_eq!(same, halved);
    assert!(same.contains(&(
        "capsize.baseline".to_string(),
        "baseline latency_ms.query.p95".to_string()
    )));
    // What the metric was held to is in the failure and in system-out, not in the name.
    assert!(
        xml.contains("FAIL: ") && xml.contains("<system-out>latency_ms.query.p95 is "),
        "{xml}"
    );
}

/// A workload the provider's limits do not bind: its tools' latency decides.
const TOOLS: &str = r#"
name = "tools"
seed = 3
[provider]
rpm = 3000
tpm = 1000000
latency = { dist = "lognormal", mean_ms = 1500, p95_ms = 4000 }
[workload]
sessions = 8
STOP
calls_per_query = 4
tokens_per_call = 500
think_time = { dist = "exponential", mean_ms = 5000 }
[scheduler]
max_concurrency = 8
rate_limit = true
"#;

#[test]
fn faster_tools_pass_the_gate_and_slower_tools_fail_it_whatever_ends_the_run() {
    // In 600 s, faster tools (mean 1.5 s -> 1 s) finish more queries and so send more requests
    // and tokens: counts that rise with work, compared per query started, not as they are.
    for (stop, per_query) in [("duration_s = 600", true), ("queries = 400", false)] {
        let t = Temp::new("check_cli", "tools");
        let scenario = file(&t, "tools.toml", &TOOLS.replace("STOP", stop));
        let base = t.path("tools.json");
        let wrote = capsize(&["baseline", &scenario, "--out", s(&base)]);
        assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
        let tools = |mean: &str, p95: &str| {
            against(
                &scenario,
                &base,
                &t.path("out"),
                &[
                    "--set",
                    &format!("provider.latency.mean_ms={mean}"),
                    "--set",
                    &format!("provider.latency.p95_ms={p95}"),
                ],
            )
        };
        let faster = tools("1000", "2700");
        assert_eq!(faster.status.code(), Some(0), "{stop}: {}", stdout(&faster));
        let received = row(&stdout(&faster), "baseline", "provider.received").expect("a row");
        assert_eq!(received.contains("per query"), per_query, "{received}");
        let slower = tools("2200", "6000");
        assert_eq!(slower.status.code(), Some(1), "{stop}: {}", stdout(&slower));
        assert!(
            row(&stdout(&slower), "baseline", "latency_ms.query.p95")
                .is_some_and(|r| r.contains("FAIL")),
            "{stop}: {}",
            stdout(&slower)
        );
    }
}
