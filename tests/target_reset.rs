//! Runs against one long-lived `--target` mock start on a clean provider (issue 27, item 1):
//! each run resets it (`POST /reset`), so N runs against one target report what N fresh mocks
//! would, and a target that cannot be reset is refused for a command of several runs before
//! any of them, but serves a single run, whose counters then leave out what came before.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::temp::Temp;
use serde_json::Value;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// 40 queries of 4 calls (160 requests) against 300 RPM on a sliding window: one run stays
/// under the limit; two in the same model minute would not (320 > 300).
const SCENARIO: &str = r#"name = "target-reset"
seed = 1
[provider]
rpm = 300
latency = { dist = "constant", ms = 100 }
[workload]
sessions = 2
queries = 40
calls_per_query = 4
tokens_per_call = 10
[scheduler]
max_concurrency = 4
"#;

/// A fresh folder holding the scenario (`s.toml`).
fn temp(test: &str) -> Temp {
    let t = Temp::new("target-reset", test);
    t.write("s.toml", SCENARIO);
    t
}

fn capsize(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(args)
        .output()
        .expect("the capsize binary runs")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A real-time run of the scenario at 10x, against `target` (or a fresh in-process mock):
/// its summary.json.
fn run(t: &Temp, out: &str, target: Option<&str>) -> Value {
    let scenario = t.path("s.toml");
    let dir = t.path(out);
    let mut args = vec![
        "run",
        path_str(&scenario),
        "--mode",
        "realtime",
        "--time-scale",
        "10",
        "--json",
        "--out",
        path_str(&dir),
    ];
    if let Some(url) = target {
        args.extend(["--target", url]);
    }
    let o = capsize(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("summary.json on stdout")
}

/// A real-time sweep of two points (max_concurrency 4 and 5) at 10x against `target`.
fn sweep(t: &Temp, target: &str, out: &Path) -> Output {
    let scenario = t.path("s.toml");
    capsize(&[
        "sweep",
        path_str(&scenario),
        "--mode",
        "realtime",
        "--time-scale",
        "10",
        "--target",
        target,
        "--sweep",
        "scheduler.max_concurrency=4,5",
        "--out",
        path_str(out),
    ])
}

/// The provider's counters and the client's attempts and retries of a run.
fn counts(s: &Value) -> [u64; 4] {
    let n = |v: &Value| v.as_u64().expect("a count");
    [
        n(&s["provider"]["received"]),
        n(&s["provider"]["rate_limited"]),
        n(&s["attempts"]),
        n(&s["retries"]),
    ]
}

#[test]
fn runs_against_one_target_are_runs_against_fresh_mocks() {
    let t = temp("runs");
    let fresh = counts(&run(&t, "fresh", None));
    assert_eq!(fresh, [160, 0, 160, 0], "one run alone stays under 300 RPM");
    let (mut mock, url) = common::spawn_mock(&t.path("s.toml"), "10");
    // Without the reset, run 2 would find run 1's 160 requests in the window (320 > 300)
    // and /stats would read 160, 320, 480.
    for i in 0..3 {
        let s = run(&t, &format!("r{i}"), Some(&url));
        assert_eq!(counts(&s), fresh, "run {i} against one target");
    }
    // A sweep's points, one after another against the same target, each start clean too.
    let dir = t.path("sweep");
    let o = sweep(&t, &url, &dir);
    let _ = mock.kill();
    let _ = mock.wait();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).expect("sweep.csv");
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().expect("a header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (ratio, retries) = (col("ratio_429"), col("retries"));
    let rows: Vec<Vec<&str>> = rows.map(|r| r.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for row in rows {
        assert_eq!((row[ratio], row[retries]), ("0", "0"), "{csv}");
    }
}

#[test]
fn a_target_that_cannot_be_reset_serves_one_run_and_no_more() {
    let t = temp("no-reset");
    // What a capsize mock says it serves, from a real one.
    let (mut mock, url) = common::spawn_mock(&t.path("s.toml"), "10");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let config = rt.block_on(async {
        reqwest::get(format!("{url}/config"))
            .await
            .expect("GET /config")
            .text()
            .await
            .expect("its body")
    });
    let _ = mock.kill();
    let _ = mock.wait();
    // A provider that answers every call but knows no /reset, and whose /stats already
    // counts 1,000 requests of someone else's.
    let stats = serde_json::json!({"received": 1000, "served": 1000, "rate_limited": 0,
        "errored": 0, "timed_out": 0, "tokens_charged": 10000});
    let server = rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/healthz"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/config"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(config, "application/json"))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/stats"))
            .respond_with(ResponseTemplate::new(200).set_body_json(stats))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path_regex("^/tools/"))
            .respond_with(ResponseTemplate::new(200).set_body_raw("{}", "application/json"))
            .mount(&server)
            .await;
        server
    });
    let url = server.uri();
    // Several runs: refused before the first, in one line, nothing written.
    let dir = t.path("sweep");
    let o = sweep(&t, &url, &dir);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!(
            "--target {url} cannot be reset (POST /reset answered 404 Not Found)"
        )),
        "{e}"
    );
    assert!(!dir.exists(), "nothing written");
    // One run: served, and its counters leave out the 1,000 requests counted before it.
    let s = run(&t, "single", Some(&url));
    assert_eq!(s["queries"], 40);
    assert_eq!(
        s["provider"]["received"], 0,
        "1,000 before and after: none of this run's"
    );
    drop(server);
}
