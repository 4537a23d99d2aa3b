//! `capsize search` from the outside: the answer and its neighbour agree with a sweep of the
//! same values (same seeds), a noisy probe runs more seeds, the search stays within the key's
//! own bounds and says when it stopped at one, probes that contradict monotonicity are named,
//! and bad input is one line, exit 2, nothing written.

mod common;

use common::capsize;
use common::temp::Temp;

const AGENT: &str = "scenarios/research-agent.toml";

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_smallest_concurrency_agrees_with_a_sweep_of_its_neighbours() {
    let t = Temp::new("search", "min");
    let out = t.path("out");
    let o = capsize(&[
        "search",
        AGENT,
        "--min",
        "scheduler.max_concurrency",
        "--set",
        "scheduler.headroom=0.7",
        "--set",
        "workload.queries=300",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    // From the scenario's 4 (passes), halved to 2 (fails), bisected at 3 (fails).
    assert!(
        stdout(&o).contains("smallest scheduler.max_concurrency that meets the objectives: 4; 3 fails: latency_ms.query.p95 2,109.4, needs < 2000"),
        "{}",
        stdout(&o)
    );
    let csv = std::fs::read_to_string(out.join("search.csv")).unwrap();
    let values: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(values, ["4", "2", "3"], "{csv}");
    assert!(
        csv.lines().nth(1).unwrap().starts_with("4,3/3,0.733,"),
        "{csv}"
    );
    // A sweep of 3 and 4 with the same repeats runs the same seeds: the same verdicts.
    let sweep = t.path("sweep");
    let o = capsize(&[
        "sweep",
        AGENT,
        "--sweep",
        "scheduler.max_concurrency=3,4",
        "--set",
        "scheduler.headroom=0.7",
        "--set",
        "workload.queries=300",
        "--repeats",
        "3",
        "--out",
        sweep.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let csv = std::fs::read_to_string(sweep.join("sweep.csv")).unwrap();
    let verdicts: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap())
        .collect();
    assert_eq!(verdicts, ["false", "true"], "{csv}");
}

#[test]
fn a_noisy_probe_runs_more_seeds_and_a_fraction_is_bisected_to_its_precision() {
    let t = Temp::new("search", "max");
    let out = t.path("out");
    let o = capsize(&[
        "search",
        "scenarios/incident.toml",
        "--max",
        "workload.arrival_rate",
        "--set",
        "scheduler.max_concurrency=16",
        "--set",
        "scheduler.headroom=1.0",
        "--repeats",
        "2",
        "--max-repeats",
        "4",
        "--precision",
        "0.05",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    // 1 passes, 2 fails; bisected: 1.5, 1.25, 1.125 fail, 1.0625 passes (its two seeds
    // disagreed, so it ran four), 1.09375 fails: within 5 % of 1.0625.
    assert!(
        stdout(&o).contains("largest workload.arrival_rate that meets the objectives: 1.0625 (noisy: 3 of its 4 seeds pass on their own; judged on their mean); 1.09375 fails: "),
        "{}",
        stdout(&o)
    );
    let csv = std::fs::read_to_string(out.join("search.csv")).unwrap();
    let rows: Vec<(&str, &str)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let mut c = l.split(',');
            (c.next().unwrap(), c.next().unwrap())
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("1.0", "2/2"),
            ("2.0", "0/2"),
            ("1.5", "0/2"),
            ("1.25", "0/2"),
            ("1.125", "0/2"),
            ("1.0625", "3/4"),
            ("1.09375", "0/2"),
        ],
        "{csv}"
    );
}

#[test]
fn a_search_that_never_fails_says_it_stopped_at_its_bound() {
    let t = Temp::new("search", "bound");
    let lax = t.write(
        "lax.toml",
        &std::fs::read_to_string(AGENT).unwrap().replace(
            "\"latency_ms.query.p95\" = \"< 2000\"",
            "\"latency_ms.query.p95\" = \"< 100000\"",
        ),
    );
    let out = t.path("out");
    let o = capsize(&[
        "search",
        lax.to_str().unwrap(),
        "--min",
        "scheduler.max_concurrency",
        "--repeats",
        "1",
        "--set",
        "workload.queries=50",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    // 4, 2 and 1 all pass: the answer is the floor, and it says so.
    assert!(
        stdout(&o).contains("smallest scheduler.max_concurrency that meets the objectives: 1; it is the smallest integer above 0, so no smaller value was tried\n"),
        "{}",
        stdout(&o)
    );
    let o = capsize(&[
        "search",
        lax.to_str().unwrap(),
        "--max",
        "workload.sessions",
        "--to",
        "2",
        "--repeats",
        "1",
        "--set",
        "workload.queries=50",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(
        stdout(&o).contains("largest workload.sessions that meets the objectives: 2; it is the --to given, so no larger value was tried: the answer may lie above it (raise --to)\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn bad_searches_are_refused_in_one_line() {
    let t = Temp::new("search", "bad");
    let out = t.path("out");
    let o = out.to_str().unwrap();
    let no_slo = t.write(
        "no-slo.toml",
        &std::fs::read_to_string(AGENT).unwrap().replace(
            "[slo]\n\"latency_ms.query.p95\" = \"< 2000\"\n\"provider.rate_limited\" = \"== 0\"\n",
            "",
        ),
    );
    let fractional_rpm = t.write(
        "rpm.toml",
        &std::fs::read_to_string(AGENT)
            .unwrap()
            .replace("rpm = 600\n", "rpm = 600.0\n"),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["search", AGENT, "--out", o], "--max"),
        (
            vec!["search", AGENT, "--max", "workload.sessions", "--set", "workload.sessions=4", "--out", o],
            "--set workload.sessions=4 gives the key the search varies",
        ),
        (
            vec!["search", AGENT, "--max", "workload.sessions", "--from", "0", "--out", o],
            "--from \"0\": not a number above 0",
        ),
        (
            vec!["search", AGENT, "--max", "workload.sessions", "--to", "1", "--out", o],
            "--to 1: must be above the start, 1",
        ),
        (
            vec!["search", AGENT, "--max", "workload.sesions", "--from", "2", "--out", o],
            "sesions",
        ),
        // Beyond the key's own bounds, before any probe runs: the flag, the value, the bound.
        (
            vec!["search", AGENT, "--max", "workload.sessions", "--to", "2000000", "--out", o],
            "research-agent.toml: --to 2000000: above the largest workload.sessions takes, 100000",
        ),
        (
            vec!["search", AGENT, "--max", "workload.sessions", "--from", "200000", "--out", o],
            "research-agent.toml: --from 200000: above the largest workload.sessions takes, 100000",
        ),
        (
            vec!["search", AGENT, "--min", "scheduler.max_concurrency", "--to", "1000001", "--out", o],
            "--to 1000001: above the largest scheduler.max_concurrency takes, 1000000",
        ),
        (
            vec!["search", AGENT, "--max", "scheduler.headroom", "--to", "1.5", "--out", o],
            "--to 1.5: above the largest scheduler.headroom takes, 1.0",
        ),
        (
            vec!["search", AGENT, "--max", "scheduler.headroom", "--from", "2", "--out", o],
            "--from 2: above the largest scheduler.headroom takes, 1.0",
        ),
        (
            vec!["search", AGENT, "--min", "scheduler.retry.max_retries", "--from", "101", "--out", o],
            "--from 101: above the largest scheduler.retry.max_retries takes, 100",
        ),
        (
            vec!["search", fractional_rpm.to_str().unwrap(), "--min", "provider.rpm", "--from", "0.5", "--out", o],
            "--from 0.5: below the smallest provider.rpm takes, 1.0",
        ),
        (
            vec!["search", AGENT, "--max", "workload.sessions", "--from", "0.3", "--out", o],
            "--from \"0.3\": workload.sessions takes integers: give 1 or more",
        ),
        (
            vec!["search", AGENT, "--max", "workload.think_time", "--out", o],
            "workload.think_time has no number above 0 in the scenario to start from: give --from N",
        ),
        (
            vec!["search", no_slo.to_str().unwrap(), "--max", "workload.sessions", "--out", o],
            "no [slo] objectives to meet",
        ),
    ];
    for (args, says) in cases {
        let r = capsize(&args);
        let stderr = common::stderr(&r);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} wrote output");
    }
}

/// Every value passes (50 queries shared by however many sessions).
const ALWAYS: &str = r#"
name = "always-passes"
seed = 1
[provider]
latency = { dist = "constant", ms = 100 }
[workload]
mode = "closed"
sessions = 1
queries = 50
calls_per_query = 2
tokens_per_call = 0
[scheduler]
max_concurrency = 4
[slo]
"latency_ms.query.p95" = "< 1000000"
"#;

/// No value passes: a query p95 under 50 ms against 100 ms calls.
const NEVER: &str = r#"
name = "never-passes"
seed = 1
[provider]
rpm = 600
latency = { dist = "constant", ms = 100 }
[workload]
mode = "open"
arrival_rate = 1
duration_s = 30
calls_per_query = 2
tokens_per_call = 0
[scheduler]
max_concurrency = 4
[slo]
"latency_ms.query.p95" = "< 50"
"#;

/// search.csv's rows as (value, step, note).
fn steps(csv: &std::path::Path) -> Vec<(String, String, String)> {
    let mut r = csv::Reader::from_path(csv).unwrap();
    let head = r.headers().unwrap().clone();
    assert_eq!(
        head.iter().skip(1).collect::<Vec<_>>(),
        [
            "seeds_passing",
            "queries_per_s",
            "query_p95_ms",
            "rate_limited",
            "verdict",
            "step",
            "note"
        ]
    );
    r.records()
        .map(|row| {
            let row = row.unwrap();
            (row[0].to_string(), row[6].to_string(), row[7].to_string())
        })
        .collect()
}

fn row(value: &str, step: &str, note: &str) -> (String, String, String) {
    (value.to_string(), step.to_string(), note.to_string())
}

#[test]
fn the_search_stops_at_the_keys_own_bounds_either_way_and_says_so() {
    let t = Temp::new("search", "keybounds");
    let always = t.write("always.toml", ALWAYS);
    let never = t.write("never.toml", NEVER);
    let run = |name: &str, args: &[&str]| {
        let out = t.path(name);
        let mut all = vec!["search"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--repeats", "1", "--out", out.to_str().unwrap()]);
        let o = capsize(&all);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", common::stderr(&o));
        (o, out.join("search.csv"))
    };
    // Doubling from 65,536 sessions stops at 100,000, workload.sessions's bound, not 131,072.
    let a = always.to_str().unwrap();
    let (o, csv) = run(
        "sessions",
        &[a, "--max", "workload.sessions", "--from", "65536"],
    );
    assert_eq!(
        stdout(&o).lines().nth(1).unwrap(),
        "largest workload.sessions that meets the objectives: 100000; it is the largest workload.sessions takes, so no larger value was tried"
    );
    assert_eq!(
        steps(&csv),
        [row("65536", "start", ""), row("100000", "up", "")]
    );
    // A fraction up to its bound: headroom 0.5, then 1.0 (not 2^20 × 0.5).
    let (o, csv) = run(
        "headroom",
        &[a, "--max", "scheduler.headroom", "--from", "0.5"],
    );
    assert_eq!(
        stdout(&o).lines().nth(1).unwrap(),
        "largest scheduler.headroom that meets the objectives: 1.0; it is the largest scheduler.headroom takes, so no larger value was tried"
    );
    assert_eq!(steps(&csv), [row("0.5", "start", ""), row("1.0", "up", "")]);
    // A fraction down to its bound: RPM 4.0, 2.0, 1.0 (not 4.0 / 2^20).
    let (o, csv) = run("rpm", &[a, "--min", "provider.rpm", "--from", "4.0"]);
    assert_eq!(
        stdout(&o).lines().nth(1).unwrap(),
        "smallest provider.rpm that meets the objectives: 1.0; it is the smallest provider.rpm takes, so no smaller value was tried"
    );
    assert_eq!(
        steps(&csv),
        [
            row("4.0", "start", ""),
            row("2.0", "down", ""),
            row("1.0", "down", "")
        ]
    );
    // --min going up: stops at 1,000,000, max_concurrency's bound, says "from ... to", never
    // "down to", then checks one smaller value (no closer to passing: it stops there).
    let n = never.to_str().unwrap();
    let (o, csv) = run(
        "never-min",
        &[n, "--min", "scheduler.max_concurrency", "--from", "524288"],
    );
    assert_eq!(
        stdout(&o).lines().nth(1).unwrap(),
        "no value of scheduler.max_concurrency tried meets the objectives: all 3 values tried, from 262144 to 1000000, fail; 1000000, the largest scheduler.max_concurrency takes, fails: latency_ms.query.p95 100, needs < 50"
    );
    assert!(!stdout(&o).contains("down to"), "{}", stdout(&o));
    assert!(
        common::stderr(&o).contains("capsize search: nothing passes from 524288 up to 1000000: trying smaller values, in case passing is not monotone in scheduler.max_concurrency\n"),
        "{}",
        common::stderr(&o)
    );
    assert_eq!(
        steps(&csv),
        [
            row("524288", "start", ""),
            row("1000000", "up", ""),
            row("262144", "check down", "")
        ]
    );
    // --max with nothing passing: the start is the floor, so it is not the only probe.
    let (o, csv) = run("never-max", &[n, "--max", "workload.arrival_rate"]);
    assert_eq!(
        stdout(&o).lines().nth(1).unwrap(),
        "no value of workload.arrival_rate tried meets the objectives: all 2 values tried, from 1 to 2, fail; 1, the smallest integer above 0, fails: latency_ms.query.p95 100, needs < 50"
    );
    assert!(
        common::stderr(&o).contains("capsize search: 1 fails and no smaller value can be tried: trying larger values, in case passing is not monotone in workload.arrival_rate\n"),
        "{}",
        common::stderr(&o)
    );
    assert_eq!(
        steps(&csv),
        [row("1", "start", ""), row("2", "check up", "")]
    );
}

/// research-agent at 300 queries with RPM out of the way: throughput needs 2 sessions, the
/// p95 allows at most 2, so only 2 passes.
fn window() -> String {
    std::fs::read_to_string(AGENT)
        .unwrap()
        .replace("rpm = 600\n", "rpm = 100000\n")
        .replace("queries = 2000\n", "queries = 300\n")
        .replace(
            "\"latency_ms.query.p95\" = \"< 2000\"\n",
            "\"latency_ms.query.p95\" = \"< 3000\"\n\"throughput.queries_per_s\" = \">= 0.8\"\n",
        )
}

#[test]
fn passing_that_is_not_monotone_is_named_and_a_lone_failure_is_not_the_answer() {
    let t = Temp::new("search", "monotone");
    let text = window();
    assert!(
        text.contains("rpm = 100000\n")
            && text.contains("queries = 300\n")
            && text.contains(">= 0.8")
    );
    let scenario = t.write("window.toml", &text);
    let s = scenario.to_str().unwrap();
    // --max from 1: 1 fails and nothing lies below it; 2, checked, passes; then as from a
    // passing start: 4 fails, 3 fails.
    let out = t.path("max");
    let o = capsize(&[
        "search",
        s,
        "--max",
        "workload.sessions",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert_eq!(
        stdout(&o).lines().take(3).collect::<Vec<_>>(),
        [
            "research-agent: 4 probes of 3 seeds or more; passing is not monotone",
            "largest workload.sessions that meets the objectives: 2; 3 fails: latency_ms.query.p95 3,759.4, needs < 3000",
            "not monotone: workload.sessions 1 fails, yet 2, larger, passes (the search assumes more load never helps); values that pass: 2",
        ]
    );
    assert!(
        common::stderr(&o).contains("capsize search: 1 fails and no smaller value can be tried: trying larger values, in case passing is not monotone in workload.sessions\n"),
        "{}",
        common::stderr(&o)
    );
    assert_eq!(
        steps(&out.join("search.csv")),
        [
            row("1", "start", "not monotone: 2, larger, passes"),
            row("2", "check up", "not monotone: 1, smaller, fails"),
            row("4", "up", ""),
            row("3", "bisect", ""),
        ]
    );
    // --min, the mirror image: 4 and 8 (--to) fail; checking down, 2 passes, 1 fails.
    let out = t.path("min");
    let o = capsize(&[
        "search",
        s,
        "--min",
        "workload.sessions",
        "--from",
        "4",
        "--to",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert_eq!(
        stdout(&o).lines().take(3).collect::<Vec<_>>(),
        [
            "research-agent: 4 probes of 3 seeds or more; passing is not monotone",
            "smallest workload.sessions that meets the objectives: 2; 1 fails: throughput.queries_per_s 0.731, needs >= 0.8",
            "not monotone: workload.sessions 4 fails, yet 2, smaller, passes (the search assumes more capacity never hurts); values that pass: 2",
        ]
    );
    assert!(
        common::stderr(&o).contains("capsize search: nothing passes from 4 up to 8: trying smaller values, in case passing is not monotone in workload.sessions\n"),
        "{}",
        common::stderr(&o)
    );
    assert_eq!(
        steps(&out.join("search.csv")),
        [
            row("4", "start", "not monotone: 2, smaller, passes"),
            row("8", "up", "not monotone: 2, smaller, passes"),
            row("2", "check down", "not monotone: 4, larger, fails"),
            row("1", "down", ""),
        ]
    );
}
