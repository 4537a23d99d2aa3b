//! `capsize compare` from the outside: two runs or two sweeps side by side, verdicts against
//! each figure's noise, counts per query started, a warning when the load differs, and bad
//! input refused in one line with exit 2 and nothing on stdout.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::temp::Temp;
use common::{capsize, stderr};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A research agent of 8 sessions whose tools' latency `--set` can raise; STOP is how it ends.
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

/// Slower tools (mean 1.5 s -> 2.2 s).
const SLOWER: [&str; 4] = [
    "--set",
    "provider.latency.mean_ms=2200",
    "--set",
    "provider.latency.p95_ms=6000",
];

/// Faster tools (mean 1.5 s -> 1 s).
const FASTER: [&str; 4] = [
    "--set",
    "provider.latency.mean_ms=1000",
    "--set",
    "provider.latency.p95_ms=2700",
];

/// Writes TOOLS ending with `stop` to `t`; returns its path.
fn scenario(t: &Temp, stop: &str) -> String {
    s(&t.write("tools.toml", &TOOLS.replace("STOP", stop))).to_string()
}

/// `capsize run SCENARIO --out t/NAME EXTRA...`; returns the folder.
fn run(t: &Temp, scenario: &str, name: &str, extra: &[&str]) -> PathBuf {
    let out = t.path(name);
    let mut args = vec!["run", scenario, "--out", s(&out)];
    args.extend_from_slice(extra);
    let o = capsize(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    out
}

/// `capsize compare A B EXTRA...`.
fn compare(a: &Path, b: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["compare", s(a), s(b)];
    args.extend_from_slice(extra);
    capsize(&args)
}

/// `capsize compare A B --json`, which must succeed, parsed.
fn json(a: &Path, b: &Path) -> (Value, String) {
    let o = compare(a, b, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = serde_json::from_slice(&o.stdout).expect("JSON");
    (v, stderr(&o))
}

/// The row of the comparison whose path is `path`.
fn row<'a>(c: &'a Value, path: &str) -> &'a Value {
    c["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["path"] == path)
        .unwrap_or_else(|| panic!("no row {path} in {c}"))
}

/// The number at dotted `path` of `dir`/summary.json.
fn metric(dir: &Path, path: &str) -> f64 {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    json.pointer(&format!("/{}", path.replace('.', "/")))
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no {path}"))
}

/// The printed table's line for `metric` (its first cell).
fn line<'a>(text: &'a str, metric: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{metric}  ")))
        .unwrap_or_else(|| panic!("no line {metric} in:\n{text}"))
}

