//! Pins the command line: `demo` prints what the scheduler measured, and bad flags exit 2.
//! (`run`, `sweep`, `check` and the others have their own files.)

use std::process::Command;

mod common;
use common::capsize;

fn measured(stdout: &str, example: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(example))
        .unwrap_or_else(|| panic!("no row {example:?} in:\n{stdout}"));
    // The measured column is the last one; it follows the expected column's padding.
    line.rsplit("  ")
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn demo_prints_the_measured_article_examples() {
    let out = capsize(&["demo"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        measured(&stdout, "10 quotes x 350 ms, max_concurrency 1"),
        "3500 ms"
    );
    assert_eq!(measured(&stdout, "10 quotes x 350 ms, gathered"), "350 ms");
    assert_eq!(
        measured(
            &stdout,
            "200 x 2000 tokens at once, 10M TPM bucket of 200k: last send"
        ),
        "1200 ms"
    );
    assert_eq!(
        measured(&stdout, "30 tool calls, cap 8, truncate"),
        "8 run, 22 not run, 350 ms"
    );
    assert_eq!(
        measured(&stdout, "30 tool calls, cap 8, batch"),
        "30 run, 0 not run, 1400 ms"
    );
    assert_eq!(
        measured(&stdout, "50k budget"),
        "34000 used, 16000 left, 5k synthesis fits"
    );
}

#[test]
fn demo_output_is_identical_across_runs() {
    assert_eq!(capsize(&["demo"]).stdout, capsize(&["demo"]).stdout);
}

#[test]
fn bad_flags_exit_2_and_help_exits_0() {
    let out = capsize(&["demo", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("--no-such-flag"));
    let out = capsize(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("max_concurrency"));
}

#[test]
fn a_reader_that_goes_away_is_not_a_crash() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the capsize binary runs");
    drop(child.stdout.take()); // like `capsize demo | head -0`
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `capsize run FILE --set SET` refused: exit 2, nothing written, one line, returned.
fn set_refused(file: &str, set: &str) -> String {
    let out = std::env::temp_dir().join(format!("capsize-cli-set-{}", std::process::id()));
    let o = capsize(&[
        "run",
        file,
        "--set",
        set,
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "--set {set}: {err}");
    assert!(!out.exists(), "--set {set}: nothing is written");
    assert_eq!(err.lines().count(), 1, "{err}");
    err.trim_end().to_string()
}

#[test]
fn a_set_of_provider_on_a_scenario_of_named_providers_names_where_it_goes() {
    // X2: a scenario written with [providers.NAME] (as calibrate writes them) and a --set of
    // provider.KEY made a [provider] without its latency: a panic (exit 101).
    let file = common::root("tests/data/repro/round3/set-provider-panic.toml");
    let at = format!("capsize: {file}: ");
    assert_eq!(
        set_refused(&file, "provider.rpm=60"),
        format!("{at}provider.rpm: --set provider.rpm=60: this scenario has no [provider]: its providers are [providers.p]; set providers.p.rpm (or another provider's)")
    );
    assert_eq!(
        set_refused(&file, "provider={ rpm = 60 }"),
        format!("{at}provider: --set provider={{ rpm = 60 }}: this scenario has no [provider]: its providers are [providers.p]; set providers.p (or another provider's)")
    );
    // A provider the scenario does not have, made by the --set without its latency.
    assert_eq!(
        set_refused(&file, "providers.q.rpm=60"),
        format!("{at}providers.q.rpm: --set providers.q.rpm=60: the scenario has no [providers.q], and the one this --set makes lacks a key (missing field `latency`)")
    );
    // A scalar has no keys, and a list cannot be reached into.
    assert_eq!(
        set_refused(&file, "workload.queries.max=3"),
        format!("{at}workload.queries.max: --set workload.queries.max=3: workload.queries is not a table, so it has no key max")
    );
    let phases = common::root("scenarios/incident.toml");
    assert_eq!(
        set_refused(&phases, "provider.phases.0.rpm=10"),
        format!("capsize: {phases}: provider.phases.0.rpm: --set provider.phases.0.rpm=10: provider.phases is a list, and a --set cannot reach into one (no provider.phases.0): give the whole list, provider.phases=[...]")
    );
    // The other way round: a single [provider], and a --set of providers.NAME.KEY.
    let single = common::root("scenarios/research-agent.toml");
    assert_eq!(
        set_refused(&single, "providers.p.rpm=60"),
        format!("capsize: {single}: providers.p.rpm: --set providers.p.rpm=60: this scenario has no [providers.NAME] tables: its one provider is [provider]; set provider.rpm")
    );
    // The key where it is: the scenario runs.
    let o = capsize(&["run", &file, "--set", "providers.p.rpm=60", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn an_integer_past_i64_in_a_set_names_its_key_and_the_bound() {
    // U4: it became a string, refused as `invalid type: string "{ preset = ...`.
    let file = common::root("scenarios/research-agent.toml");
    let at = format!("capsize: {file}: ");
    let bound = "is out of range (at most 9223372036854775807, TOML's largest integer)";
    let set = r#"scheduler.client={ preset = "openai-python", keepalive = 18446744073709551615 }"#;
    assert_eq!(
        set_refused(&file, set),
        format!("{at}--set {set}: scheduler.client.keepalive: 18446744073709551615 {bound}")
    );
    for (set, key, n) in [
        (
            "workload.queries=18446744073709551615",
            "workload.queries",
            "18446744073709551615",
        ),
        ("seed=-9223372036854775809", "seed", "-9223372036854775809"),
        (
            "workload.calls_per_query={ min = 1, max = 0x1_0000_0000_0000_0000 }",
            "workload.calls_per_query.max",
            "0x1_0000_0000_0000_0000",
        ),
    ] {
        assert_eq!(
            set_refused(&file, set),
            format!("{at}--set {set}: {key}: {n} {bound}")
        );
    }
}
