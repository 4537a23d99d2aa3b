//! The example agent (`examples/http_agent.rs`) runs against a capsize-mock on loopback and does
//! what its comments say: every call comes back, and the limiter paces the sends.

#[path = "../examples/http_agent.rs"]
#[allow(dead_code)]
mod http_agent;

use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn the_http_agent_gets_every_answer_within_its_bounds() {
    let mock = http_agent::local_provider().await;
    let turn = http_agent::turn(&mock.uri()).await;
    let counters = mock.counters();

    assert_eq!(turn.ok, http_agent::CALLS, "failed: {:?}", turn.failed);
    // Every request the agent sent reached the provider: one per call, plus one per 5xx retried.
    assert_eq!(counters.received, u64::from(turn.attempts));
    assert_eq!(counters.served, http_agent::CALLS as u64);
    assert_eq!(counters.received, counters.served + counters.errored);
    assert_eq!(
        counters.rate_limited, 0,
        "80 % headroom keeps under the provider's limit"
    );
    // Lower bounds only (the real clock can run late, never early). The limiter: 40 sends a
    // second with a bucket of 40, so the 48th waits for 8 refills, 0.2 s. The permits: 8 in
    // flight at 100 ms each, so 48 calls take at least 6 waves, 0.6 s.
    let rate = http_agent::RPM * http_agent::HEADROOM / 60.0;
    let paced = (http_agent::CALLS as f64 - rate) / rate;
    let waves = http_agent::CALLS.div_ceil(http_agent::MAX_CONCURRENCY) as u32;
    let bounded = Duration::from_millis(http_agent::LATENCY_MS) * waves;
    assert!(
        turn.elapsed >= Duration::from_secs_f64(paced),
        "{:?} < {paced} s",
        turn.elapsed
    );
    assert!(turn.elapsed >= bounded, "{:?} < {bounded:?}", turn.elapsed);
}
