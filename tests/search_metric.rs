//! `capsize search --over KEY --min METRIC`: the passing value with the least (or greatest)
//! mean of a metric agrees with a sweep of every value (same seeds), found in a fraction of
//! the runs; equally good values are named; bad input is one line, exit 2, nothing written.

mod common;

use common::temp::Temp;
use common::{capsize, stderr};

/// The shipped bathtub: six sessions through one semaphore to a provider that serves 12 at
/// once and queues the rest, each query 8 calls with a 3 s deadline and a 1.5 s client timeout
/// retried twice. Too little concurrency misses the deadline (the finished calls of abandoned
/// queries are wasted); too much queues at the provider until the client gives up on answers
/// it is billed for, and pays again for each retry. Between, every token billed is used:
/// $0.024 a query (8 × 1000 prompt tokens at $3 a million).
fn bathtub() -> String {
    std::fs::read_to_string("scenarios/cost.toml").unwrap()
}

/// One row of a CSV by column name.
fn rows(path: &std::path::Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = csv_cells(lines.next().unwrap());
    lines
        .map(|l| header.iter().cloned().zip(csv_cells(l)).collect())
        .collect()
}

/// A CSV line's cells (quoted cells may hold commas).
fn csv_cells(line: &str) -> Vec<String> {
    let (mut cells, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    for ch in line.chars() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => cells.push(std::mem::take(&mut cell)),
            c => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

/// Sweeps max_concurrency 1..=48 (3 seeds a point) and searches it for the best `metric`
/// (`flag`: --min or --max), no probe running more seeds than the sweep's points: the
/// search's answer, its probes, and the sweep's best passing point (best mean, then the
/// smaller value).
fn against_a_sweep(t: &Temp, flag: &str, metric: &str, column: &str) -> (String, usize, String) {
    let file = t.write("bathtub.toml", &bathtub());
    let (sweep, search) = (
        t.path(&format!("sweep{flag}")),
        t.path(&format!("search{flag}")),
    );
    let o = capsize(&[
        "sweep",
        file.to_str().unwrap(),
        "--sweep",
        "scheduler.max_concurrency=1..=48",
        "--repeats",
        "3",
        "--out",
        sweep.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let sign = if flag == "--max" { -1.0 } else { 1.0 };
    let best = rows(&sweep.join("sweep.csv"))
        .into_iter()
        .filter(|r| r["slo_pass"] == "true" && !r[column].is_empty())
        .map(|r| {
            let v: f64 = r[column].parse().unwrap();
            (
                sign * v,
                r["scheduler.max_concurrency"].parse::<u32>().unwrap(),
            )
        })
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .unwrap();
    let o = capsize(&[
        "search",
        file.to_str().unwrap(),
        "--over",
        "scheduler.max_concurrency",
        flag,
        metric,
        "--max-repeats",
        "3",
        "--out",
        search.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let probes = rows(&search.join("search.csv"));
    let least: Vec<&String> = probes
        .iter()
        .filter(|r| r["note"] == if flag == "--max" { "greatest" } else { "least" })
        .map(|r| &r["scheduler.max_concurrency"])
        .collect();
    assert_eq!(least.len(), 1, "one answer: {probes:?}");
    assert!(probes.iter().all(|r| r.contains_key(metric)), "{probes:?}");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        probes.len(),
        format!("{}:{}", least[0], best.1),
    )
}

#[test]
fn the_cheapest_passing_concurrency_is_the_one_a_full_sweep_finds() {
    let t = Temp::new("search-metric", "cheapest");
    let (said, probes, answer) = against_a_sweep(
        &t,
        "--min",
        "cost.per_good_query_usd",
        "cost_per_good_query_usd",
    );
    // 9 wastes a little (an abandoned query's calls), 10 to 27 waste nothing: the least
    // cost, and of those the smallest concurrency, is 10.
    assert_eq!(answer, "10:10", "{said}");
    assert!(
        probes < 48 / 3,
        "{probes} probes, a third of the sweep's: {said}"
    );
    assert!(
        said.contains("least mean cost.per_good_query_usd of the scheduler.max_concurrency values that meet the objectives: 10, at 0.024 (± 0 over 3 seeds); as good within twice that: 11, 13, 16, 22"),
        "{said}"
    );
}

#[test]
fn the_greatest_throughput_is_the_one_a_full_sweep_finds() {
    let t = Temp::new("search-metric", "fastest");
    let (said, probes, answer) =
        against_a_sweep(&t, "--max", "throughput.queries_per_s", "queries_per_s");
    let (found, swept) = answer.split_once(':').unwrap();
    assert_eq!(found, swept, "{said}");
    assert!(probes < 48 / 3, "{probes} probes: {said}");
    assert!(
        said.contains(&format!(
            "greatest mean throughput.queries_per_s of the scheduler.max_concurrency values that meet the objectives: {found}, at "
        )),
        "{said}"
    );
}

#[test]
fn a_search_on_a_metric_refuses_what_it_cannot_answer_in_one_line() {
    let t = Temp::new("search-metric", "bad");
    let file = t.write("bathtub.toml", &bathtub());
    let unpriced = t.write(
        "unpriced.toml",
        &bathtub().replace(
            "price = { input_per_mtok = 3.0, output_per_mtok = 15.0 }\n",
            "",
        ),
    );
    let (f, u) = (file.to_str().unwrap(), unpriced.to_str().unwrap());
    let out = t.path("out");
    let o = out.to_str().unwrap();
    let key = "scheduler.max_concurrency";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["search", f, "--min", "cost.per_good_query_usd", "--out", o],
            "bathtub.toml: --min cost.per_good_query_usd: a metric of summary.json, not a key of the scenario: give --over KEY",
        ),
        (
            vec!["search", f, "--over", key, "--min", "cost.per_good_query", "--out", o],
            "--min cost.per_good_query: with --over, --min takes a metric of summary.json",
        ),
        (
            vec!["search", f, "--over", key, "--max", "scheduler.timeout_ms", "--out", o],
            "--max scheduler.timeout_ms: with --over, --max takes a metric",
        ),
        (
            vec!["search", u, "--over", key, "--min", "cost.total_usd", "--out", o],
            "unpriced.toml: --min cost.total_usd: the scenario has no price, so nothing is billed",
        ),
        (
            vec!["search", f, "--over", "scheduler.max_concurency", "--min", "cost.total_usd", "--out", o],
            "max_concurency",
        ),
    ];
    for (args, want) in cases {
        let got = capsize(&args);
        let err = stderr(&got);
        assert_eq!(got.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

#[test]
fn a_search_for_the_greatest_speaks_of_peaks_and_one_maximum() {
    // U4: `--max` said "not one minimum: ... dips at more than one value".
    let t = Temp::new("search-metric", "peaks");
    let file = t.write("bathtub.toml", &bathtub());
    let out = t.path("out");
    let o = capsize(&[
        "search",
        file.to_str().unwrap(),
        "--over",
        "scheduler.max_concurrency",
        "--max",
        "cost.per_good_query_usd",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(
        lines[0],
        "cost: 9 probes of 3 seeds or more; not one maximum"
    );
    assert_eq!(
        lines[2],
        "not one maximum: cost.per_good_query_usd peaks at more than one value of scheduler.max_concurrency (8, 32) beyond the seeds' noise (the search assumes one stretch of passing values with one maximum): the best found may not be the best there is; a sweep over the range shows the whole curve"
    );
    assert!(!said.contains("minimum") && !said.contains("dip"), "{said}");
    let notes: Vec<(String, String)> = rows(&out.join("search.csv"))
        .into_iter()
        .filter(|r| !r["note"].is_empty())
        .map(|r| (r["scheduler.max_concurrency"].clone(), r["note"].clone()))
        .collect();
    assert_eq!(
        notes,
        [
            ("32".to_string(), "another peak".to_string()),
            ("8".to_string(), "greatest".to_string())
        ]
    );
}
