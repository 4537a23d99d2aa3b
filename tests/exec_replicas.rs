//! Agents that scale out (`capsize exec --replica I/K --target URL --fleet-redis URL`): three
//! `capsize exec` processes, each running one agent of 15 requests, send to one `capsize mock`
//! with 30 requests a minute (a fixed window from the reset). They start together on one
//! redis-server after the first has reset the mock (the request sent before is not counted),
//! and `capsize merge` makes the fleet's summary: exactly 45 received, 30 served, 15 refused,
//! the busiest minute 30, what the mock itself counted, and what one agent of 45 requests in
//! one process makes of the same mock. What cannot be a replica is refused in one line.
//!
//! The agent is this test binary itself (the ignored test `agent`, run with
//! `CAPSIZE_REPLICA_TEST_AGENT` set to its number of requests): plain HTTP/1.1 over a socket.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real processes, a real clock

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::redis::Redis;
use common::temp::Temp;
use common::{capsize, get_json, merge_tampered, read_json, spawn_mock, stderr};
use serde_json::Value;

/// 30 requests a minute, in whole minutes from the start (the reset); calls take 20 ms.
const SCENARIO: &str = r#"
name = "exec-replicas"
seed = 5
[provider]
rpm = 30
window = "fixed"
latency = { dist = "constant", ms = 20 }
[workload]
queries = 1
calls_per_query = 1
tokens_per_call = 10
"#;

const AGENT_ENV: &str = "CAPSIZE_REPLICA_TEST_AGENT";

/// One request to the mock at `host` (HOST:PORT): its status.
fn post(host: &str, path: &str) -> u16 {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let req = format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nx-capsize-tokens: 10\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(host).expect("connect to the mock");
    s.write_all(req.as_bytes()).expect("send");
    let mut head = [0u8; 12];
    s.read_exact(&mut head).expect("an answer");
    String::from_utf8_lossy(&head[9..12])
        .parse()
        .expect("a status")
}

/// The agent, when this binary is run as one: its number of requests, one after another, to
/// the mock in OPENAI_BASE_URL.
#[test]
#[ignore = "the agent run by the other tests"]
fn agent() {
    let Ok(n) = std::env::var(AGENT_ENV) else {
        return;
    };
    let base = std::env::var("OPENAI_BASE_URL").expect("exec gives the mock's URL");
    let rest = base.strip_prefix("http://").expect("an http:// base");
    let (host, path) = rest.split_once('/').expect("a path in the base");
    for _ in 0..n.parse::<u32>().expect("a count") {
        post(host, &format!("/{path}/chat/completions"));
    }
}

/// The command that runs this binary as the agent of `n` requests.
fn agent_command(n: u32) -> Vec<String> {
    vec![
        "env".into(),
        format!("{AGENT_ENV}={n}"),
        std::env::current_exe()
            .expect("the test binary")
            .to_string_lossy()
            .into_owned(),
        "agent".into(),
        "--exact".into(),
        "--ignored".into(),
        "--quiet".into(),
    ]
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not a count: {v}"))
}

