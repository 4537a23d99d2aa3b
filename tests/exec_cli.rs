//! `capsize exec` against the binary: what the mock saw of an agent, counted exactly; bad input
//! (exit 2, nothing written); an agent that fails (reported, not an error); `--check` (0/1/2);
//! `--timeout`, SIGINT, SIGTERM and SIGHUP (the agent and everything it started stopped,
//! outputs written, exit 3 / 130 / 143 / 129; SIGKILL after the grace for an agent that ignores
//! SIGTERM), and nothing left running after any of them, nor after SIGKILL to capsize itself;
//! the metrics `--check` accepts (exactly those summary.json has); one provider, whatever the
//! workload sends to none.
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
price = { input_per_mtok = 3.0, output_per_mtok = 15.0 }
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
/// The W3C trace context the agent sends with its first served request.
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

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

/// POST /v1/traces to `endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT) with an OTLP JSON body: the
/// status.
fn post_traces(endpoint: &str) -> u16 {
    let host = endpoint
        .strip_prefix("http://")
        .expect("an http:// endpoint");
    let body = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}"#;
    let req = format!(
        "POST /v1/traces HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(host).expect("connect to the mock");
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
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
        let mut headers = vec![
            ("idempotency-key", key.as_str()),
            ("x-stainless-retry-count", "0"),
        ];
        if i == 0 {
            headers.push(("traceparent", TRACEPARENT));
        }
        seen.push(post(&base, &headers, long));
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
    let traces = post_traces(&std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap());
    let report = format!(
        "{seen:?}\n{}\n--addr={addr}\ntraces={traces}\n",
        env.join("\n")
    );
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

/// The `i`-th number the agent wrote into `path`.
fn read_number(path: &Path, i: usize) -> i32 {
    std::fs::read_to_string(path)
        .expect("the agent wrote its pids")
        .split_whitespace()
        .nth(i)
        .expect("one number more")
        .parse()
        .unwrap()
}

/// The background sleep's pid, first in the file the agent wrote.
fn read_pid(path: &Path) -> i32 {
    read_number(path, 0)
}

/// The live (not zombie) processes of process group `pgid`.
fn members(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's name: state, ppid, pgrp, ...
        let fields: Vec<&str> = stat.rsplit(") ").next().unwrap().split(' ').collect();
        if fields[0] != "Z" && fields[2].parse() == Ok(pgid) {
            found.push(pid);
        }
    }
    found
}

