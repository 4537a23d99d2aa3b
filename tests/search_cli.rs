//! `capsize search` from the outside: the answer and its neighbour agree with a sweep of the
//! same values (same seeds), a noisy probe runs more seeds, and bad input is one line, exit 2,
//! nothing written.

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
        stdout(&o).contains("smallest scheduler.max_concurrency that meets the objectives: 1; every value tried passes, down to the smallest the key takes here"),
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
        stdout(&o).contains("largest workload.sessions that meets the objectives: 2; every value tried passes: the answer may lie beyond 2 (raise --to)"),
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
