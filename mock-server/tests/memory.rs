//! Nothing of a request body outlives its response (mock-repro.py M3: 30 bodies of 10 MB used to
//! raise the server's RSS by ~300 MB until the 1,024-request rotation freed them). Here 30 bodies
//! of the largest accepted size, `MAX_BODY_BYTES`, go one after the other to a mock in this
//! process: its resident memory (this process's VmRSS, in a test binary of its own) must not grow
//! by anything near 30 of them. Keeping each body would add 30 MiB; freeing it lets the next one
//! reuse the same memory.

mod common;

use capsize_mock::limits::MAX_BODY_BYTES;
use common::raw::{exchange, post, End};
use common::{counts, start, stats};

/// This process's resident set size, in KiB.
#[cfg(target_os = "linux")]
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn thirty_bodies_at_the_limit_leave_nothing_behind() {
    let m = start("").await;
    // One request, built once: the client's own memory does not grow.
    let request = post("/tools/t", "", &vec![b'x'; MAX_BODY_BYTES]);
    let send = || {
        let r = exchange(m.address(), &request, End::Open).response();
        assert_eq!(r.status, 200);
    };
    // Warm up: the server's buffers and allocator arenas reach their steady size.
    for _ in 0..3 {
        send();
    }
    let before = rss_kib();
    for _ in 0..30 {
        send();
    }
    let grown_kib = rss_kib().saturating_sub(before);
    // 30 kept bodies would be 30,720 KiB; allow a quarter of that for allocator noise.
    assert!(
        grown_kib < 8 * 1024,
        "RSS grew by {grown_kib} KiB over 30 bodies"
    );
    assert_eq!(counts(&stats(&m).await, &["received", "served"]), [33, 33]);
}
