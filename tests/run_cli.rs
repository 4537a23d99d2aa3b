//! Pins `capsize run` from the outside: the binary, its exit codes, stdout, stderr and files.
//!
//! Bad input exits 2 with exactly one stderr line `capsize: <file>[:<line>:<col>]: [<key>: ]<msg>`,
//! nothing on stdout, and no output folder. A good run writes summary.json and two `.hgrm` files,
//! is byte-for-byte deterministic per seed, and `--json` prints the summary it wrote. Every test
//! writes into its own temp folder and passes `--out`, so nothing lands in the repo's reports/.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::temp::Temp;

/// A small valid scenario; the line numbers below (5 rpm, 6 tpm, 7 latency, 10 sessions,
/// 11 queries, 17 headroom) are what the error tests expect to be pointed at.
const BASE: &str = r#"name = "cli-test"
seed = 1

[provider]
rpm = 600
tpm = 100000
latency = { dist = "constant", ms = 100 }

[workload]
sessions = 1
queries = 5
calls_per_query = 2
tokens_per_call = 10

[scheduler]
max_concurrency = 4
headroom = 0.7
"#;

/// BASE with the one line `from` replaced by `to`.
fn edit(from: &str, to: &str) -> String {
    assert_eq!(
        BASE.matches(from).count(),
        1,
        "{from:?} must occur once in BASE"
    );
    BASE.replacen(from, to, 1)
}

/// Runs `capsize run <scenario> <extra>... --out <out>`.
fn run(scenario: &Path, extra: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("run")
        .arg(scenario)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .expect("the capsize binary runs")
}

/// Asserts the bad-input contract shared by every case short of the message: exit 2, nothing on
/// stdout, no output folder.
fn assert_refused(out: &Output, out_dir: &Path) -> String {
    let stderr = String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8");
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "stdout not empty: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !out_dir.exists(),
        "--out {} was created on bad input",
        out_dir.display()
    );
    stderr
}

/// Runs `scenario` (with `extra` flags), asserts a one-line bad-input error naming the file and
/// returns what follows `capsize: <file>` (e.g. `:5:1: provider.rpm: must be ...`).
fn refused(t: &Temp, scenario: &Path, extra: &[&str]) -> String {
    let out_dir = t.path("out");
    let stderr = assert_refused(&run(scenario, extra, &out_dir), &out_dir);
    assert!(
        stderr.ends_with('\n') && stderr.matches('\n').count() == 1 && !stderr.contains('\r'),
        "stderr must be exactly one line: {stderr:?}"
    );
    let prefix = format!("capsize: {}", scenario.display());
    let rest = stderr.trim_end().strip_prefix(&prefix);
    rest.unwrap_or_else(|| panic!("stderr must start with {prefix:?}: {stderr:?}"))
        .to_string()
}

/// Writes `text` as the scenario and returns [`refused`]'s rest.
fn refused_text(test: &str, text: &str) -> String {
    let t = Temp::new("run-cli", test);
    let scenario = t.write("scenario.toml", text);
    refused(&t, &scenario, &[])
}

fn assert_starts(rest: &str, expected: &str) {
    assert!(
        rest.starts_with(expected),
        "expected {expected:?} after the file name, got {rest:?}"
    );
}

// ---- bad input --------------------------------------------------------------------------------

#[test]
fn malformed_toml_names_line_and_column() {
    // An unclosed string on line 3: the parser stops at the end of that line (column 20).
    let rest = refused_text(
        "malformed",
        &edit("seed = 1\n", "seed = 1\ndescription = \"oops\n"),
    );
    assert_starts(&rest, ":3:20: ");
    assert!(rest.contains("string"), "{rest}");
}

#[test]
fn unknown_top_level_key_names_key_and_position() {
    let rest = refused_text("unknown-top", &edit("seed = 1\n", "seed = 1\nbogus = 3\n"));
    assert_starts(&rest, ":3:1: ");
    assert!(rest.contains("unknown field `bogus`"), "{rest}");
}

