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
