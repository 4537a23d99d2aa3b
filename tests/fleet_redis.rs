//! A real-time fleet on Redis (`--fleet-redis`): eight replicas, each its own scheduler and
//! its own Redis connection, keep one 600 RPM limit at 0.9 headroom against the mock: no 429,
//! no 60 s window above 540 plus the burst, and the virtual run of the same fleet (one
//! in-process limiter) agrees within 5 % on throughput. And the bad inputs: a shared fleet
//! with no Redis in real time, `--fleet-redis` for a fleet that does not share, a URL that is
//! not Redis's (exit 2), a Redis nobody listens on (exit 4).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time, a real server

mod common;

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim::{self, RealtimeOptions};
use capsize::api::summary::Summary;
use common::redis::Redis;
use common::{capsize, stderr};

/// The fleet tests' 16 users on a 600 RPM key, for 150 s, on eight replicas sharing one
/// limiter at 90 % headroom.
fn fleet() -> String {
    include_str!("data/fleet/users-16.toml").replace("duration_s = 180", "duration_s = 150")
        + "[fleet]\nreplicas = 8\nlimiter = \"shared\"\n"
}

fn scenario() -> Scenario {
    parse(&fleet(), Path::new("fleet.toml"), &[]).expect("a valid scenario")
}

#[test]
fn eight_replicas_on_redis_keep_one_limit_as_the_virtual_fleet_does() {
    let redis = Redis::start();
    let s = scenario();
    let real = Summary::new(
        &s,
        &sim::run_realtime(
            &s,
            &RealtimeOptions {
                time_scale: 10.0,
                target: None,
                fleet_redis: Some(redis.url()),
                single_run: true,
                replica: None,
                announce: None,
            },
        )
        .expect("the real-time fleet runs"),
    );
    let virt = Summary::new(&s, &sim::run(&s).expect("the virtual fleet runs"));
    // 540 a minute plus the fleet's burst of 9; in real time a few requests of slack for the
    // timing of the provider's window against Redis's clock.
    assert_eq!(virt.provider.counters.rate_limited, 0);
    assert!(virt.provider.peak_requests_per_60s <= 549);
    assert_eq!(
        real.provider.counters.rate_limited, 0,
        "{:?}",
        real.provider
    );
    assert!(
        real.provider.peak_requests_per_60s <= 549 + 5,
        "busiest minute {}",
        real.provider.peak_requests_per_60s
    );
    let (r, v) = (real.throughput.queries_per_s, virt.throughput.queries_per_s);
    assert!((r - v).abs() <= 0.05 * v, "queries/s real {r}, virtual {v}");
    assert_eq!(real.fleet.map(|f| f.replicas), Some(8));
}

#[test]
fn a_real_time_fleet_without_its_redis_is_refused() {
    let t = common::temp::Temp::new("fleet", "redis");
    let path = t.path("fleet.toml");
    std::fs::write(&path, fleet()).expect("write");
    let file = path.to_str().expect("UTF-8");
    let out = t.path("out");
    let out = out.to_str().expect("UTF-8");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", file, "--out", out, "--mode", "realtime"];
        args.extend_from_slice(extra);
        capsize(&args)
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs --fleet-redis"), "{}", stderr(&o));
    let o = run(&["--fleet-redis", "http://127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("must be a redis:// URL"),
        "{}",
        stderr(&o)
    );
    let o = run(&[
        "--fleet-redis",
        "redis://127.0.0.1:1",
        "--set",
        "fleet.limiter=\"split\"",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--fleet-redis applies to"),
        "{}",
        stderr(&o)
    );
    // Nobody listens on port 1: the run cannot start (exit 4), naming the URL.
    let o = run(&["--fleet-redis", "redis://127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--fleet-redis redis://127.0.0.1:1"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).matches('\n').count(), 1, "{}", stderr(&o));
    assert!(!Path::new(out).exists(), "nothing written");
    // Virtual time has no Redis to use.
    let o = capsize(&[
        "run",
        file,
        "--out",
        out,
        "--fleet-redis",
        "redis://127.0.0.1:1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_real_time_sweep_of_local_and_shared_fleets_decides_before_its_first_point() {
    let t = common::temp::Temp::new("fleet", "sweep");
    let path = t.path("fleet.toml");
    std::fs::write(&path, fleet()).expect("write");
    let file = path.to_str().expect("UTF-8");
    let out = t.path("out");
    let out = out.to_str().expect("UTF-8");
    let sweep = |extra: &[&str]| {
        let mut args = vec![
            "sweep",
            file,
            "--out",
            out,
            "--mode",
            "realtime",
            "--time-scale",
            "20",
            "--set",
            "workload.duration_s=6",
            "--sweep",
            "fleet.replicas=2",
            "--sweep",
            "fleet.limiter=local,shared",
        ];
        args.extend_from_slice(extra);
        capsize(&args)
    };
    // No Redis for the shared point: refused before the local point runs.
    let o = sweep(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs --fleet-redis"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("runs"), "no point ran: {}", stderr(&o));
    assert!(!Path::new(out).exists(), "nothing written");
    // A URL no point uses is refused before any runs.
    let o = capsize(&[
        "sweep",
        file,
        "--out",
        out,
        "--mode",
        "realtime",
        "--sweep",
        "fleet.replicas=2",
        "--sweep",
        "fleet.limiter=local,split",
        "--fleet-redis",
        "redis://127.0.0.1:1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no run here has one"), "{}", stderr(&o));
    // With Redis: the local point ignores the URL, the shared one keeps its limit there.
    let redis = Redis::start();
    let o = sweep(&["--fleet-redis", &redis.url()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = std::fs::read_to_string(Path::new(out).join("sweep.csv")).expect("sweep.csv");
    let limiters: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(limiters, ["local", "shared"], "{csv}");
}

#[test]
fn a_redis_url_is_checked_as_input_and_its_password_never_shown() {
    let t = common::temp::Temp::new("fleet", "url");
    let path = t.path("fleet.toml");
    std::fs::write(&path, fleet()).expect("write");
    let file = path.to_str().expect("UTF-8");
    let out = t.path("out");
    let out = out.to_str().expect("UTF-8");
    let run = |url: &str| {
        capsize(&[
            "run",
            file,
            "--out",
            out,
            "--mode",
            "realtime",
            "--fleet-redis",
            url,
        ])
    };
    // Not a URL redis can read: bad input, exit 2, with the password hidden.
    let o = run("redis://:hunter2@127.0.0.1:notaport");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("hunter2"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("redis://:***@127.0.0.1:notaport"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).matches('\n').count(), 1, "{}", stderr(&o));
    // Nobody listens: exit 4, the password hidden still.
    let o = run("redis://:hunter2@127.0.0.1:1");
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(!stderr(&o).contains("hunter2"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("redis://:***@127.0.0.1:1"),
        "{}",
        stderr(&o)
    );
    assert!(!Path::new(out).exists(), "nothing written");
}
