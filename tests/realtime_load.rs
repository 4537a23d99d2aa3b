//! Real time under load: 1,000 calls in flight at once over HTTP, every call accounted for, the
//! mock's count equal to the client's, and no file descriptor left open afterwards. (Alone in
//! its own test binary: other tests running beside it would open and close descriptors.)

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::path::Path;

use capsize::api::scenario::parse;
use capsize::api::sim::{self, RealtimeOptions};
use capsize::api::summary::Summary;

/// 125 sessions x 8 calls with no concurrency limit: 1,000 requests in flight, each answered
/// after 2 s of model time (200 ms of real time at 10x), twice over.
const LOAD: &str = r#"
name = "load"
seed = 11
[provider]
rpm = 10_000_000
latency = { dist = "constant", ms = 2000 }
[workload]
sessions = 125
queries = 250
calls_per_query = 8
tokens_per_call = 10
[scheduler]
max_concurrency = 0
rate_limit = false
"#;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// What the open descriptors are, for a failure message.
fn fd_targets() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

/// The open descriptors once the mock's server thread has closed its side: it shuts down in
/// the background after the run drops it, so give it up to 5 s to get back to `target`.
fn settled_fds(target: usize) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    for _ in 0..500 {
        let n = open_fds();
        if n <= target {
            return n;
        }
        rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(10)).await });
    }
    open_fds()
}

#[test]
fn a_thousand_calls_in_flight_are_all_accounted_for_and_leak_nothing() {
    let s = parse(LOAD, Path::new("load.toml"), &[]).unwrap_or_else(|e| panic!("{e}"));
    // The first runtime with I/O in a process opens tokio's process-wide signal socket pair,
    // which lives as long as the process: build one before counting.
    drop(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime"),
    );
    let before = open_fds();
    let before_targets = fd_targets();
    let out = sim::run_realtime(
        &s,
        &RealtimeOptions {
            time_scale: 10.0,
            target: None,
            fleet_redis: None,
            single_run: true,
            replica: None,
            announce: None,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let after = settled_fds(before);
    let sum = Summary::new(&s, &out);
    let c = &out.recording.calls;
    assert_eq!(c.calls, 2_000);
    assert_eq!(
        c.completed + c.failed + c.cancelled + c.not_run,
        c.calls,
        "{c:?}"
    );
    assert_eq!(c.completed, 2_000, "{c:?}");
    assert_eq!(sum.provider.counters.received, c.attempts);
    assert_eq!(sum.provider.counters.served, 2_000);
    // All 1,000 calls of a round were in flight together: each round took one latency (2 s)
    // plus the machine's own lag, which a busy 2-core machine stretches by a third at 10x. Had
    // the client or the mock served them in two or more waves, the median query would take
    // 4 s or more.
    assert!(
        sum.latency_ms.query.p50 < 4_000.0,
        "{:?}",
        sum.latency_ms.query
    );
    assert_eq!(
        after,
        before,
        "file descriptors open before ({before_targets:?}) and after ({:?}) the run",
        fd_targets()
    );
}
