//! Fleets (`[fleet]`): K replicas of the client on one key, each with its own scheduler and
//! share of the sessions, keeping the limit with `local` limiters (each at the whole limit),
//! `split` ones (each at 1/K) or one `shared` limiter. Pinned in virtual time: a fleet of one
//! is the single client byte for byte; four local limiters send more than the quota and get
//! 429s where split and shared ones get none and hold the busiest minute to the limit; the
//! sessions spread evenly; bad `[fleet]` tables are refused before anything runs.

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim;
use capsize::api::summary::Summary;

/// 16 users asking for about 1,100 calls a minute of a 600 RPM key, 90 % headroom.
const FLEET: &str = include_str!("data/fleet/users-16.toml");

fn scenario(toml: &str) -> Result<Scenario, String> {
    parse(toml, Path::new("fleet.toml"), &[]).map_err(|e| e.to_string())
}

fn with_fleet(replicas: u64, limiter: &str) -> String {
    format!("{FLEET}[fleet]\nreplicas = {replicas}\nlimiter = \"{limiter}\"\n")
}

fn run(toml: &str) -> Summary {
    let s = scenario(toml).unwrap();
    Summary::new(&s, &sim::run(&s).unwrap())
}

#[test]
fn a_fleet_of_one_is_the_single_client() {
    let alone = run(FLEET).to_json();
    for limiter in ["local", "split", "shared"] {
        assert_eq!(run(&with_fleet(1, limiter)).to_json(), alone, "{limiter}");
    }
    assert!(
        !alone.contains("\"fleet\""),
        "no fleet section for one replica"
    );
}

#[test]
fn local_limiters_send_more_than_the_quota_split_and_shared_do_not() {
    // Four replicas each pacing itself to 540 a minute let the fleet ask for the whole 600 and
    // more: the provider's busiest minute is full and 103 requests get 429s.
    let local = run(&with_fleet(4, "local"));
    let c = local.provider.counters;
    assert_eq!((c.received, c.served, c.rate_limited), (1967, 1864, 103));
    assert_eq!(local.provider.peak_requests_per_60s, 600);
    // At 1/K each, or through one limiter, the fleet stays at 540 a minute plus the burst
    // (9 requests: 1 s of refill), and nothing is refused.
    for limiter in ["split", "shared"] {
        let s = run(&with_fleet(4, limiter));
        let c = s.provider.counters;
        assert_eq!((c.received, c.rate_limited), (1660, 0), "{limiter}");
        assert_eq!(s.provider.peak_requests_per_60s, 548, "{limiter}");
    }
}

#[test]
fn the_fleet_section_reports_the_spread_of_the_replicas() {
    // Sixteen sessions on four replicas, four each: the spread is the sessions' luck.
    let split = run(&with_fleet(4, "split")).fleet.expect("a fleet of four");
    assert_eq!((split.replicas, split.limiter.as_str()), (4, "split"));
    assert_eq!((split.queries_min, split.queries_max), (103, 104));
    assert_eq!(
        (split.queries_per_s_min, split.queries_per_s_max),
        (0.556, 0.561)
    );
    let shared = run(&with_fleet(4, "shared"))
        .fleet
        .expect("a fleet of four");
    assert_eq!((shared.queries_min, shared.queries_max), (99, 106));
}

#[test]
fn open_arrivals_go_round_robin() {
    // 1 query/s of one call, never limited: 60 queries, 15 to each of four replicas.
    let toml = r#"
name = "arrivals"
seed = 1
[provider]
latency = { dist = "constant", ms = 100 }
[workload]
mode = "open"
arrival_rate = 1.0
arrival = "constant"
queries = 60
calls_per_query = 1
tokens_per_call = 0
[fleet]
replicas = 4
"#;
    let f = run(toml).fleet.expect("a fleet of four");
    assert_eq!((f.queries_min, f.queries_max), (15, 15));
}

#[test]
fn bad_fleet_tables_are_refused_before_the_run() {
    let err = scenario(&with_fleet(0, "local")).unwrap_err();
    assert!(
        err.ends_with("fleet.replicas: must be from 1 to 1024, got 0"),
        "{err}"
    );
    let err = scenario(&with_fleet(2, "global")).unwrap_err();
    assert!(
        err.contains("unknown variant `global`, expected one of `local`, `split`, `shared`"),
        "{err}"
    );
    let err = scenario(&format!(
        "{FLEET}[fleet]
replica = 2
"
    ))
    .unwrap_err();
    assert!(err.contains("unknown field `replica`"), "{err}");
}
