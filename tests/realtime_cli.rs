//! `capsize run --mode realtime` and `capsize mock` from the outside: the flags' bad input, an
//! unreachable target, a run against a separately started mock, a mock that serves another
//! model or time scale, and a provider whose Retry-After cannot be read.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use capsize::api::scenario::parse;
use capsize::api::sim::mock_config;
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SCENARIO: &str = r#"name = "realtime-cli"
seed = 1
[provider]
rpm = 600
latency = { dist = "constant", ms = 100 }
[workload]
sessions = 2
queries = 4
calls_per_query = 2
tokens_per_call = 10
[scheduler]
max_concurrency = 4
"#;

/// A fresh folder under the system temp dir holding the scenario, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "capsize-realtime-cli-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        std::fs::write(dir.join("s.toml"), SCENARIO).expect("write the scenario");
        Temp(dir)
    }

    fn scenario(&self) -> PathBuf {
        self.0.join("s.toml")
    }

    fn out(&self) -> PathBuf {
        self.0.join("out")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(t: &Temp, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("run")
        .arg(t.scenario())
        .args(extra)
        .arg("--out")
        .arg(t.out())
        .output()
        .expect("the capsize binary runs")
}

/// Exit `code`, one line on stderr (returned), nothing on stdout, no output folder.
fn refused(t: &Temp, out: &Output, code: i32) -> String {
    let stderr = String::from_utf8(out.stderr.clone()).expect("UTF-8");
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert_eq!(stderr.matches('\n').count(), 1, "one line: {stderr:?}");
    assert!(out.stdout.is_empty());
    assert!(!t.out().exists(), "nothing may be written");
    stderr
}

#[test]
fn real_time_flags_are_checked() {
    let t = Temp::new("flags");
    let e = refused(&t, &run(&t, &["--time-scale", "10"]), 2);
    assert!(e.contains("--mode realtime"), "{e}");
    let e = refused(&t, &run(&t, &["--target", "http://127.0.0.1:1"]), 2);
    assert!(e.contains("--mode realtime"), "{e}");
    for bad in ["0", "-3", "NaN", "inf", "1e9"] {
        let e = refused(
            &t,
            &run(&t, &["--mode", "realtime", "--time-scale", bad]),
            2,
        );
        assert!(e.contains("--time-scale"), "{bad}: {e}");
    }
    let e = refused(
        &t,
        &run(&t, &["--mode", "realtime", "--target", "ftp://127.0.0.1"]),
        2,
    );
    assert!(e.contains("--target") && e.contains("http://"), "{e}");
}

#[test]
fn an_unreachable_target_fails_in_one_line() {
    let t = Temp::new("unreachable");
    // Bind a port, then free it: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let e = refused(&t, &run(&t, &["--mode", "realtime", "--target", &url]), 4);
    assert!(
        e.contains(&format!(
            "{url}/healthz: nothing listens there: start `capsize mock --scenario FILE` at that address, or drop --target"
        )),
        "{e}"
    );
}

/// Starts `capsize mock` for the test's scenario on a free port.
fn start_mock(t: &Temp, scale: &str) -> (std::process::Child, String) {
    common::spawn_mock(&t.scenario(), scale)
}

#[test]
fn a_run_against_a_separately_started_mock() {
    let t = Temp::new("target");
    let (mut mock, url) = start_mock(&t, "20");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let out = run(
        &t,
        &[
            "--mode",
            "realtime",
            "--time-scale",
            "20",
            "--target",
            &url,
            "--json",
        ],
    );
    // SIGTERM stops the mock cleanly.
    let stopped = Command::new("kill")
        .arg(mock.id().to_string())
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    let status = mock.wait().expect("the mock exits");
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).expect("summary.json on stdout");
    assert_eq!(s["mode"], "realtime");
    assert_eq!(s["queries"], 4);
    assert_eq!(s["calls"], 8);
    // The mock's own counters: every attempt sent, and nothing else, reached it.
    assert_eq!(s["provider"]["received"], s["attempts"]);
    assert_eq!(s["provider"]["served"], 8);
    // In model time: each query is one 100 ms latency (both calls in parallel) plus the HTTP
    // overhead times 20, not the 5 ms of real time it took, nor 20 x 100 ms.
    let p50 = s["latency_ms"]["query"]["p50"].as_f64().expect("p50");
    assert!((100.0..400.0).contains(&p50), "query p50 {p50} ms");
    assert!(Path::new(&t.out()).join("summary.json").exists());
}

