//! A real-time run's transport errors by class, against the binary: attempts whose connection
//! a provider resets are counted as `connection_reset` in summary.json and on the terminal;
//! a run whose calls in flight need more file descriptors than the process may open is warned
//! of before it starts, and the attempts that found none are `too_many_open_files`. (Refused
//! connections are told apart in `engine::provider::transport`'s own tests: a target that
//! refuses is not reached at all, exit 4.)

#![allow(clippy::disallowed_methods)] // a real server on the real clock

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Output};

use capsize::api::scenario::parse;
use capsize::api::sim::mock_config;
use common::stderr;
use common::temp::Temp;
use serde_json::Value;

/// Eight queries of two calls each, all at once, not retried (a transport error is not).
const SCENARIO: &str = r#"name = "transport"
seed = 1
[provider]
latency = { dist = "constant", ms = 300 }
[workload]
sessions = 8
queries = 8
calls_per_query = 2
tokens_per_call = 10
"#;

/// Answers one request on `s`: what a real-time run reads of its target (`/healthz`,
/// `/config` saying it serves `described`, `/reset`, `/stats`), and every model-facing request
/// by closing the connection unanswered, every other one with a reset (`SO_LINGER` 0).
fn serve(mut s: TcpStream, described: &str, n: usize) {
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    let _ = reader.read_exact(&mut body);
    let stats = r#"{"received":0,"served":0,"rate_limited":0,"errored":0,"timed_out":0,"tokens_charged":0}"#;
    let answer = |s: &mut TcpStream, body: &str| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    };
    let path = line.split_whitespace().nth(1).unwrap_or("");
    match path {
        "/healthz" => answer(&mut s, "ok"),
        "/config" => answer(&mut s, described),
        "/reset" => answer(&mut s, r#"{"reset":true,"generation":1}"#),
        "/stats" => answer(&mut s, stats),
        _ if n % 2 == 0 => {
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: setsockopt reads the struct passed to it, on a socket this test owns.
            unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
        }
        _ => {}
    }
}

fn summary(out: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn attempts_a_provider_resets_are_counted_as_resets() {
    let t = Temp::new("transport", "reset");
    let file = t.write("s.toml", SCENARIO);
    let scenario = parse(SCENARIO, &file, &[]).unwrap();
    let described =
        serde_json::to_string(&mock_config(&scenario, 1.0).unwrap().described()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (n, s) in listener.incoming().enumerate() {
            let described = described.clone();
            std::thread::spawn(move || serve(s.unwrap(), &described, n));
        }
    });
    let out = t.path("out");
    let o = common::capsize(&[
        "run",
        file.to_str().unwrap(),
        "--mode",
        "realtime",
        "--target",
        &url,
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    let s = summary(&out);
    // Every one of the 16 calls failed on its connection, once: not retried.
    assert_eq!(s["attempts"], 16, "{s}");
    assert_eq!(s["errors"], 16, "{s}");
    assert_eq!(
        s["transport_errors"],
        serde_json::json!({"connection_refused": 0, "connection_reset": 16,
            "too_many_open_files": 0, "timed_out": 0, "other": 0})
    );
    assert!(
        text.contains(
            "\n  transport      16 attempts failed on their connection: 16 connection reset\n"
        ),
        "{text}"
    );
}

/// `capsize ARGS` with at most `files` open files (soft and hard: it cannot raise them).
fn capsize_with_files(args: &[&str], files: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capsize"));
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: files,
                rlim_max: files,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("the capsize binary runs")
}

#[test]
fn calls_past_the_descriptor_limit_are_warned_of_and_counted() {
    let t = Temp::new("transport", "emfile");
    // 200 calls at once, each holding two descriptors for 300 ms, under a limit of 64.
    let file = t.write(
        "s.toml",
        &SCENARIO
            .replace("sessions = 8\nqueries = 8", "sessions = 100\nqueries = 100")
            .replace(
                "[provider]",
                "[scheduler]\ntimeout_ms = 3000\nretry = { retry_timeouts = false }\n[provider]",
            ),
    );
    let out = t.path("out");
    let o = capsize_with_files(
        &[
            "run",
            file.to_str().unwrap(),
            "--mode",
            "realtime",
            "--out",
            out.to_str().unwrap(),
        ],
        64,
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{err}");
    assert_eq!(
        err.lines().next(),
        Some("capsize: warning: up to 200 calls in flight can need 464 file descriptors (2 per call, with the mock in-process), above this process's limit of 64 (ulimit -n): calls past it fail as too_many_open_files transport errors; lower scheduler.max_concurrency or raise the limit"),
        "{err}"
    );
    let s = summary(&out);
    let t = &s["transport_errors"];
    let emfile = t["too_many_open_files"].as_u64().unwrap();
    // Most of the 200 found no descriptor and failed for good; the others were served, or
    // waited for a server that could not accept them either (timed out at the client).
    assert!((100..200).contains(&emfile), "{s}");
    for other in [
        "connection_refused",
        "connection_reset",
        "timed_out",
        "other",
    ] {
        assert_eq!(t[other], 0, "{other}: {s}");
    }
    assert_eq!(s["attempts"], 200, "{s}");
    let timed_out = s["attempts_timed_out"].as_u64().unwrap();
    assert_eq!(s["errors"].as_u64(), Some(emfile + timed_out), "{s}");
    // (A request its client gave up on may still be served once the mock can accept it.)
    let served = s["provider"]["served"].as_u64().unwrap();
    assert!(served >= 200 - emfile - timed_out, "{s}");
    assert!(
        text.contains(&format!(
            "\n  transport      {emfile} attempts failed on their connection: {emfile} too many open files\n"
        )),
        "{text}"
    );
}

#[test]
fn a_run_within_the_limit_is_not_warned_of_and_has_no_transport_errors() {
    let t = Temp::new("transport", "fine");
    let file = t.write("s.toml", SCENARIO);
    let out = t.path("out");
    let o = capsize_with_files(
        &[
            "run",
            file.to_str().unwrap(),
            "--mode",
            "realtime",
            "--out",
            out.to_str().unwrap(),
        ],
        256,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let s = summary(&out);
    assert_eq!(s["errors"], 0);
    assert!(s.get("transport_errors").is_none(), "{s}");
}
