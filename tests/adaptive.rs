//! Adaptive concurrency in scenarios (`max_concurrency = { adaptive = "aimd" | "gradient" |
//! "fixed", ... }`), pinned in virtual time on `scenarios/adaptive.toml` cut to 20 minutes
//! (its limit halved from 10:00 to 15:00): the table reaches each replica's scheduler, AIMD
//! meets the cut with a fraction of the fixed limit's 429s, summary.json reports the limit
//! (mean over time, lowest, highest, cuts) and the recording's series holds the same mean;
//! a fleet's replicas each move their own limit; bad tables are one line, exit 2.

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim;
use capsize::api::sim::Recording;
use capsize::api::summary::Summary;

mod common;
use common::{capsize, stderr};

const ADAPTIVE: &str = include_str!("../scenarios/adaptive.toml");

fn scenario(sets: &[&str]) -> Scenario {
    let mut all = vec!["workload.duration_s=1200".to_string()];
    all.extend(sets.iter().map(|s| s.to_string()));
    parse(ADAPTIVE, Path::new("adaptive.toml"), &all).unwrap_or_else(|e| panic!("{e}"))
}

fn run(sets: &[&str]) -> (Summary, Recording) {
    let s = scenario(sets);
    let out = sim::run(&s).unwrap_or_else(|e| panic!("{e}"));
    (Summary::new(&s, &out), out.recording)
}

/// The mean of the series' limit over bins `[from_s, to_s)` (one-second bins).
fn mean_limit(rec: &Recording, from_s: usize, to_s: usize) -> f64 {
    assert_eq!(rec.series.bin_s, 1);
    let bins = &rec.series.bins[from_s..to_s.min(rec.series.bins.len())];
    bins.iter().map(|b| b.limit_us as f64).sum::<f64>() / (bins.len() as f64 * 1e6)
}

#[test]
fn aimd_meets_the_cut_with_a_fraction_of_the_fixed_limits_429s() {
    let (fixed, fixed_rec) = run(&["scheduler.max_concurrency.adaptive=\"fixed\""]);
    let (aimd, rec) = run(&[]);
    assert!(
        fixed.concurrency_limit.is_none(),
        "a fixed limit reports none"
    );
    assert!(fixed_rec.series.bins.iter().all(|b| b.limit_us == 0));
    let (f, a) = (fixed.provider.counters, aimd.provider.counters);
    let l = aimd.concurrency_limit.as_ref().expect("an adaptive limit");
    assert_eq!(l.policy, "aimd");
    // A fixed 12 meets the cut with 2,379 429s; AIMD, cut by each, with 187.
    assert_eq!((f.rate_limited, a.rate_limited), (2379, 187));
    assert_eq!((l.min, l.max, l.cuts), (1, 12, 187));
    assert_eq!(l.mean, 8.898);
    // The series holds the limit the summary averages: its mean over the run is the same.
    let span = rec.series.bins.len();
    let whole = mean_limit(&rec, 0, span);
    assert!((whole - l.mean).abs() < 0.05, "{whole} vs {}", l.mean);
    // Lower through the cut than before it.
    let (before, during) = (mean_limit(&rec, 0, 600), mean_limit(&rec, 600, 900));
    assert!(during < before, "{during} vs {before}");
}

#[test]
fn the_gradient_and_a_fleet_move_limits_of_their_own() {
    let (g, _) = run(&["scheduler.max_concurrency.adaptive=\"gradient\""]);
    let l = g.concurrency_limit.as_ref().expect("an adaptive limit");
    assert_eq!(l.policy, "gradient");
    assert_eq!((l.min, l.max, l.cuts), (1, 12, 180));
    // Two replicas, each its own AIMD limit from 4 within [1, 12], half the traffic each.
    let (fleet, rec) = run(&["fleet.replicas=2"]);
    let l = fleet.concurrency_limit.as_ref().expect("an adaptive limit");
    // Two limits probe for the one key: 700 429s (657 of them cuts; the rest found a limit at
    // its floor) where one client had 187, each
    // replica's limit lower on average (7.43) than the one client's (8.90).
    assert_eq!(fleet.provider.counters.rate_limited, 700);
    assert_eq!((l.min, l.max, l.cuts), (1, 12, 657));
    assert_eq!(l.mean, 7.431);
    // The series is the fleet's sum: at the start both replicas' 4.
    assert_eq!(rec.series.bins[0].limit_us, 8_000_000);
}

#[test]
fn bad_adaptive_tables_are_one_line_exit_2() {
    for (set, says) in [
        (
            "scheduler.max_concurrency.adaptive=tcp",
            "scheduler.max_concurrency.adaptive: must be \"aimd\", \"gradient\" or \"fixed\", got \"tcp\"",
        ),
        (
            "scheduler.max_concurrency.min=20",
            "scheduler.max_concurrency: needs min <= initial <= max, got min 20, initial 20, max 12",
        ),
        (
            "scheduler.max_concurrency.tolerance=2",
            "scheduler.max_concurrency.tolerance: is a setting of the gradient only",
        ),
    ] {
        let o = capsize(&["run", "scenarios/adaptive.toml", "--set", set, "--out", "/nonexistent/never"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{set}: {err}");
        assert_eq!(err.lines().count(), 1, "{set}: {err}");
        assert!(err.contains(says), "{set}: {err}");
    }
}