#[test]
fn unknown_provider_key_names_key_and_position() {
    let rest = refused_text(
        "unknown-provider",
        &edit("rpm = 600\n", "rpm = 600\nburst = 3\n"),
    );
    assert_starts(&rest, ":6:1: ");
    assert!(rest.contains("unknown field `burst`"), "{rest}");
}

#[test]
fn wrong_type_is_one_line_at_its_line() {
    let rest = refused_text("wrong-type", &edit("rpm = 600", "rpm = \"lots\""));
    // Line 5; the column may be the key's (1) or the value's (7).
    assert!(
        rest.starts_with(":5:1: ") || rest.starts_with(":5:7: "),
        "{rest}"
    );
    assert!(rest.contains("lots"), "{rest}");
}

#[test]
fn wrong_type_names_the_key() {
    let rest = refused_text("wrong-type-key", &edit("rpm = 600", "rpm = \"lots\""));
    assert!(
        rest.contains("rpm"),
        "the key `provider.rpm` is not named: {rest}"
    );
}

#[test]
fn rpm_zero_is_refused() {
    let rest = refused_text("rpm-zero", &edit("rpm = 600", "rpm = 0"));
    assert_starts(&rest, ":5:1: provider.rpm: ");
}

#[test]
fn negative_tpm_is_refused() {
    let rest = refused_text("tpm-negative", &edit("tpm = 100000", "tpm = -5"));
    assert_starts(&rest, ":6:1: provider.tpm: ");
    assert!(rest.contains("-5"), "{rest}");
}

#[test]
fn headroom_zero_is_refused() {
    let rest = refused_text("headroom-zero", &edit("headroom = 0.7", "headroom = 0"));
    assert_starts(&rest, ":17:1: scheduler.headroom: ");
}

#[test]
fn headroom_above_one_is_refused() {
    let rest = refused_text("headroom-big", &edit("headroom = 0.7", "headroom = 1.5"));
    assert_starts(&rest, ":17:1: scheduler.headroom: ");
    assert!(rest.contains("1.5"), "{rest}");
}

