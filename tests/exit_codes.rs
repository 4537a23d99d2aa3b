//! The exit-code table of docs/reference.md, one case of each, against the binary: 0 success,
//! 1 a check failed, 2 bad input (nothing written), 4 the run could not finish, 5 the outputs could not
//! be written. Every failure is one line on stderr.

use std::process::Output;

mod common;
use common::temp::Temp;
use common::{capsize, capsize_limited, stderr};

const RESEARCH: &str = "scenarios/research-agent.toml";

fn one_line(o: &Output, code: i32) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn zero_success() {
    let t = Temp::new("exit", "zero");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        RESEARCH,
        "--set",
        "workload.queries=5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).is_empty());
}

#[test]
fn one_a_check_failed() {
    // One call at a time: a query of 8 sources takes about 4.4 s, against "p95 < 2000".
    let t = Temp::new("exit", "one");
    let out = t.path("o");
    let o = capsize(&[
        "check",
        RESEARCH,
        "--set",
        "workload.queries=20",
        "--set",
        "scheduler.max_concurrency=1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL"));
}

#[test]
fn two_bad_input_and_nothing_written() {
    let t = Temp::new("exit", "two");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        RESEARCH,
        "--set",
        "scheduler.headroom=2",
        "--out",
        out.to_str().unwrap(),
    ]);
    one_line(&o, 2);
    assert!(stderr(&o).contains("scheduler.headroom: must be in (0, 1], got 2"));
    assert!(!out.exists());
    // The same for `capsize article` given a folder without the article's scenarios.
    let none = t.path("none");
    let o = capsize(&[
        "article",
        "--scenarios",
        none.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    one_line(&o, 2);
    assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn four_the_run_could_not_finish() {
    // One session thinking an hour between queries: 9,000 queries take more than the year the
    // watchdog allows.
    let t = Temp::new("exit", "four");
    let out = t.path("o");
    let o = capsize(&[
        "run",
        RESEARCH,
        "--set",
        "workload.queries=9000",
        "--set",
        "workload.think_time={ dist = \"constant\", ms = 3600000 }",
        "--out",
        out.to_str().unwrap(),
    ]);
    one_line(&o, 4);
    assert!(
        stderr(&o).contains("did not finish within"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

#[test]
fn five_the_outputs_could_not_be_written() {
    // Files may grow to 100 bytes: summary.json cannot be written.
    let t = Temp::new("exit", "five");
    let out = t.path("o");
    let args = [
        "run",
        RESEARCH,
        "--set",
        "workload.queries=5",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = capsize_limited(&args, 100);
    one_line(&o, 5);
    assert!(stderr(&o).contains("cannot write"), "{}", stderr(&o));
    assert!(!out.join("summary.json").exists());
}