#[test]
fn three_agents_start_together_and_merge_into_one_summary() {
    let t = Temp::new("exec-replicas", "fleet");
    let file = t.write("agents.toml", SCENARIO);
    let f = file.to_str().expect("UTF-8");
    let redis = Redis::start();
    let (mut mock, target) = spawn_mock(&file, "1");
    // Traffic before the run: the first replica's reset clears it.
    let host = target.trim_start_matches("http://");
    assert_eq!(post(host, "/v1/chat/completions"), 200);
    let out = t.path("out");
    let run_id = format!("exec-replicas-{}", std::process::id());
    let children: Vec<_> = (1..=3)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_capsize"))
                .args([
                    "exec",
                    f,
                    "--target",
                    &target,
                    "--fleet-redis",
                    &redis.url(),
                ])
                .args(["--replica", &format!("{i}/3"), "--run-id", &run_id])
                .args(["--out", out.to_str().expect("UTF-8"), "--"])
                .args(agent_command(15))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("capsize runs")
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().expect("a replica ends");
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(0),
            "replica {}: {}",
            i + 1,
            stderr(&o)
        );
        assert!(
            said.contains(&format!(
                "replica {}/3 of run {run_id} (exec-replicas): agent ok: exit code 0",
                i + 1
            )),
            "{said}"
        );
        assert!(said.contains("capsize merge"), "{said}");
        let folder = out.join(format!("replica-{}-of-3", i + 1));
        let names: Vec<String> = std::fs::read_dir(&folder)
            .expect("the replica's folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["replica.json"], "a replica writes its record only");
    }
    let stats = get_json(&target, "/stats");
    let merged = t.path("merged");
    let o = capsize(&[
        "merge",
        out.to_str().expect("UTF-8"),
        "--out",
        merged.to_str().expect("UTF-8"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains(&format!("merged 3 replicas of run {run_id}")),
        "{said}"
    );
    let fleet = read_json(&merged.join("summary.json"));
    // A record whose counts do not add up is refused, naming it (received = served + 429s +
    // errors + never answered, as the mock's always do).
    let (o, at) = merge_tampered(&out, &["1-of-3"], |r| {
        r["outcome"]["report"]["counters"]["received"] = u64::MAX.into()
    });
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let record = at
        .with_file_name("tampered")
        .join("replica-1-of-3/replica.json");
    let says = format!(
        "capsize: {}: report.counters: received {} is not served ",
        record.display(),
        u64::MAX
    );
    assert!(err.starts_with(&says) && err.lines().count() == 1, "{err}");
    assert!(!at.exists());
    for stem in [
        "requests_per_minute",
        "tokens_per_minute",
        "in_flight",
        "rate_limited",
    ] {
        assert!(merged.join(format!("{stem}.svg")).is_file(), "{stem}.svg");
        assert!(merged.join(format!("{stem}.png")).is_file(), "{stem}.png");
    }
    // 45 requests in the first minute against 30 a minute: 30 served, 15 refused, exactly;
    // the request before the reset is not the fleet's.
    let counts = |s: &Value| {
        [
            num(s, &["provider", "received"]),
            num(s, &["provider", "served"]),
            num(s, &["provider", "rate_limited"]),
            num(s, &["provider", "peak_requests_per_60s"]),
        ]
    };
    assert_eq!(counts(&fleet), [45, 30, 15, 30], "{fleet}");
    assert_eq!(
        [num(&stats, &["received"]), num(&stats, &["served"])],
        [45, 30],
        "the merged provider is what the mock counted: {stats}"
    );
    assert_eq!(fleet["mode"], "exec");
    let agents = fleet["replicas"].as_array().expect("the fleet's agents");
    assert_eq!(agents.len(), 3, "{fleet}");
    let mut longest = 0.0f64;
    for a in agents {
        assert_eq!(
            (a["ended"].as_str(), a["exit_code"].as_i64()),
            (Some("exited"), Some(0))
        );
        assert_eq!(a["command"][1], format!("{AGENT_ENV}=15"));
        longest = longest.max(a["wall_seconds"].as_f64().expect("a wall time"));
    }
    assert_eq!(fleet["agent"]["wall_seconds"].as_f64(), Some(longest));
    assert_eq!(fleet["agent"]["exit_code"], 0);

    // One agent of 45 requests in one process, against the same mock: the same counts.
    let one = t.path("one");
    let mut args = vec![
        "exec",
        f,
        "--target",
        &target,
        "--out",
        one.to_str().expect("UTF-8"),
        "--",
    ];
    let command = agent_command(45);
    args.extend(command.iter().map(String::as_str));
    let o = capsize(&args);
    let _ = mock.kill();
    let _ = mock.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("not recorded here (no calls.jsonl)"),
        "{said}"
    );
    assert!(!one.join("calls.jsonl").exists());
    let single = read_json(&one.join("summary.json"));
    assert_eq!(counts(&single), counts(&fleet), "{single}");
    assert!(
        single.get("replicas").is_none(),
        "one agent has no replicas list: {single}"
    );
}

#[test]
fn what_cannot_be_an_agents_replica_is_refused_in_one_line() {
    let t = Temp::new("exec-replicas", "refused");
    let file = t.write("agents.toml", SCENARIO);
    let f = file.to_str().expect("UTF-8");
    let out = t.path("out");
    let o_ = out.to_str().expect("UTF-8");
    let refused = |args: &[&str], code: i32, says: &str| {
        let mut all = vec!["exec", f, "--out", o_];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "true"]);
        let o = capsize(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing written");
        err
    };
    let one_line = |err: String| assert_eq!(err.lines().count(), 1, "{err}");
    one_line(refused(
        &["--replica", "1/2", "--run-id", "r"],
        2,
        "give --target URL",
    ));
    one_line(refused(
        &[
            "--replica",
            "1/2",
            "--run-id",
            "r",
            "--target",
            "http://127.0.0.1:9",
        ],
        2,
        "give --fleet-redis",
    ));
    one_line(refused(
        &["--target", "127.0.0.1:9"],
        2,
        "must be an http:// URL",
    ));
    // Nothing listens at the target: exit 4, naming it.
    one_line(refused(
        &["--target", "http://127.0.0.1:9"],
        4,
        "http://127.0.0.1:9/healthz",
    ));
    // clap's own: flags that need another, or exclude one.
    refused(&["--replica", "1/2"], 2, "--run-id");
    refused(
        &["--fleet-redis", "redis://127.0.0.1:9"],
        2,
        "required arguments",
    );
    refused(
        &["--replica", "1/2", "--run-id", "r", "--check"],
        2,
        "cannot be used with",
    );
    // A mock of another provider is refused before the agent runs.
    let other = t.write("other.toml", &SCENARIO.replace("rpm = 30", "rpm = 31"));
    let (mut mock, target) = spawn_mock(&other, "1");
    let err = refused(&["--target", &target], 2, "serves another provider");
    let _ = mock.kill();
    let _ = mock.wait();
    one_line(err);
    // A replica alone waits for the others, then names the missing (exit 4).
    let redis = Redis::start();
    let (mut mock, target) = spawn_mock(&file, "1");
    let err = refused(
        &[
            "--replica",
            "1/2",
            "--run-id",
            &format!("alone-{}", std::process::id()),
            "--target",
            &target,
            "--fleet-redis",
            &redis.url(),
            "--join-timeout",
            "1",
        ],
        4,
        "missing 2/2",
    );
    let _ = mock.kill();
    let _ = mock.wait();
    one_line(err);
}
