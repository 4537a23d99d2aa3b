//! `capsize exec` against the binary: what the mock saw of an agent, counted exactly; bad input
//! (exit 2, nothing written); an agent that fails (reported, not an error); `--check` (0/1/2);
//! `--timeout`, SIGINT, SIGTERM and SIGHUP (the agent and everything it started stopped,
//! outputs written, exit 3 / 130 / 143 / 129; SIGKILL after the grace for an agent that ignores
//! SIGTERM), and nothing left running after any of them.
//!
//! The agent that sends requests is this test binary itself (the ignored test `agent`, run with
//! `CAPSIZE_EXEC_TEST_AGENT` set): plain HTTP/1.1 over a socket, so no client is needed.

#![allow(clippy::disallowed_methods)] // polls real processes on the real clock

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::temp::Temp;
use common::{capsize, stderr};

/// 5 requests a minute in whole minutes from the start; tool calls take 50 ms, a model turn
/// (`x-capsize-latency: model_turn`) 5 s.
const SCENARIO: &str = r#"
name = "exec-test"
seed = 3
[provider]
rpm = 5
window = "fixed"
latency = { dist = "constant", ms = 50 }
[workload]
queries = 1
calls_per_query = 1
tokens_per_call = 10
model_turn = { tokens = 10, latency = { dist = "constant", ms = 5000 } }
[slo]
"provider.rate_limited" = "<= 2"
orphaned_requests = "== 1"
"#;

const AGENT_ENV: &str = "CAPSIZE_EXEC_TEST_AGENT";