#[test]
fn lognormal_p95_below_mean_is_refused() {
    let latency = r#"latency = { dist = "lognormal", mean_ms = 400, p95_ms = 300 }"#;
    let rest = refused_text(
        "lognormal",
        &edit(r#"latency = { dist = "constant", ms = 100 }"#, latency),
    );
    // Column 48 is where `p95_ms` is written.
    assert_starts(&rest, ":7:48: provider.latency.p95_ms: ");
}

/// A scenario whose latency is drawn from the data file `file`.
fn empirical(file: &str) -> String {
    let latency = format!(r#"latency = {{ dist = "empirical", file = "{file}" }}"#);
    edit(r#"latency = { dist = "constant", ms = 100 }"#, &latency)
}

#[test]
fn empirical_file_that_does_not_exist_is_refused() {
    let rest = refused_text("empirical-missing", &empirical("nope.csv"));
    assert_starts(&rest, ":7:33: provider.latency.file: ");
    assert!(
        rest.contains("nope.csv"),
        "the data file is not named: {rest}"
    );
}

#[test]
fn empirical_file_with_a_non_numeric_row_names_file_and_row() {
    let t = Temp::new("run-cli", "empirical-bad-row");
    t.write("latency.csv", "ms\n100\n200\nabc\n");
    let scenario = t.write("scenario.toml", &empirical("latency.csv"));
    let rest = refused(&t, &scenario, &[]);
    assert_starts(&rest, ":7:33: provider.latency.file: ");
    assert!(
        rest.contains("latency.csv:4"),
        "data file and row not named: {rest}"
    );
    assert!(rest.contains("abc"), "{rest}");
}

#[test]
fn missing_scenario_file_is_refused() {
    let t = Temp::new("run-cli", "no-file");
    let rest = refused(&t, &t.path("nope.toml"), &[]);
    assert_starts(&rest, ": ");
}

#[test]
fn set_without_equals_is_refused() {
    let t = Temp::new("run-cli", "set-no-eq");
    let scenario = t.write("scenario.toml", BASE);
    let rest = refused(&t, &scenario, &["--set", "workload.queries"]);
    assert!(
        rest.contains("--set") && rest.contains("workload.queries"),
        "{rest}"
    );
}

#[test]
fn set_of_an_unknown_key_is_refused() {
    let t = Temp::new("run-cli", "set-unknown");
    let scenario = t.write("scenario.toml", BASE);
    let rest = refused(&t, &scenario, &["--set", "workload.bogus=3"]);
    assert!(rest.contains("--set") && rest.contains("bogus"), "{rest}");
}

#[test]
fn a_bad_value_in_an_inline_table_set_names_the_set_not_a_line() {
    let t = Temp::new("run-cli", "set-table");
    let scenario = t.write("scenario.toml", BASE);
    let set = r#"provider.latency={ dist = "uniform", min_ms = 900, max_ms = 200 }"#;
    let rest = refused(&t, &scenario, &["--set", set]);
    // No line of the file: the value is the flag's.
    assert_eq!(
        rest,
        format!(
            ": provider.latency.max_ms: must be at least min_ms (900), got 200 (from --set {set})"
        )
    );
}

#[test]
fn seed_that_is_not_a_number_is_a_usage_error() {
    let t = Temp::new("run-cli", "seed-nan");
    let scenario = t.write("scenario.toml", BASE);
    let out_dir = t.path("out");
    let stderr = assert_refused(
        &run(&scenario, &["--seed", "notanumber"], &out_dir),
        &out_dir,
    );
    assert!(
        stderr.contains("--seed") && stderr.contains("notanumber"),
        "{stderr}"
    );
}

#[test]
fn a_missing_key_names_the_table_that_lacks_it_at_its_line() {
    let text = edit("tokens_per_call = 10\n", "");
    let rest = refused_text("missing-key", &text);
    assert_eq!(rest, ":9:1: workload: missing field `tokens_per_call`");
    // Still missing after a --set that gives another key: the one still missing.
    let text = edit("calls_per_query = 2\ntokens_per_call = 10\n", "");
    let t = Temp::new("run-cli", "missing-after-set");
    let path = t.write("s.toml", &text);
    let rest = refused(&t, &path, &["--set", "workload.calls_per_query=2"]);
    assert_eq!(rest, ":9:1: workload: missing field `tokens_per_call`");
}

#[test]
fn missing_workload_is_refused() {
    let rest = refused_text("no-workload", BASE.split("[workload]").next().unwrap());
    assert!(rest.contains("missing field `workload`"), "{rest}");
}

#[test]
fn zero_queries_is_refused() {
    let rest = refused_text("queries-zero", &edit("queries = 5", "queries = 0"));
    assert_starts(&rest, ":11:1: workload.queries: ");
}

#[test]
fn queries_and_duration_together_are_refused() {
    let rest = refused_text(
        "queries-and-duration",
        &edit("queries = 5\n", "queries = 5\nduration_s = 10\n"),
    );
    assert!(
        rest.starts_with(":11:1: workload.queries: ")
            || rest.starts_with(":12:1: workload.duration_s: "),
        "{rest}"
    );
}

#[test]
fn open_mode_without_arrival_rate_is_refused() {
    let rest = refused_text("open-no-rate", &edit("sessions = 1", "mode = \"open\""));
    assert!(rest.contains("workload.arrival_rate: "), "{rest}");
}

// ---- good runs --------------------------------------------------------------------------------

fn research_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/research-agent.toml")
}

/// Runs research-agent.toml with 200 queries and `extra` flags into `out`; asserts success.
fn good_run(out: &Path, extra: &[&str]) -> Output {
    let args = [&["--set", "workload.queries=200"], extra].concat();
    let output = run(&research_agent(), &args, out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    assert!(output.stderr.is_empty(), "stderr on success: {stderr}");
    output
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&read(dir.join("summary.json"))).expect("summary.json is JSON")
}

fn num(v: &Value, path: &str) -> f64 {
    let field = path.split('.').fold(v, |v, k| &v[k]);
    field
        .as_f64()
        .unwrap_or_else(|| panic!("summary.json: {path} is not a number: {field}"))
}

#[test]
fn good_run_prints_a_table_and_writes_the_three_files() {
    let t = Temp::new("run-cli", "good-run");
    let out = t.path("out");
    let output = good_run(&out, &[]);
    assert!(String::from_utf8(output.stdout)
        .unwrap()
        .contains("research-agent"));

    let s = summary(&out);
    assert_eq!(s["schema_version"], 1);
    assert_eq!(s["scenario"], "research-agent");
    assert_eq!(s["seed"], 42);
    assert_eq!(s["mode"], "virtual");
    assert_eq!(s["queries"], 200);
    assert_eq!(s["calls"], 1600);
    assert!(num(&s, "virtual_seconds") > 0.0);
    let q: Vec<f64> = ["mean", "p50", "p90", "p95", "p99", "max"]
        .iter()
        .map(|k| num(&s, &format!("latency_ms.query.{k}")))
        .collect();
    assert!(
        q[0] > 0.0 && q[1] <= q[3] && q[3] <= q[4] && q[4] <= q[5],
        "query latency: {q:?}"
    );
    assert!(num(&s, "throughput.queries_per_s") > 0.0);
    assert_eq!(s["provider"]["received"], s["attempts"]);
    for key in [
        "provider.rate_limited",
        "retries",
        "errors",
        "cancelled",
        "not_run",
        "orphaned_requests",
        "rpm_utilization",
    ] {
        num(&s, key);
    }

    for name in ["query_latency.hgrm", "call_latency.hgrm"] {
        let text = read(out.join(name));
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.contains("Value") && first.contains("Percentile"),
            "{name}: {first:?}"
        );
        let last = text.lines().last().unwrap_or_default();
        assert!(last.starts_with("#[Buckets"), "{name} ends with {last:?}");
    }
}

#[test]
fn same_seed_is_byte_identical_and_another_seed_differs() {
    let t = Temp::new("run-cli", "determinism");
    let (a, b, c) = (t.path("a"), t.path("b"), t.path("c"));
    good_run(&a, &[]);
    good_run(&b, &[]);
    for name in ["summary.json", "query_latency.hgrm", "call_latency.hgrm"] {
        assert!(
            read(a.join(name)) == read(b.join(name)),
            "{name} differs between two runs"
        );
    }
    good_run(&c, &["--seed", "7"]);
    assert_ne!(read(a.join("summary.json")), read(c.join("summary.json")));
    let (sa, sc) = (summary(&a), summary(&c));
    assert_eq!(sc["seed"], 7);
    assert_ne!(
        sa["latency_ms"]["query"], sc["latency_ms"]["query"],
        "seed 7 drew the same latencies"
    );
}

#[test]
fn json_flag_prints_the_written_summary() {
    let t = Temp::new("run-cli", "json");
    let out = t.path("out");
    let output = good_run(&out, &["--json"]);
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    assert_eq!(stdout, read(out.join("summary.json")));
    serde_json::from_str::<Value>(&stdout).expect("stdout is JSON");
}

#[test]
fn max_concurrency_one_runs_a_querys_calls_one_after_another() {
    let t = Temp::new("run-cli", "max-concurrency");
    let (default, serial) = (t.path("default"), t.path("serial"));
    good_run(&default, &[]);
    good_run(&serial, &["--set", "scheduler.max_concurrency=1"]);
    let (d, s) = (summary(&default), summary(&serial));
    let (p50_default, p50_serial) = (
        num(&d, "latency_ms.query.p50"),
        num(&s, "latency_ms.query.p50"),
    );
    assert!(
        p50_serial > p50_default * 2.0,
        "p50 {p50_serial} ms vs {p50_default} ms at the default"
    );
    // Eight calls back to back: about 8 x the mean service time of one call.
    let per_call = num(&s, "latency_ms.call_service.mean");
    let ratio = p50_serial / per_call;
    assert!(
        (6.0..10.0).contains(&ratio),
        "query p50 is {ratio:.2} x a call's {per_call} ms"
    );
}

#[test]
fn a_setting_that_cannot_work_is_warned_about_once_and_the_run_goes_on() {
    let t = Temp::new("run-cli", "sanity");
    let out = t.path("out");
    let o = common::capsize(&[
        "run",
        "scenarios/research-agent.toml",
        "--set",
        "scheduler.timeout_ms=100",
        "--set",
        "workload.queries=10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let stderr = common::stderr(&o);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    // U[200, 900] ms: its 5th percentile is about 235 ms (231 from the fixed-seed draws).
    assert_eq!(
        warnings,
        ["capsize: warning: scheduler.timeout_ms = 100 is below provider.latency's 5th percentile (~231 ms): nearly every call will time out"],
        "{stderr}"
    );
    assert!(out.join("summary.json").is_file());
}

#[test]
fn attempts_that_time_out_at_the_client_are_counted_beside_the_providers_answers() {
    let t = Temp::new("run-cli", "client-timeouts");
    // Every answer takes 100 ms and the client waits 50: each of the 10 calls sends its
    // attempt and two retries, all three time out, and the call fails for good.
    let scenario = t.write(
        "scenario.toml",
        &edit(
            "headroom = 0.7",
            "headroom = 0.7\ntimeout_ms = 50\nretry = { max_retries = 2, base_ms = 10, cap_ms = 10, jitter = \"none\" }",
        ),
    );
    let out = t.path("out");
    let o = run(&scenario, &[], &out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("  client         30 attempts (30 timed out at the client), 20 retries; calls: 10 failed for good, 0 cancelled, 0 not run;"),
        "{table}"
    );
    assert!(table.contains("0 never answered"), "{table}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["attempts_timed_out"], 30);
    assert_eq!(summary["errors"], 10);
}

#[test]
fn the_terminal_names_the_limit_that_binds_a_query_and_what_lifts_it() {
    // multi-provider.toml: the model's 40k TPM at headroom 0.9 lets through 36,000 / (2 turns
    // x 2,000 tokens) = 9 queries/min, below what 6 sessions ask, and the run sits at it.
    let t = Temp::new("run-cli", "binds");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/multi-provider.toml");
    let output = run(&scenario, &[], &t.path("out"));
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let s = summary(&t.path("out"));
    let per_min = num(&s, "throughput.queries_per_s") * 60.0;
    let want = format!(
        "  binds          llm TPM: {} queries/min, {} % of the 9 it lets through at headroom 0.9\n                 the workload asks up to ~",
        capsize::api::plan::fmt_num(per_min),
        capsize::api::plan::fmt_num(per_min / 9.0 * 100.0),
    );
    assert!(stdout.contains(&want), "{stdout}");
    assert!(
        per_min > 8.5 && per_min <= 9.0,
        "the run sits at the ceiling: {per_min}"
    );
    assert!(
        stdout.contains("--set providers.llm.tpm="),
        "the advice names the key: {stdout}"
    );
    // One session asks for less than the ceiling: the nearest ceiling, without advice.
    let output = run(&scenario, &["--set", "workload.sessions=1"], &t.path("one"));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("\n  ceiling        llm TPM: "), "{stdout}");
    assert!(
        stdout.contains(" at headroom 0.9, the lowest\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("the workload asks"), "{stdout}");
}
