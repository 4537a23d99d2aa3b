//! Same inputs, same bytes: every scenario shipped (scenarios/, scenarios/article/, and a
//! scenario built so that arrivals, completions, deadlines, Retry-After ends and the user's stop
//! land on the same instants) run twice gives byte-identical summary.json and .hgrm files.
//! (Sweeps across --jobs: tests/sweep_cli.rs.)

use std::path::{Path, PathBuf};

mod common;
use common::temp::Temp;
use common::{capsize, stderr};

const FILES: [&str; 3] = ["summary.json", "query_latency.hgrm", "call_latency.hgrm"];

fn scenarios(dir: &str) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    all.sort();
    all
}

fn run(scenario: &Path, out: &Path, extra: &[&str]) -> Vec<Vec<u8>> {
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = capsize(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}: {}",
        scenario.display(),
        stderr(&o)
    );
    FILES
        .iter()
        .map(|f| std::fs::read(out.join(f)).unwrap())
        .collect()
}

fn twice(t: &Temp, scenario: &Path, extra: &[&str]) {
    let name = scenario.file_stem().unwrap().to_str().unwrap();
    let a = run(scenario, &t.path(&format!("{name}-a")), extra);
    let b = run(scenario, &t.path(&format!("{name}-b")), extra);
    for (file, (x, y)) in FILES.iter().zip(a.iter().zip(&b)) {
        assert!(
            x == y,
            "{}: {file} differs between two runs",
            scenario.display()
        );
    }
}

#[test]
fn every_shipped_scenario_reruns_byte_identical() {
    let t = Temp::new("determinism", "shipped");
    let mut ran = 0;
    for dir in ["scenarios", "scenarios/article"] {
        for s in scenarios(dir) {
            twice(&t, &s, &[]);
            ran += 1;
        }
    }
    // The benchmark's model, at a size a test can afford.
    for s in scenarios("scenarios/bench") {
        twice(&t, &s, &["--set", "workload.queries=2000"]);
        ran += 1;
    }
    assert!(ran >= 30, "only {ran} scenarios found");
}

#[test]
fn ties_at_one_instant_resolve_the_same_way_every_time() {
    let t = Temp::new("determinism", "ties");
    let s = Path::new("tests/data/ties/ties.toml");
    let first = run(s, &t.path("first"), &[]);
    for i in 0..5 {
        let again = run(s, &t.path(&format!("again-{i}")), &[]);
        assert!(first == again, "run {i} differs");
    }
    // The rule, visible in the numbers: the arrival at the stop instant (1 s) is not started,
    // so exactly 100 queries start (0, 10, ..., 990 ms).
    let summary: serde_json::Value = serde_json::from_slice(&first[0]).unwrap();
    assert_eq!(summary["queries_started"], 100);
}
