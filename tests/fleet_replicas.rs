//! A fleet's replicas as separate processes (`capsize run --replica I/K --run-id ID`): three
//! `capsize run` processes, each one replica of a fleet of 3 sharing a 600 RPM limit at 0.9
//! headroom on one redis-server, send to one `capsize mock`; they start together, keep the one
//! limit (no 429, no 60 s above 540 plus the burst of 9 and a few of slack for the timing of the
//! mock's window against Redis's clock), and `capsize merge` adds them into the fleet's summary,
//! which agrees with the same fleet run in one process (each replica its own Redis connection)
//! within 5 % on throughput and requests. And what cannot be a replica is refused in one line.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real processes, a real clock

mod common;

use std::process::{Command, Stdio};

use common::redis::Redis;
use common::temp::Temp;
use common::{capsize, get_json, merge_tampered, read_json, spawn_mock, stderr};
use serde_json::Value;

/// The fleet tests' 16 users on a 600 RPM key for 150 s, on three replicas sharing one limiter.
fn fleet() -> String {
    include_str!("data/fleet/users-16.toml").replace("duration_s = 180", "duration_s = 150")
        + "[fleet]\nreplicas = 3\nlimiter = \"shared\"\n"
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {v}"))
}

#[test]
fn three_processes_keep_one_limit_and_merge_into_the_fleet_one_process_runs() {
    let t = Temp::new("replicas", "fleet");
    let file = t.write("fleet.toml", &fleet());
    let redis = Redis::start();
    let (mut mock, target) = spawn_mock(&file, "10");
    let out = t.path("out");
    let run_id = format!("replicas-test-{}", std::process::id());
    let children: Vec<_> = (1..=3)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_capsize"))
                .args(["run", file.to_str().expect("UTF-8"), "--mode", "realtime"])
                .args(["--time-scale", "10", "--target", &target])
                .args(["--fleet-redis", &redis.url()])
                .args(["--replica", &format!("{i}/3"), "--run-id", &run_id])
                .args(["--out", out.to_str().expect("UTF-8")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("capsize runs")
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().expect("a replica ends");
        assert_eq!(
            o.status.code(),
            Some(0),
            "replica {}: {}",
            i + 1,
            stderr(&o)
        );
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            said.contains(&format!("replica {}/3 of run {run_id}", i + 1)),
            "{said}"
        );
    }
    let merged = t.path("merged");
    let o = capsize(&[
        "merge",
        out.to_str().expect("UTF-8"),
        "--out",
        merged.to_str().expect("UTF-8"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let fleet = read_json(&merged.join("summary.json"));
    // Records whose counts do not add up, or add up past 2^64 together, are refused.
    let (o, at) = merge_tampered(&out, &["1-of-3"], |r| {
        r["outcome"]["provider"]["received"] = u64::MAX.into()
    });
    let err = stderr(&o);
    let says = format!(
        "replica.json: provider: received {} is not served ",
        u64::MAX
    );
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&says) && err.lines().count() == 1, "{err}");
    assert!(!at.exists());
    let big = u64::MAX - 1;
    let (o, at) = merge_tampered(&out, &["1-of-3", "2-of-3"], |r| {
        r["outcome"]["queries_started"] = big.into();
        r["outcome"]["recording"]["queries_completed"] = big.into();
    });
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        format!("capsize: the replicas' counts ({big} and {big}) add up past 2^64\n")
    );
    assert!(!at.exists());
    // What the mock itself counted, every replica's requests.
    let stats = get_json(&target, "/stats");
    let _ = mock.kill();
    let _ = mock.wait();
    assert_eq!(num(&fleet, &["provider", "rate_limited"]), 0.0, "{fleet}");
    let peak = num(&fleet, &["provider", "peak_requests_per_60s"]);
    eprintln!("three processes: busiest minute {peak} requests (at most 540 + 9 + 5)");
    assert!(peak <= 549.0 + 5.0, "busiest minute {peak}");
    assert!(
        peak >= 500.0,
        "the fleet pressed on its limit: busiest minute {peak}"
    );
    assert_eq!(num(&fleet, &["fleet", "replicas"]), 3.0);
    assert_eq!(
        num(&fleet, &["provider", "received"]),
        num(&stats, &["received"]),
        "the merged provider is what the mock counted: {stats}"
    );

    // The same fleet in one process, its replicas each on a Redis connection of their own.
    let one = t.path("one");
    let o = capsize(&[
        "run",
        file.to_str().expect("UTF-8"),
        "--mode",
        "realtime",
        "--time-scale",
        "10",
        "--fleet-redis",
        &redis.url(),
        "--out",
        one.to_str().expect("UTF-8"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let together = read_json(&one.join("summary.json"));
    for path in [
        &["throughput", "queries_per_s"][..],
        &["provider", "served"][..],
    ] {
        let (apart, whole) = (num(&fleet, path), num(&together, path));
        eprintln!("{path:?}: three processes {apart}, one {whole}");
        assert!(
            (apart - whole).abs() <= 0.05 * whole,
            "{path:?}: three processes {apart}, one {whole}"
        );
    }
}

#[test]
fn what_cannot_be_a_replica_is_refused_in_one_line() {
    let t = Temp::new("replicas", "refused");
    let file = t.write("fleet.toml", &fleet());
    let f = file.to_str().expect("UTF-8");
    let out = t.path("out");
    let o_ = out.to_str().expect("UTF-8");
    let refused = |args: &[&str], code: i32, says: &str| {
        let mut all = vec!["run", f, "--out", o_];
        all.extend_from_slice(args);
        let o = capsize(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing written");
    };
    refused(&["--replica", "1/3"], 2, "--run-id");
    refused(
        &["--replica", "1/3", "--run-id", "r"],
        2,
        "add --mode realtime",
    );
    refused(
        &["--replica", "4/3", "--run-id", "r", "--mode", "realtime"],
        2,
        "I from 1 to K",
    );
    refused(
        &["--replica", "1/3", "--run-id", "a b", "--mode", "realtime"],
        2,
        "--run-id \"a b\"",
    );
    let redis = Redis::start();
    let url = redis.url();
    refused(
        &[
            "--replica",
            "1/3",
            "--run-id",
            "r",
            "--mode",
            "realtime",
            "--fleet-redis",
            &url,
        ],
        2,
        "give --target URL",
    );
    let (mut mock, target) = spawn_mock(&file, "10");
    refused(
        &[
            "--replica",
            "1/2",
            "--run-id",
            "r",
            "--mode",
            "realtime",
            "--fleet-redis",
            &url,
            "--target",
            &target,
        ],
        2,
        "the scenario's fleet has 3 replicas",
    );
    // Alone at the start line: the others never come.
    refused(
        &[
            "--replica",
            "2/3",
            "--run-id",
            "alone",
            "--mode",
            "realtime",
            "--fleet-redis",
            &url,
            "--target",
            &target,
            "--join-timeout",
            "1",
            "--time-scale",
            "10",
        ],
        4,
        "1 of 3 replicas joined within 1 s (missing 1/3, 3/3)",
    );
    // The same replica of the same run again.
    refused(
        &[
            "--replica",
            "2/3",
            "--run-id",
            "alone",
            "--mode",
            "realtime",
            "--fleet-redis",
            &url,
            "--target",
            &target,
            "--join-timeout",
            "1",
            "--time-scale",
            "10",
        ],
        2,
        "replica 2/3 has already joined it",
    );
    // A replica of the run with other overrides, or another seed, is refused at the start
    // line, before it joins (U5): the first to arrive set the run's terms.
    let start = |replica: &str, extra: &[&str], code: i32, says: &str| {
        let mut args = vec![
            "--replica",
            replica,
            "--run-id",
            "terms",
            "--mode",
            "realtime",
        ];
        args.extend_from_slice(&["--fleet-redis", &url, "--target", &target]);
        args.extend_from_slice(&["--join-timeout", "1", "--time-scale", "10"]);
        args.extend_from_slice(extra);
        refused(&args, code, says);
    };
    start("1/3", &[], 4, "1 of 3 replicas joined within 1 s");
    start(
        "2/3",
        &["--set", "scheduler.max_concurrency=1"],
        2,
        r#"run terms: replica 2/3 is not the run the replicas before it started: --set arguments ["scheduler.max_concurrency=1"] and [] (this replica's first)"#,
    );
    start(
        "3/3",
        &["--seed", "5"],
        2,
        r#"--set arguments ["seed=5"] and []"#,
    );
    // The scenario file itself changed: its bytes differ.
    std::fs::write(&file, fleet() + "# another\n").expect("write");
    start("3/3", &[], 2, "scenario files (FNV-1a) ");
    std::fs::write(&file, fleet()).expect("write");
    // With the same terms it joins (and waits alone for the missing one).
    start(
        "3/3",
        &[],
        4,
        "2 of 3 replicas joined within 1 s (missing 2/3)",
    );
    let _ = mock.kill();
    let _ = mock.wait();
}
