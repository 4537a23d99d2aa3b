//! The `capsize-mock` binary as a user runs it: the address as the first line on stdout, exit 0
//! on SIGTERM, exit 2 and one line on stderr for a bad flag or a bad scenario file, exit 1 for a
//! port in use, and a scenario's `[provider]`, `seed` and `[workload.model_turn] latency` used
//! (every other table ignored).

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_capsize-mock");

/// Runs the binary to completion (for runs that must fail before serving).
fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

/// Asserts `out` failed with code `code` and exactly one line on stderr containing `needles`.
fn assert_one_line_failure(out: &Output, code: i32, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
    assert!(err.starts_with("capsize-mock: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err:?}");
    }
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A fresh folder for scenario files.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capsize-mock-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Spawns the binary serving, and returns it with the URI it printed first.
fn spawn(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .expect("a first line");
    (child, first.trim_end().to_string())
}

/// A bare HTTP/1.1 request; returns the status code and the body.
fn http(
    uri: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let addr = uri.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp[9..12].parse().unwrap();
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// Sends SIGTERM and waits (at most 10 s) for the exit code.
async fn terminate(mut child: Child) -> Option<i32> {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    panic!("did not stop within 10 s of SIGTERM");
}

#[tokio::test]
async fn prints_its_address_first_serves_and_exits_0_on_sigterm() {
    let (child, uri) = spawn(&[
        "--port",
        "0",
        "--rpm",
        "1",
        "--retry-after",
        "5",
        "--time-scale",
        "10",
    ]);
    let port: u16 = uri
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("first line {uri:?}"))
        .parse()
        .expect("a port");
    assert_ne!(port, 0);
    assert_eq!(
        http(&uri, "GET", "/healthz", &[], ""),
        (200, "ok".to_string())
    );
    let chat = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}"#;
    assert_eq!(http(&uri, "POST", "/v1/chat/completions", &[], chat).0, 200);
    assert_eq!(http(&uri, "POST", "/v1/chat/completions", &[], chat).0, 429);
    assert_eq!(terminate(child).await, Some(0));
}

#[test]
fn a_bad_flag_is_one_line_and_exit_2() {
    assert_one_line_failure(&run(&["--bogus"]), 2, &["--bogus"]);
    assert_one_line_failure(&run(&["--rpm", "lots"]), 2, &["--rpm"]);
    assert_one_line_failure(&run(&["--time-scale", "0"]), 2, &["--time-scale"]);
    assert_one_line_failure(&run(&["--rpm", "0.5"]), 2, &["provider.rpm"]);
    assert_one_line_failure(
        &run(&["--retry-after", "soon"]),
        2,
        &["provider.retry_after"],
    );
    assert_one_line_failure(&run(&["--window", "weekly"]), 2, &["--window"]);
}

#[test]
fn a_bad_scenario_file_is_one_line_and_exit_2() {
    let dir = temp_dir("bad");
    let cases = [
        ("syntax.toml", "seed = 1\n[provider\nrpm = 5\n", vec!["syntax.toml", "line 2"]),
        (
            "rpm.toml",
            "[provider]\nrpm = -1\nlatency = { dist = \"constant\", ms = 1 }\n",
            vec!["rpm.toml", "provider.rpm"],
        ),
        (
            "unknown.toml",
            "[provider]\nrpms = 5\nlatency = { dist = \"constant\", ms = 1 }\n",
            vec!["unknown.toml", "rpms"],
        ),
        ("none.toml", "seed = 3\n[workload]\nsessions = 1\n", vec!["none.toml", "[provider]"]),
        (
            "turn.toml",
            "[provider]\nlatency = { dist = \"constant\", ms = 1 }\n[workload.model_turn]\nlatency = { dist = \"uniform\", min_ms = 5, max_ms = 1 }\n",
            vec!["turn.toml", "workload.model_turn.latency"],
        ),
    ];
    for (name, text, needles) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = run(&["--scenario", path.to_str().unwrap()]);
        assert_one_line_failure(&out, 2, &needles);
    }
    let missing = dir.join("missing.toml");
    let out = run(&["--scenario", missing.to_str().unwrap()]);
    assert_one_line_failure(&out, 2, &["missing.toml", "cannot read"]);
    // A device is refused at once, not read until memory runs out.
    let out = run(&["--scenario", "/dev/zero"]);
    assert_one_line_failure(
        &out,
        2,
        &["/dev/zero: cannot read: not a regular file (a character device)"],
    );
}

#[test]
fn a_port_in_use_is_exit_1() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    assert_one_line_failure(&run(&["--port", &port]), 1, &["cannot listen"]);
}

#[tokio::test]
async fn a_scenario_gives_the_provider_and_the_model_turn_latency() {
    let dir = temp_dir("ok");
    let path = dir.join("s.toml");
    let text = "name = \"x\"\nseed = 9\n\n[provider]\nrpm = 600\nlatency = { dist = \"constant\", ms = 1 }\n\n\
        [workload]\nsessions = 2\nmodel_turn = { tokens = 10, latency = { dist = \"constant\", ms = 300 } }\n\n\
        [scheduler]\nmax_concurrency = 4\n";
    std::fs::write(&path, text).unwrap();
    // A flag overrides the scenario's key.
    let (child, uri) = spawn(&["--scenario", path.to_str().unwrap(), "--rpm", "2"]);
    let chat = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}"#;
    let t0 = tokio::time::Instant::now();
    let turn = [("x-capsize-latency", "model_turn")];
    assert_eq!(
        http(&uri, "POST", "/v1/chat/completions", &turn, chat).0,
        200
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(295),
        "{:?}",
        t0.elapsed()
    );
    let (status, body) = http(
        &uri,
        "POST",
        "/v1/chat/completions",
        &[("x-capsize-latency", "other")],
        chat,
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(http(&uri, "POST", "/v1/chat/completions", &[], chat).0, 200);
    assert_eq!(http(&uri, "POST", "/v1/chat/completions", &[], chat).0, 429);
    assert_eq!(terminate(child).await, Some(0));
}

#[tokio::test]
async fn the_body_limit_is_a_flag() {
    let (child, uri) = spawn(&["--port", "0", "--max-body-bytes", "2048"]);
    let padding = "x".repeat(2_100);
    let big = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{padding}"}}],"max_tokens":1}}"#
    );
    let (status, body) = http(&uri, "POST", "/v1/chat/completions", &[], &big);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("over the limit of 2048 bytes"), "{body}");
    let small = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}"#;
    assert_eq!(
        http(&uri, "POST", "/v1/chat/completions", &[], small).0,
        200
    );
    assert_eq!(terminate(child).await, Some(0));
    assert_one_line_failure(
        &run(&["--max-body-bytes", "10"]),
        2,
        &["--max-body-bytes", "1024"],
    );
}