/// One attempt: POST /v1/chat/completions (path from OPENAI_BASE_URL) with `headers`; the
/// status, or `None` if the client gave up after `give_up`.
fn post(base: &str, headers: &[(&str, &str)], give_up: Duration) -> Option<u16> {
    let rest = base.strip_prefix("http://").expect("an http:// base");
    let (host, path) = rest.split_once('/').expect("a path in the base");
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let mut req = format!(
        "POST /{path}/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nx-capsize-tokens: 100\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = TcpStream::connect(host).expect("connect to the mock");
    s.set_read_timeout(Some(give_up)).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    match s.read_exact(&mut head) {
        Ok(()) => Some(String::from_utf8_lossy(&head[9..12]).parse().unwrap()),
        // Gave up: the socket is closed when dropped, before the answer.
        Err(_) => None,
    }
}

/// The agent, when this binary is run as one: a model turn it gives up on after 300 ms (charged:
/// the orphan), 6 first attempts (4 served, the minute's 5 spent, 2 refused), and a retry of
/// the last, linked by its Idempotency-Key (refused). It writes what it saw and was given.
#[test]
#[ignore = "the agent run by the other tests"]
fn agent() {
    let Ok(out) = std::env::var(AGENT_ENV) else {
        return;
    };
    let base = std::env::var("OPENAI_BASE_URL").unwrap();
    let long = Duration::from_secs(30);
    let mut seen = Vec::new();
    // First the model turn, charged then abandoned: the one orphan.
    seen.push(post(
        &base,
        &[
            ("x-capsize-latency", "model_turn"),
            ("x-stainless-retry-count", "0"),
        ],
        Duration::from_millis(300),
    ));
    for i in 0..6 {
        let key = format!("req-{i}");
        seen.push(post(
            &base,
            &[("idempotency-key", &key), ("x-stainless-retry-count", "0")],
            long,
        ));
    }
    // A retry of the last, linked by its key.
    seen.push(post(
        &base,
        &[
            ("idempotency-key", "req-5"),
            ("x-stainless-retry-count", "1"),
        ],
        long,
    ));
    let env: Vec<String> = [
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "CAPSIZE_MOCK_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ]
    .iter()
    .map(|k| format!("{k}={}", std::env::var(k).unwrap_or_default()))
    .collect();
    let addr = std::env::var("CAPSIZE_TEST_ADDR").unwrap_or_default();
    let report = format!("{seen:?}\n{}\n--addr={addr}\n", env.join("\n"));
    std::fs::write(out, report).unwrap();
}

/// `capsize exec SCENARIO --out OUT [extra] -- COMMAND...`.
fn exec(scenario: &Path, out: &Path, extra: &[&str], command: &[&str]) -> Output {
    let mut args = vec![
        "exec",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    capsize(&args)
}

fn summary(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).unwrap()
}

/// Whether process `pid` is gone (or a zombie nobody has collected yet), polled for up to 3 s.
fn gone(pid: i32) -> bool {
    for _ in 0..60 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
                if state == Some('Z') {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .expect("the agent wrote its background pid")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn what_the_agent_sent_is_counted_exactly() {
    let t = Temp::new("exec", "counted");
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let report = t.path("agent.txt");
    let me = std::env::current_exe().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args([
            "exec",
            scenario.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--",
        ])
        // The placeholder is an argument; the test harness takes no flags of ours, so a shell
        // hands it over in the environment.
        .args([
            "sh",
            "-c",
            "CAPSIZE_TEST_ADDR=\"$1\" exec \"$0\" agent --exact --ignored --quiet",
        ])
        .arg(&me)
        .arg("{address}")
        .env(AGENT_ENV, &report)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let agent = std::fs::read_to_string(&report).unwrap();
    // The model turn given up on; 4 more fit the minute's 5; the rest refused.
    assert!(
        agent.starts_with(
            "[None, Some(200), Some(200), Some(200), Some(200), Some(429), Some(429), Some(429)]"
        ),
        "{agent}"
    );
    let url = agent
        .lines()
        .find_map(|l| l.strip_prefix("CAPSIZE_MOCK_URL="))
        .unwrap()
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{agent}");
    assert!(
        agent.contains(&format!("OPENAI_BASE_URL={url}/v1\n")),
        "{agent}"
    );
    assert!(
        agent.contains(&format!("ANTHROPIC_BASE_URL={url}\n")),
        "{agent}"
    );
    assert!(
        agent.contains("OPENAI_API_KEY=capsize-exec-dummy-key\n"),
        "{agent}"
    );
    let host = url.strip_prefix("http://").unwrap();
    assert!(
        agent.contains(&format!("--addr={host}")),
        "{{address}} replaced: {agent}"
    );
    let s = summary(&out);
    assert_eq!(s["mode"], "exec");
    assert_eq!(s["agent"]["ended"], "exited");
    assert_eq!(s["agent"]["exit_code"], 0);
    let p = &s["provider"];
    assert_eq!(p["received"], 8, "{s}");
    assert_eq!(p["served"], 5);
    assert_eq!(p["rate_limited"], 3);
    assert_eq!(p["tokens_charged"], 500);
    assert_eq!(p["peak_requests_per_60s"], 5);
    assert_eq!(p["peak_tokens_per_60s"], 500);
    assert_eq!(s["orphaned_requests"], 1);
    assert_eq!(s["retries"], 1);
    assert_eq!(s["retry_wait_ms"]["count"], 1, "the retry linked to req-5");
    assert_eq!(s["in_flight"]["peak"], 1);
    assert_eq!(s["peak_rpm_utilization"], 1.0);
    for stem in ["requests_per_minute", "in_flight", "rate_limited"] {
        for ext in ["svg", "png"] {
            assert!(out.join(format!("{stem}.{ext}")).is_file(), "{stem}.{ext}");
        }
    }
    // The keys in a fixed order (read from the text: serde_json's map here sorts them).
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let keys: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  \""))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert_eq!(
        keys,
        [
            "schema_version",
            "scenario",
            "seed",
            "mode",
            "agent",
            "provider",
            "in_flight",
            "retries",
            "retry_wait_ms",
            "orphaned_requests",
            "rpm_utilization",
            "tpm_utilization",
            "peak_rpm_utilization"
        ]
    );
}

#[test]
fn check_gates_on_the_objectives() {
    let t = Temp::new("exec", "check");
    // No traffic: 0 429s passes "<= 2"; 0 orphans fails "== 1".
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let o = exec(&scenario, &out, &["--check"], &["true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("2 checks, 1 failed: objective orphaned_requests"),
        "{stdout}"
    );
    // Without the failing objective: 0.
    let passing = SCENARIO.replace("orphaned_requests = \"== 1\"", "");
    let scenario = t.write("p.toml", &passing);
    let o = exec(&scenario, &out, &["--check"], &["true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn an_agent_that_fails_is_reported_not_an_error() {
    let t = Temp::new("exec", "fails");
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let o = exec(&scenario, &out, &[], &["sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the agent failed: exit code 3"),
        "{}",
        stderr(&o)
    );
    let s = summary(&out);
    assert_eq!(s["agent"]["exit_code"], 3);
    assert_eq!(s["agent"]["ended"], "exited");
    // With --check, the objectives decide: "<= 2" 429s holds, "== 1" orphan does not.
    let o = exec(&scenario, &out, &["--check"], &["sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn bad_input_is_one_line_exit_2_and_nothing_written() {
    let t = Temp::new("exec", "bad");
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let one_line = |o: &Output, needle: &str| {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
        let err = stderr(o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle:?} in {err}");
        assert!(!out.exists(), "nothing written");
    };
    let o = exec(&scenario, &out, &[], &["capsize-no-such-command-7"]);
    one_line(&o, "capsize-no-such-command-7: command not found");
    // Missing `--`, and nothing after it: clap's errors.
    let s = scenario.to_str().unwrap();
    let o = capsize(&["exec", s, "--out", out.to_str().unwrap(), "true"]);
    one_line(&o, "unexpected argument 'true'");
    let o = capsize(&["exec", s, "--out", out.to_str().unwrap(), "--"]);
    one_line(&o, "<COMMAND>");
    let o = exec(&scenario, &out, &["--timeout", "0"], &["true"]);
    one_line(&o, "--timeout");
    // An objective on a metric exec does not have.
    let run_metric = SCENARIO.replace("orphaned_requests", "\"latency_ms.query.p95\"");
    let bad = t.write("bad.toml", &run_metric);
    let o = exec(&bad, &out, &["--check"], &["true"]);
    one_line(
        &o,
        "\"latency_ms.query.p95\" is not a metric of capsize exec's summary.json",
    );
    // Nothing to check.
    let none = t.write("none.toml", SCENARIO.split("[slo]").next().unwrap());
    let o = exec(&none, &out, &["--check"], &["true"]);
    one_line(&o, "nothing to check");
}

/// An agent that starts a long sleep in the background, writes its pid, and waits for it.
fn sleeper(pidfile: &Path) -> Vec<String> {
    let script = format!("sleep 300 & echo $! > '{}'; wait", pidfile.display());
    vec!["sh".into(), "-c".into(), script]
}

#[test]
fn a_timeout_stops_the_agent_and_all_it_started() {
    let t = Temp::new("exec", "timeout");
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let pidfile = t.path("pid");
    let cmd = sleeper(&pidfile);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let o = exec(&scenario, &out, &["--timeout", "1s"], &cmd);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(gone(read_pid(&pidfile)), "the background sleep was killed");
    let s = summary(&out);
    assert_eq!(s["agent"]["ended"], "timed_out");
    assert_eq!(s["agent"]["signal"], 15, "{s}");
}

#[test]
fn an_agent_that_ignores_sigterm_is_killed_after_the_grace() {
    let t = Temp::new("exec", "stubborn");
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let pidfile = t.path("pid");
    // An ignored signal stays ignored in the children: neither the shell nor its sleep goes.
    let script = format!(
        "trap '' TERM; sleep 300 & echo $! > '{}'; wait",
        pidfile.display()
    );
    let o = exec(
        &scenario,
        &out,
        &["--timeout", "500ms"],
        &["sh", "-c", &script],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(gone(read_pid(&pidfile)));
    let s = summary(&out);
    assert_eq!(s["agent"]["signal"], 9, "SIGKILL after the grace: {s}");
    assert!(s["agent"]["wall_seconds"].as_f64().unwrap() >= 5.5, "{s}");
}

#[test]
fn what_the_agent_leaves_running_when_it_exits_is_killed() {
    let t = Temp::new("exec", "leftover");
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let pidfile = t.path("pid");
    let script = format!("sleep 300 & echo $! > '{}'", pidfile.display());
    let o = exec(&scenario, &out, &[], &["sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(gone(read_pid(&pidfile)));
    assert_eq!(summary(&out)["agent"]["exit_code"], 0);
}

/// Starts `capsize exec` on the sleeper, waits for its pid file, sends `sig` to capsize.
fn interrupted(name: &str, sig: i32) -> (Output, i32, PathBuf, Temp) {
    let t = Temp::new("exec", name);
    let scenario = t.write("s.toml", SCENARIO);
    let out = t.path("o");
    let pidfile = t.path("pid");
    let child = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args([
            "exec",
            scenario.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--",
        ])
        .args(sleeper(&pidfile))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n')) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = read_pid(&pidfile);
    // SAFETY: kill only sends a signal to the capsize process this test started.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let o = child.wait_with_output().unwrap();
    (o, pid, out, t)
}

#[test]
fn sigint_stops_the_agent_and_all_it_started() {
    let (o, pid, out, _t) = interrupted("sigint", libc::SIGINT);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(gone(pid), "the background sleep was killed");
    let s = summary(&out);
    assert_eq!(s["agent"]["ended"], "interrupted");
}

#[test]
fn sigterm_stops_the_agent_and_all_it_started() {
    let (o, pid, out, _t) = interrupted("sigterm", libc::SIGTERM);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(gone(pid), "the background sleep was killed");
    assert_eq!(summary(&out)["agent"]["ended"], "interrupted");
}

#[test]
fn a_hangup_stops_the_agent_and_all_it_started() {
    // The terminal or ssh session closing must not orphan the agent.
    let (o, pid, out, _t) = interrupted("sighup", libc::SIGHUP);
    assert_eq!(o.status.code(), Some(129), "{}", stderr(&o));
    assert!(gone(pid), "the background sleep was killed");
    assert_eq!(summary(&out)["agent"]["ended"], "interrupted");
}