#[test]
fn a_mock_serving_another_model_or_time_scale_is_refused_naming_what_differs() {
    let t = Temp::new("mismatch");
    let (mut mock, url) = start_mock(&t, "20");
    let other = [
        "--set",
        "provider.rpm=1200",
        "--set",
        "provider.window=\"fixed\"",
    ];
    let args = [
        &["--mode", "realtime", "--time-scale", "10", "--target", &url][..],
        &other,
    ]
    .concat();
    let e = refused(&t, &run(&t, &args), 2);
    for want in [
        "provider.rpm: 600 (expected 1200)",
        "provider.window: \"sliding\" (expected \"fixed\")",
        "time_scale: 20 (expected 10)",
    ] {
        assert!(e.contains(want), "{want} in {e}");
    }
    // capsize exec against it names the same values, in the scenario's own spelling: the
    // whole line, each value as the scenario writes it.
    let exec = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("exec")
        .arg(t.scenario())
        .args(["--target", &url, "--out"])
        .arg(t.out())
        .args([
            "--set",
            "provider.latency={ dist = \"uniform\", min_ms = 5, max_ms = 50 }",
            "--set",
            "provider.price={ input_per_mtok = 3, output_per_mtok = 15 }",
            "--",
            "true",
        ])
        .output()
        .expect("the capsize binary runs");
    let e = refused(&t, &exec, 2);
    assert_eq!(
        e,
        format!(
            "capsize: {url} serves another provider than this run expects: provider.latency: {{ dist = \"constant\", ms = 100 }} (expected {{ dist = \"uniform\", min_ms = 5, max_ms = 50 }}); provider.price: not set (expected {{ input_per_mtok = 3, output_per_mtok = 15 }}); time_scale: 20 (expected 1)\n"
        )
    );
    // The same model at its own time scale is served: the seed may differ.
    let out = run(
        &t,
        &[
            "--mode",
            "realtime",
            "--time-scale",
            "20",
            "--target",
            &url,
            "--seed",
            "7",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = mock.kill();
    let _ = mock.wait();
    std::fs::remove_dir_all(t.out()).expect("the run wrote its outputs");
    // A target that does not say what it serves is refused too.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let silent = rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/healthz"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        server
    });
    let e = refused(
        &t,
        &run(&t, &["--mode", "realtime", "--target", &silent.uri()]),
        2,
    );
    assert!(
        e.contains("/config") && e.contains("cannot tell what the mock serves"),
        "{e}"
    );
}

#[test]
fn an_unreadable_retry_after_is_bad_input() {
    let t = Temp::new("bad-header");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(async {
        let server = healthy().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "soon"))
            .mount(&server)
            .await;
        server
    });
    let e = refused(
        &t,
        &run(&t, &["--mode", "realtime", "--target", &server.uri()]),
        2,
    );
    assert!(e.contains("retry-after") && e.contains("soon"), "{e}");
    drop(server);
}

/// A wiremock server whose `/healthz` answers 200, whose `/config` says it serves the test's
/// scenario in real time, as a real-time run checks first, and whose `POST /reset` (sent
/// before the run) answers 200, ahead of any catch-all `POST` a test mounts.
async fn healthy() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/healthz"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/reset"))
        .respond_with(ResponseTemplate::new(200))
        .with_priority(1)
        .mount(&server)
        .await;
    let scenario = parse(SCENARIO, Path::new("s.toml"), &[]).expect("the scenario parses");
    let described = mock_config(&scenario, 1.0)
        .expect("one provider")
        .described();
    Mock::given(method("GET"))
        .and(path("/config"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&described))
        .mount(&server)
        .await;
    server
}

/// A provider that answers the first request 408 and every other 200, as wiremock data, with
/// the `/healthz` and `/stats` a real-time run reads.
async fn a_408_then_200s() -> MockServer {
    let server = healthy().await;
    let stats = serde_json::json!({"received": 0, "served": 0, "rate_limited": 0,
        "errored": 0, "timed_out": 0, "tokens_charged": 0});
    Mock::given(method("GET"))
        .and(path("/stats"))
        .respond_with(ResponseTemplate::new(200).set_body_json(stats))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(408))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

#[test]
fn any_status_is_the_retry_policys_to_retry_in_real_time() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The SDK presets retry a 408; capsize's own policy does not (its retry_on is 5xx).
    for (preset, attempts, errors) in [("openai-python", 9, 0), ("capsize", 8, 1)] {
        let t = Temp::new(&format!("status-{preset}"));
        let server = rt.block_on(a_408_then_200s());
        let set = format!("scheduler.retry.preset=\"{preset}\"");
        let out = run(
            &t,
            &[
                "--mode",
                "realtime",
                "--target",
                &server.uri(),
                "--set",
                &set,
                "--json",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
        assert_eq!(
            (v["attempts"].as_u64(), v["errors"].as_u64()),
            (Some(attempts), Some(errors)),
            "{preset}"
        );
        drop(server);
    }
}

#[test]
fn a_long_real_time_run_says_up_front_how_long_it_will_take() {
    use std::io::BufRead;
    let t = Temp::new("announce");
    // 600 queries at 2 sessions with 30 s of thinking each: ~2.5 h of model time, ~15 min at
    // --time-scale 10. The line comes before the run starts; the run is then stopped.
    let mut child = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("run")
        .arg(t.scenario())
        .args([
            "--mode",
            "realtime",
            "--time-scale",
            "10",
            "--set",
            "workload.queries=600",
            "--set",
            "workload.think_time={ dist = \"constant\", ms = 30000 }",
            "--out",
        ])
        .arg(t.out())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the capsize binary runs");
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    // 600 queries, 300 a session, each 30 s of thinking plus 100 ms: 9,030 s, and the last
    // query's 100 ms.
    assert_eq!(
        first,
        "capsize: this run will take about 15 min of wall time (2.5 h of model time at --time-scale 10)\n"
    );
    // Said only once the run is set up: a long run refused at setup still fails in one line.
    let unreachable = run(
        &t,
        &[
            "--mode",
            "realtime",
            "--time-scale",
            "10",
            "--set",
            "workload.queries=600",
            "--set",
            "workload.think_time={ dist = \"constant\", ms = 30000 }",
            "--target",
            "http://127.0.0.1:9",
        ],
    );
    let why = refused(&t, &unreachable, 4);
    assert!(why.contains("nothing listens there"), "{why}");
    // Short: nothing said.
    let quick = run(&t, &["--mode", "realtime", "--time-scale", "1000"]);
    assert_eq!(quick.status.code(), Some(0));
    assert!(
        quick.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quick.stderr)
    );
}