#[test]
fn two_runs_of_one_scenario_and_seed_change_nothing_and_print_the_same_bytes() {
    let t = Temp::new("compare", "same");
    let sc = scenario(&t, "queries = 200");
    let (a, b) = (run(&t, &sc, "a", &[]), run(&t, &sc, "b", &[]));
    let first = compare(&a, &b, &["--fail-on-worse"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stderr(&first), "", "no load warning");
    let again = compare(&a, &b, &["--fail-on-worse"]);
    assert_eq!(
        first.stdout, again.stdout,
        "the same inputs, the same bytes"
    );
    let text = stdout(&first);
    assert!(
        text.contains(
            "12 figures judged: 0 worse, 0 better, 0 within noise, 12 no change, 0 no interval"
        ),
        "{text}"
    );
    let (c, _) = json(&a, &b);
    assert_eq!(c["kind"], "runs");
    for r in c["rows"].as_array().unwrap() {
        assert!(r["verdict"] == "no_change" || r["verdict"] == "info", "{r}");
        assert_eq!(r["change"], 0.0, "{r}");
    }
    let p95 = row(&c, "latency_ms.query.p95");
    assert_eq!(p95["a"].as_f64(), Some(metric(&a, "latency_ms.query.p95")));
    assert_eq!(p95["method"], "order_statistics");
    assert!(p95["noise"].as_f64().unwrap() > 0.0, "{p95}");
    // Another seed is the same load: no warning.
    let seeded = run(&t, &sc, "seeded", &["--seed", "4"]);
    let (c, warned) = json(&a, &seeded);
    assert_eq!(warned, "");
    assert!(c["load"].as_array().unwrap().is_empty());
}

#[test]
fn slower_tools_are_worse_beyond_noise_and_fail_on_worse_exits_1() {
    let t = Temp::new("compare", "slower");
    let sc = scenario(&t, "queries = 200");
    let a = run(&t, &sc, "a", &[]);
    let b = run(&t, &sc, "b", &SLOWER);
    let (c, warned) = json(&a, &b);
    assert_eq!(warned, "", "slower tools are the same load");
    let p95 = row(&c, "latency_ms.query.p95");
    assert_eq!(p95["verdict"], "worse", "{p95}");
    let (va, vb) = (
        metric(&a, "latency_ms.query.p95"),
        metric(&b, "latency_ms.query.p95"),
    );
    assert_eq!(p95["a"].as_f64(), Some(va));
    assert_eq!(p95["b"].as_f64(), Some(vb));
    // B − A (to a unit in the last place: JSON's decimal round trip).
    assert!(
        (p95["change"].as_f64().unwrap() - (vb - va)).abs() < 1e-9,
        "{p95}"
    );
    assert!(vb - va > p95["noise"].as_f64().unwrap(), "{p95}");
    assert_eq!(row(&c, "throughput.queries_per_s")["verdict"], "worse");
    // The same 4 requests a query: no change; calls/s is shown, not judged.
    assert_eq!(row(&c, "provider.received / queries_started")["a"], 4.0);
    assert_eq!(
        row(&c, "provider.received / queries_started")["verdict"],
        "no_change"
    );
    assert_eq!(row(&c, "throughput.calls_per_s")["verdict"], "info");
    let o = compare(&a, &b, &["--fail-on-worse"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(line(&stdout(&o), "query p95 (ms)").ends_with("worse"));
    assert!(stdout(&o).contains("order stats: a percentile's 95 % interval"));
    // The other way round it is better, and nothing is worse.
    let o = compare(&b, &a, &["--fail-on-worse"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(line(&stdout(&o), "query p95 (ms)").ends_with("better"));
    // Without the .hgrm files beside summary.json, a percentile has no interval.
    let bare = t.path("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::copy(b.join("summary.json"), bare.join("summary.json")).unwrap();
    let (c, _) = json(&a, &bare);
    let p95 = row(&c, "latency_ms.query.p95");
    assert_eq!(p95["verdict"], "no_interval", "{p95}");
    assert_eq!(p95["noise"], Value::Null);
    assert_eq!(row(&c, "throughput.queries_per_s")["verdict"], "worse");
}

#[test]
fn a_duration_bound_pair_compares_counts_per_query_started() {
    // In 600 s faster tools start more queries and so send more requests: as counts they
    // differ, per query started they do not; and queries started that differ within one
    // duration are not a different load.
    let t = Temp::new("compare", "duration");
    let sc = scenario(&t, "duration_s = 600");
    let a = run(&t, &sc, "a", &[]);
    let b = run(&t, &sc, "b", &FASTER);
    let (ra, rb) = (
        metric(&a, "provider.received"),
        metric(&b, "provider.received"),
    );
    let (sa, sb) = (metric(&a, "queries_started"), metric(&b, "queries_started"));
    assert!(rb > ra && sb > sa, "{ra} {rb} {sa} {sb}");
    let (c, warned) = json(&a, &b);
    assert_eq!(warned, "", "one duration: no warning");
    let requests = row(&c, "provider.received / queries_started");
    assert_eq!(requests["a"].as_f64(), Some(ra / sa));
    assert_eq!(requests["b"].as_f64(), Some(rb / sb));
    assert_eq!(requests["verdict"], "no_change", "{requests}");
    let tokens = row(&c, "provider.tokens_charged / queries_started");
    assert_eq!(tokens["verdict"], "no_change", "{tokens}");
    assert_eq!(row(&c, "throughput.queries_per_s")["verdict"], "better");
    assert_eq!(row(&c, "queries_started")["a"].as_f64(), Some(sa));
}

#[test]
fn runs_of_a_different_load_are_compared_with_a_warning() {
    let t = Temp::new("compare", "load");
    let sc = scenario(&t, "queries = 200");
    let a = run(&t, &sc, "a", &[]);
    let b = run(&t, &sc, "b", &["--set", "workload.queries=100"]);
    let o = compare(&a, &b, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let warned = stderr(&o);
    assert!(
        warned.starts_with(
            "capsize: warning: A and B were not run on the same load: queries started: A 200, B 100,"
        ),
        "{warned}"
    );
    assert_eq!(warned.lines().count(), 1, "{warned}");
    // Another scenario's name is another load too.
    let other = t.write(
        "other.toml",
        &TOOLS
            .replace("STOP", "queries = 200")
            .replace("\"tools\"", "\"other\""),
    );
    let c = run(&t, s(&other), "c", &[]);
    let (json, warned) = json(&a, &c);
    assert!(
        warned.contains("scenario: A \"tools\", B \"other\""),
        "{warned}"
    );
    assert_eq!(json["load"][0], "scenario: A \"tools\", B \"other\"");
}

/// `capsize sweep SCENARIO --out t/NAME --sweep scheduler.max_concurrency=POINTS EXTRA...`.
fn sweep(t: &Temp, scenario: &str, name: &str, points: &str, extra: &[&str]) -> PathBuf {
    let out = t.path(name);
    let key = format!("scheduler.max_concurrency={points}");
    let mut args = vec!["sweep", scenario, "--out", s(&out), "--sweep", &key];
    args.extend_from_slice(extra);
    let o = capsize(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    out
}

/// The (mean, ci95) of `column` at the row of sweep.csv in `dir` whose first cell is `point`.
fn csv_stat(dir: &Path, point: &str, column: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cells: Vec<&str> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|c| c[0] == point)
        .expect("the point");
    let at = |name: &str| head.iter().position(|h| *h == name).expect(name);
    let num = |i: usize| cells[i].parse::<f64>().unwrap();
    (num(at(column)), num(at(&format!("{column}_ci95"))))
}

#[test]
fn two_sweeps_match_points_by_value_and_flag_the_point_that_moved() {
    let t = Temp::new("compare", "sweeps");
    let sc = scenario(&t, "queries = 100");
    let repeats = ["--repeats", "3"];
    let a = sweep(&t, &sc, "a", "2,8", &repeats);
    let b = sweep(&t, &sc, "b", "2,4", &[&repeats[..], &SLOWER[..]].concat());
    let (c, warned) = json(&a, &b);
    assert_eq!(warned, "");
    assert_eq!(c["kind"], "sweeps");
    assert_eq!(c["a"]["repeats"], 3);
    assert_eq!(c["a"]["scenario"], "tools");
    let setting = |v: &str| serde_json::json!([{"key": "scheduler.max_concurrency", "value": v}]);
    assert_eq!(c["only_a"], serde_json::json!([setting("8")]));
    assert_eq!(c["only_b"], serde_json::json!([setting("4")]));
    let p95 = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "query_p95_ms")
        .expect("a p95 row");
    assert_eq!(p95["point"], setting("2"));
    let (ma, ca) = csv_stat(&a, "2", "query_p95_ms");
    let (mb, cb) = csv_stat(&b, "2", "query_p95_ms");
    assert_eq!(p95["a"].as_f64(), Some(ma));
    assert_eq!(p95["a_ci95"].as_f64(), Some(ca));
    assert_eq!(p95["b"].as_f64(), Some(mb));
    assert_eq!(p95["noise"].as_f64(), Some(ca.hypot(cb)));
    assert_eq!(p95["verdict"], "worse", "{p95}");
    assert_eq!(p95["method"], "repeats");
    let o = compare(&a, &b, &["--fail-on-worse"]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(
        text.contains("points: 1 matched, 1 only in A, 1 only in B"),
        "{text}"
    );
    assert!(text.contains("only in A: max_concurrency=8"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("max_concurrency=2")
            && l.contains("query_p95_ms")
            && l.ends_with("worse")),
        "{text}"
    );
    // A sweep against itself: nothing moved.
    let o = compare(&a, &a.join("sweep.csv"), &["--fail-on-worse"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("no metric of a matched point moved beyond its noise."));
    // One run per point: the changes without a verdict.
    let one = sweep(&t, &sc, "one", "2,8", &SLOWER);
    let (c, _) = json(&a, &one);
    let judged: Vec<&Value> = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] != "info")
        .collect();
    assert!(!judged.is_empty());
    assert!(
        judged
            .iter()
            .all(|r| r["verdict"] == "no_interval" || r["verdict"] == "no_change"),
        "{judged:?}"
    );
    let o = compare(&a, &one, &["--fail-on-worse"]);
    assert_eq!(o.status.code(), Some(0), "no verdict, nothing worse");
    assert!(stdout(&o).contains("one run per point in B: no interval"));
}

#[test]
fn bad_input_is_refused_in_one_line_naming_the_path() {
    let t = Temp::new("compare", "bad");
    let sc = scenario(&t, "queries = 20");
    let a = run(&t, &sc, "a", &[]);
    let swept = sweep(&t, &sc, "swept", "2,4", &[]);
    let refused = |b: &Path, needle: &str| {
        let o = compare(&a, b, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(o.stdout.is_empty(), "nothing printed: {}", stdout(&o));
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.starts_with("capsize: ") && e.contains(needle),
            "{needle}: {e}"
        );
    };
    // A run against a sweep, either way round.
    refused(
        &swept,
        &format!(
            "A ({}) is a run and B ({}) a sweep: compare two runs or two sweeps",
            a.join("summary.json").display(),
            swept.join("sweep.csv").display()
        ),
    );
    let o = compare(&swept, &a, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a sweep and B"), "{}", stderr(&o));
    // Malformed, missing, or not a run at all.
    let broken = t.write("broken.json", "{\"schema_version\": 1,");
    refused(&broken, &format!("{}: not JSON", broken.display()));
    let partial = t.write(
        "partial.json",
        r#"{"schema_version": 1, "scenario": "x", "mode": "virtual", "seed": 1}"#,
    );
    refused(
        &partial,
        &format!("{}: queries: missing", partial.display()),
    );
    let missing = t.path("nowhere.json");
    refused(&missing, &format!("{}: cannot read", missing.display()));
    let empty = t.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    refused(
        &empty,
        "holds neither summary.json (a run) nor sweep.csv (a sweep)",
    );
    // A histogram that is not this run's.
    let mixed = t.path("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    std::fs::copy(a.join("summary.json"), mixed.join("summary.json")).unwrap();
    std::fs::write(mixed.join("query_latency.hgrm"), "garbage\n").unwrap();
    refused(
        &mixed,
        &format!("{}: line 1:", mixed.join("query_latency.hgrm").display()),
    );
    // A malformed sweep.csv.
    let csv = t.write(
        "bad.csv",
        "scheduler.max_concurrency,seed,queries_per_s,slo_pass\n2,7,fast,true\n",
    );
    let o = compare(&csv, &swept, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!(
            "{}: line 2: queries_per_s: \"fast\" is not a number",
            csv.display()
        )),
        "{}",
        stderr(&o)
    );
}

#[test]
fn each_provider_of_several_gets_its_own_rows() {
    let t = Temp::new("compare", "providers");
    let sc = "scenarios/multi-provider.toml";
    let a = run(&t, sc, "a", &[]);
    let b = run(&t, sc, "b", &["--seed", "9"]);
    let (c, warned) = json(&a, &b);
    assert_eq!(warned, "", "another seed is the same load");
    let requests = row(&c, "providers.search.received / queries_started");
    let per_query = metric(&a, "providers.search.received") / metric(&a, "queries_started");
    assert_eq!(requests["a"].as_f64(), Some(per_query));
    assert_eq!(requests["method"], "poisson");
    let limited = row(&c, "providers.llm.rate_limited / providers.llm.received");
    assert_eq!(limited["method"], "binomial");
}

#[test]
fn figures_out_of_range_are_judged_or_refused_never_within_an_infinite_noise() {
    // U4: A with queries_per_s = 1e308 was "-100.0 % ... noise ± inf ... within noise"; a
    // queries_started above u64 was 1.845e19 in the header and 1.845e20 in the table; p95
    // above max was accepted; -5 was refused as "must be a number".
    let t = Temp::new("compare", "range");
    let sc = scenario(&t, "queries = 20");
    let a = run(&t, &sc, "a", &[]);
    let text = std::fs::read_to_string(a.join("summary.json")).unwrap();
    let tampered = |name: &str, from: &str, to: &str| {
        assert_eq!(text.matches(from).count(), 1, "{from}");
        let dir = t.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("summary.json"), text.replace(from, to)).unwrap();
        for h in ["query_latency.hgrm", "call_latency.hgrm"] {
            std::fs::copy(a.join(h), dir.join(h)).unwrap();
        }
        dir
    };
    let rate = format!(
        "\"queries_per_s\": {}",
        metric(&a, "throughput.queries_per_s")
    );
    // A rate near f64::MAX: a finite noise, and a change far beyond it, either way round.
    let huge = tampered("huge", &rate, "\"queries_per_s\": 1e308");
    for (x, y, verdict) in [(&huge, &a, "worse"), (&a, &huge, "better")] {
        let (c, _) = json(x, y);
        let r = row(&c, "throughput.queries_per_s");
        assert_eq!(r["verdict"], verdict, "{r}");
        assert!(r["noise"].as_f64().is_some_and(f64::is_finite), "{r}");
    }
    // The largest count is read once, the same in the header and the table.
    let started = "\"queries_started\": 20,";
    let most = tampered(
        "most",
        started,
        "\"queries_started\": 18446744073709551615,",
    );
    let said = stdout(&compare(&most, &a, &[]));
    assert!(
        said.contains("virtual, 1.845e19 queries started)"),
        "{said}"
    );
    assert!(
        line(&said, "queries started").contains("1.845e19"),
        "{said}"
    );
    let refused = |dir: &Path, message: &str| {
        let o = compare(dir, &a, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(o.stdout.is_empty());
        let file = dir.join("summary.json");
        assert_eq!(
            stderr(&o),
            format!("capsize: {}: {message}\n", file.display())
        );
    };
    let count = "must be a count of 0 or more (a whole number up to 18446744073709551615)";
    refused(
        &tampered(
            "over",
            started,
            "\"queries_started\": 184467440737095516150,",
        ),
        &format!("queries_started: {count}, got 1.844674407370955e+20"),
    );
    refused(
        &tampered("negative", started, "\"queries_started\": -5,"),
        &format!("queries_started: {count}, got -5"),
    );
    refused(
        &tampered("fraction", started, "\"queries_started\": 20.5,"),
        &format!("queries_started: {count}, got 20.5"),
    );
    refused(
        &tampered("slower", &rate, "\"queries_per_s\": -5"),
        "throughput.queries_per_s: must be a number of 0 or more, got -5",
    );
    let p95 = format!("\"p95\": {}", metric(&a, "latency_ms.query.p95"));
    let max = metric(&a, "latency_ms.query.max");
    assert_eq!(text.matches(&p95).count(), 1, "{p95}");
    refused(
        &tampered("p95", &p95, "\"p95\": 1e9"),
        &format!(
            "latency_ms.query.p95 (1,000,000,000) is above latency_ms.query.max ({}): not one histogram's figures",
            capsize::api::plan::fmt_num(max)
        ),
    );
}