/// Whether process group `pgid` has no live process left, polled for up to 3 s.
fn group_gone(pgid: i32) -> bool {
    for _ in 0..60 {
        if members(pgid).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Waits (up to 10 s) until the agent has written `path` whole.
fn wait_for(path: &Path) {
    for _ in 0..200 {
        if std::fs::read_to_string(path).is_ok_and(|s| s.ends_with('\n')) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Shell words that write `WORDS` and the shell's process group into `path` at once.
fn write_with_group(words: &str, path: &Path) -> String {
    let tmp = format!("{}.tmp", path.display());
    format!(
        "echo \"{words} $(cut -d' ' -f5 /proc/$$/stat)\" > '{tmp}' && mv '{tmp}' '{}'",
        path.display()
    )
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
    // Five answers billed, 100 prompt tokens each at $3 a million (3e6 picodollars a token):
    // 1.5e9 p$; the model turn's was orphaned (its client hung up first): 3e8 p$ wasted.
    let c = &s["cost"];
    assert_eq!(c["total_usd"], 0.0015, "{c}");
    assert_eq!(c["wasted_usd"], 0.0003, "{c}");
    assert_eq!(c["wasted_share"], 0.2, "{c}");
    assert_eq!(c["input_tokens"], 500, "{c}");
    // The table names the limit the agent came closest to (no TPM here: the RPM).
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("\n  closest limit  the provider's RPM: 100.0 % in the busiest 60 s (5 of 5 requests)\n"),
        "{table}"
    );
    for stem in [
        "requests_per_minute",
        "tokens_per_minute",
        "in_flight",
        "rate_limited",
    ] {
        for ext in ["svg", "png"] {
            assert!(out.join(format!("{stem}.{ext}")).is_file(), "{stem}.{ext}");
        }
    }
    // Every request the mock saw, as calibrate reads it: in arrival order, the one given up on
    // with no status, the retry counts and the trace context as sent.
    let calls = std::fs::read_to_string(out.join("calls.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = calls
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let statuses: Vec<u64> = lines
        .iter()
        .map(|l| l["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [0, 200, 200, 200, 200, 429, 429, 429], "{calls}");
    assert!(lines
        .iter()
        .all(|l| l["route"] == "model" && l["provider"] == "provider"));
    assert_eq!(lines[7]["retry_count"], 1);
    assert_eq!(lines[1]["traceparent"], TRACEPARENT);
    assert_eq!(lines[1]["rpm_limit"], 5.0, "the limit its headers gave");
    assert!(lines
        .windows(2)
        .all(|w| w[0]["unix_ns"].as_i64() <= w[1]["unix_ns"].as_i64()));
    // The traces the agent exported are kept as they came, one request a line.
    assert!(agent.contains("traces=200"), "{agent}");
    assert_eq!(
        std::fs::read_to_string(out.join("traces.jsonl")).unwrap(),
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[]}]}]}\n"
    );
    assert!(table.contains("recorded 8 requests in"), "{table}");
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
            "capsize_version",
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
            "peak_rpm_utilization",
            "peak_tpm_utilization",
            "cost"
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

/// An agent that starts a long sleep in the background, writes its pid (and its own, and its
/// process group), and waits for it.
fn sleeper(pidfile: &Path) -> Vec<String> {
    let script = format!("sleep 300 & {}; wait", write_with_group("$! $$", pidfile));
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
    let group = read_number(&pidfile, 2);
    assert!(group_gone(group), "left in the group: {:?}", members(group));
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
        "trap '' TERM; sleep 300 & {}; wait",
        write_with_group("$! $$", &pidfile)
    );
    let o = exec(
        &scenario,
        &out,
        &["--timeout", "500ms"],
        &["sh", "-c", &script],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(gone(read_pid(&pidfile)));
    let group = read_number(&pidfile, 2);
    assert!(group_gone(group), "left in the group: {:?}", members(group));
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
    let script = format!("sleep 300 & {}", write_with_group("$! $$", &pidfile));
    let o = exec(&scenario, &out, &[], &["sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(gone(read_pid(&pidfile)));
    // Nothing at all is left in the agent's group (its leader, capsize's watchdog, included).
    let group = read_number(&pidfile, 2);
    assert!(group_gone(group), "left in the group: {:?}", members(group));
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
    wait_for(&pidfile);
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
    let (o, pid, out, t) = interrupted("sigint", libc::SIGINT);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(gone(pid), "the background sleep was killed");
    let group = read_number(&t.path("pid"), 2);
    assert!(group_gone(group), "left in the group: {:?}", members(group));
    let s = summary(&out);
    assert_eq!(s["agent"]["ended"], "interrupted");
    assert_eq!(s["agent"]["signal"], 15, "{s}");
}

#[test]
fn sigkill_to_capsize_takes_the_agent_and_all_it_started() {
    // SIGKILL cannot be handled: the agent's group must go without capsize's help.
    let t = Temp::new("exec", "sigkill");
    let scenario = t.write("s.toml", SCENARIO);
    let pidfile = t.path("pid");
    let mut child = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(["exec", scenario.to_str().unwrap(), "--out"])
        .arg(t.path("o"))
        .arg("--")
        .args(sleeper(&pidfile))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&pidfile);
    let (sleep, agent, group) = (
        read_number(&pidfile, 0),
        read_number(&pidfile, 1),
        read_number(&pidfile, 2),
    );
    let before = members(group);
    assert!(
        before.contains(&sleep) && before.contains(&agent),
        "{before:?}"
    );
    // SAFETY: kill only sends a signal to the capsize process this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    assert!(gone(agent), "the agent was killed");
    assert!(gone(sleep), "the agent's background sleep was killed");
    assert!(group_gone(group), "left in the group: {:?}", members(group));
    assert!(
        !t.path("o").join("summary.json").exists(),
        "nothing written"
    );
}

#[test]
fn sigterm_stops_the_agent_and_all_it_started() {
    let (o, pid, out, t) = interrupted("sigterm", libc::SIGTERM);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(gone(pid), "the background sleep was killed");
    let group = read_number(&t.path("pid"), 2);
    assert!(group_gone(group), "left in the group: {:?}", members(group));
    assert_eq!(summary(&out)["agent"]["ended"], "interrupted");
}

#[test]
fn a_hangup_stops_the_agent_and_all_it_started() {
    // The terminal or ssh session closing must not orphan the agent.
    let (o, pid, out, t) = interrupted("sighup", libc::SIGHUP);
    assert_eq!(o.status.code(), Some(129), "{}", stderr(&o));
    assert!(gone(pid), "the background sleep was killed");
    let group = read_number(&t.path("pid"), 2);
    assert!(group_gone(group), "left in the group: {:?}", members(group));
    assert_eq!(summary(&out)["agent"]["ended"], "interrupted");
}

/// Every metric of exec's summary.json, in the file's order: what `--check` accepts.
const EXEC_METRICS: [&str; 37] = [
    "schema_version",
    "seed",
    "agent.exit_code",
    "agent.signal",
    "agent.wall_seconds",
    "provider.received",
    "provider.served",
    "provider.rate_limited",
    "provider.errored",
    "provider.timed_out",
    "provider.tokens_charged",
    "provider.peak_requests_per_60s",
    "provider.peak_tokens_per_60s",
    "in_flight.peak",
    "in_flight.mean",
    "retries",
    "retry_wait_ms.count",
    "retry_wait_ms.mean",
    "retry_wait_ms.p50",
    "retry_wait_ms.p90",
    "retry_wait_ms.p95",
    "retry_wait_ms.p99",
    "retry_wait_ms.max",
    "orphaned_requests",
    "rpm_utilization",
    "tpm_utilization",
    "peak_rpm_utilization",
    "peak_tpm_utilization",
    "cost.total_usd",
    "cost.wasted_usd",
    "cost.wasted_share",
    "cost.input_tokens",
    "cost.cached_input_tokens",
    "cost.output_tokens",
    "cost.input_usd",
    "cost.cached_input_usd",
    "cost.output_usd",
];

/// The dotted paths of the numbers and nulls in `v`, in the text's order (`text` is the file).
fn numeric_paths(text: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut out = capsize::api::summary::metric_paths(&v);
    // serde_json's map is sorted: put them back in the file's order.
    let line = |p: &String| {
        let last = p.rsplit('.').next().unwrap();
        let top = p.split('.').next().unwrap();
        let from = text.find(&format!("\n  \"{top}\":")).unwrap();
        from + text[from..].find(&format!("\"{last}\":")).unwrap()
    };
    out.sort_by_key(line);
    out
}

#[test]
fn check_accepts_exactly_the_metrics_summary_json_has() {
    let t = Temp::new("exec", "metrics");
    let base = SCENARIO
        .split("[slo]")
        .next()
        .unwrap()
        .replace("rpm = 5\n", "rpm = 5\ntpm = 100000\n");
    let slo: String = EXEC_METRICS
        .iter()
        .map(|m| format!("\"{m}\" = \">= 0\"\n"))
        .collect();
    let scenario = t.write("s.toml", &format!("{base}[slo]\n{slo}"));
    let out = t.path("o");
    let o = exec(&scenario, &out, &["--check"], &["true"]);
    // Each one accepted and checked; only the signal of an agent that exited has no value.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("37 checks, 1 failed: objective agent.signal"),
        "{stdout}"
    );
    // ... and they are every number summary.json holds.
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert_eq!(numeric_paths(&text), EXEC_METRICS);

    // What only capsize's own client measures is refused, saying so, with what exec has.
    for metric in [
        "generation.calls",
        "generation.output_tokens_per_s",
        "fleet.replicas",
        "concurrency_limit.mean",
        "latency_ms.query.p95",
    ] {
        let scenario = t.write("r.toml", &format!("{base}[slo]\n\"{metric}\" = \">= 1\"\n"));
        let o = exec(&scenario, &t.path("r"), &["--check"], &["true"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(
            stderr(&o),
            format!(
                "capsize: {}: [slo]: \"{metric}\" is not a metric of capsize exec's summary.json (capsize run measures it on capsize's own client; exec sees only what the mock saw of the agent); it has agent.*, provider.*, in_flight.*, retries, retry_wait_ms.*, orphaned_requests, rpm_utilization, tpm_utilization, peak_rpm_utilization, peak_tpm_utilization, cost.*\n",
                scenario.display()
            )
        );
        assert!(!t.path("r").exists(), "nothing written");
    }
    // A typo: the same line without the clause about capsize run.
    let scenario = t.write(
        "r.toml",
        &format!("{base}[slo]\n\"provider.recieved\" = \">= 1\"\n"),
    );
    let o = exec(&scenario, &t.path("r"), &["--check"], &["true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\"provider.recieved\" is not a metric of capsize exec's summary.json; it has agent.*, provider.*,"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_exec_generation_reproducer_is_refused_as_a_run_metric() {
    // A generating provider: exec serves it, but the answers' tokens and timings reach only the
    // agent, so generation.* is not in exec's summary.json, and an objective on it is refused.
    let t = Temp::new("exec", "generation");
    let scenario = t.write(
        "g.toml",
        r#"
name = "exec-gen"
seed = 5
[provider]
rpm = 600
tpm = 1000000
latency = { dist = "constant", ms = 50 }
output_tokens = { dist = "uniform", min = 100, max = 200 }
ttft = { dist = "constant", ms = 200 }
tpot = { dist = "constant", ms = 10 }
[workload]
queries = 1
calls_per_query = 1
tokens_per_call = 10
[slo]
"generation.calls" = ">= 1"
"#,
    );
    let out = t.path("o");
    let o = exec(&scenario, &out, &["--check"], &["true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("capsize run measures it"),
        "{}",
        stderr(&o)
    );
    // Without --check it runs, and writes no generation section.
    let o = exec(&scenario, &out, &[], &["true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&out);
    for absent in ["generation", "fleet", "concurrency_limit"] {
        assert!(s.get(absent).is_none(), "{absent}: {s}");
    }
}

/// Two named providers, and a tool served by none.
const TWO_PROVIDERS: &str = r#"
name = "exec-two"
seed = 1
[providers.llm]
rpm = 5
window = "fixed"
latency = { dist = "constant", ms = 50 }
[providers.search]
rpm = 600
latency = { dist = "constant", ms = 10 }
[workload]
queries = 1
calls_per_query = 1
tokens_per_call = 0
provider = "search"
model_turn = { tokens = 10, provider = "llm", latency = { dist = "constant", ms = 5000 } }
tools = [
  { name = "web_search", weight = 1 },
  { name = "calculator", weight = 1, provider = "none", latency = { dist = "constant", ms = 5 } },
]
"#;

#[test]
fn tools_sent_to_no_provider_do_not_count_as_a_provider() {
    let t = Temp::new("exec", "none");
    let out = t.path("o");
    // Two providers and `none`: two, named.
    let two = t.write("two.toml", TWO_PROVIDERS);
    let o = exec(&two, &out, &[], &["true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "capsize: capsize exec serves one provider, but this scenario has 2: llm, search (give it one [provider] table)\n"
    );
    assert!(!out.exists(), "nothing written");
    // One provider and `none`: served, its limits the mock's (5 a minute, in whole minutes).
    let one = TWO_PROVIDERS
        .replace(
            "[providers.search]\nrpm = 600\nlatency = { dist = \"constant\", ms = 10 }\n",
            "",
        )
        .replace("provider = \"search\"\n", "provider = \"none\"\n")
        .replace("  { name = \"web_search\", weight = 1 },\n", "");
    let one = t.write("one.toml", &one);
    let me = std::env::current_exe().unwrap();
    let report = t.path("agent.txt");
    let o = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args([
            "exec",
            one.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--",
        ])
        .arg(&me)
        .args(["agent", "--exact", "--ignored", "--quiet"])
        .env(AGENT_ENV, &report)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&out);
    assert_eq!(s["provider"]["received"], 8, "{s}");
    assert_eq!(s["provider"]["served"], 5, "{s}");
    assert_eq!(s["provider"]["rate_limited"], 3, "{s}");
    assert_eq!(s["peak_rpm_utilization"], 1.0, "{s}");
}

#[test]
fn exec_asks_only_for_the_provider_it_serves() {
    // No [workload]: exec never runs one, so it does not ask for one.
    let t = Temp::new("exec", "provider-only");
    let scenario = t.write(
        "s.toml",
        "name = \"bare\"\n\n[provider]\nrpm = 60\nlatency = { dist = \"constant\", ms = 10 }\n\n[slo]\n\"provider.rate_limited\" = \"== 0\"\n",
    );
    let out = t.path("o");
    let o = exec(&scenario, &out, &["--check"], &["true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(summary(&out)["scenario"], "bare");
    // A value it does use is still checked, at its line and column.
    let bad = t.write(
        "bad.toml",
        "name = \"bare\"\n\n[provider]\nrpm = 60\nlatency = { dist = \"constant\", ms = -1 }\n",
    );
    let o = exec(&bad, &t.path("b"), &[], &["true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with(&format!(
            "capsize: {}:5:32: provider.latency.ms: must be a number of ms",
            bad.display()
        )),
        "{}",
        stderr(&o)
    );
}
