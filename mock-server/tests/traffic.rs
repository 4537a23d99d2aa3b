//! The server's view of its clients in `/stats`: requests in flight (now, at the most, on
//! average), retries announced by the SDKs' `x-stainless-retry-count` header, and orphans (a
//! charged request whose client hung up before the answer).

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

mod common;

use std::time::Duration;

use common::{chat_body, client, start, stats};
use tokio::time::sleep;

/// POSTs a chat request, announcing retry `retry` if given, giving up after `timeout`.
async fn ask(uri: &str, retry: Option<u32>, timeout: Duration) -> Result<u16, reqwest::Error> {
    let mut r = client()
        .post(format!("{uri}/v1/chat/completions"))
        .json(&chat_body("hi", 1))
        .timeout(timeout);
    if let Some(n) = retry {
        r = r.header("x-stainless-retry-count", n.to_string());
    }
    r.send().await.map(|a| a.status().as_u16())
}

/// `/stats` once nothing is in flight (the server notices a closed connection soon, not at
/// once), or after 2.5 s.
async fn settled(m: &capsize_mock::MockProvider) -> serde_json::Value {
    let mut s = stats(m).await;
    for _ in 0..50 {
        if s["in_flight"] == 0 {
            break;
        }
        sleep(Duration::from_millis(50)).await;
        s = stats(m).await;
    }
    s
}

#[tokio::test]
async fn requests_in_flight_and_announced_retries_are_counted() {
    let m = start(r#"latency = { dist = "constant", ms = 300 }"#).await;
    let uri = m.uri();
    let long = Duration::from_secs(10);
    // Three at once: the first attempt of one request, and two retries.
    let (a, b, c) = tokio::join!(
        ask(&uri, Some(0), long),
        ask(&uri, Some(1), long),
        ask(&uri, Some(2), long)
    );
    assert_eq!((a.unwrap(), b.unwrap(), c.unwrap()), (200, 200, 200));
    let s = stats(&m).await;
    assert_eq!(s["received"], 3);
    assert_eq!(s["in_flight"], 0);
    assert_eq!(s["in_flight_peak"], 3);
    assert_eq!(s["retried"], 2);
    assert_eq!(s["orphaned"], 0);
    // Three requests held 0.3 s each within the time since the start: a mean above 0, below 3.
    let mean = s["in_flight_mean"].as_f64().unwrap();
    assert!(mean > 0.0 && mean < 3.0, "{mean}");
    assert_eq!(m.traffic().in_flight_peak, 3);
}

#[tokio::test]
async fn a_charged_request_whose_client_hangs_up_is_an_orphan() {
    let m = start(r#"latency = { dist = "constant", ms = 2000 }"#).await;
    let gave_up = ask(&m.uri(), None, Duration::from_millis(200)).await;
    assert!(gave_up.is_err(), "the client gave up before the answer");
    // The server notices the closed connection and drops the request's answer.
    let s = settled(&m).await;
    assert_eq!(s["in_flight"], 0, "{s}");
    assert_eq!(s["orphaned"], 1, "{s}");
    assert_eq!(
        s["served"], 1,
        "charged and counted served by the model: {s}"
    );
    // A request refused before the model (a 404) is not in flight at all, and not an orphan.
    let r = client()
        .post(format!("{}/nowhere", m.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let s = stats(&m).await;
    assert_eq!(
        (s["in_flight_peak"].as_u64(), s["orphaned"].as_u64()),
        (Some(1), Some(1))
    );
}

#[tokio::test]
async fn a_request_the_model_never_answers_is_a_timeout_not_an_orphan() {
    let m = start("timeout_rate = 1.0").await;
    let gave_up = ask(&m.uri(), None, Duration::from_millis(200)).await;
    assert!(gave_up.is_err(), "never answered");
    let s = settled(&m).await;
    assert_eq!(s["in_flight"], 0, "{s}");
    assert_eq!(
        (s["timed_out"].as_u64(), s["orphaned"].as_u64()),
        (Some(1), Some(0)),
        "{s}"
    );
}

/// POSTs a chat request as attempt `retry` of the request `key` (its Idempotency-Key).
async fn attempt(uri: &str, key: &str, retry: u32) -> u16 {
    client()
        .post(format!("{uri}/v1/chat/completions"))
        .json(&chat_body("hi", 1))
        .header("idempotency-key", key)
        .header("x-stainless-retry-count", retry.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_retry_is_linked_to_its_previous_attempt_by_its_idempotency_key() {
    // 2 requests a minute: the third attempt is refused.
    let m = start("rpm = 2\nwindow = \"fixed\"").await;
    let uri = m.uri();
    assert_eq!(attempt(&uri, "a", 0).await, 200);
    sleep(Duration::from_millis(300)).await;
    assert_eq!(attempt(&uri, "a", 1).await, 200);
    // A retry of a key never seen has no previous attempt: counted, its wait not measured.
    assert_eq!(attempt(&uri, "b", 1).await, 429);
    // A first attempt under a known key is not a retry.
    assert_eq!(attempt(&uri, "a", 0).await, 429);
    let r = m.traffic_report();
    assert_eq!(r.traffic.retried, 2);
    assert_eq!(r.retry_waits.len(), 1, "one wait measured");
    // At least the 300 ms slept between the answer and the retry (the wait is measured on the
    // server's clock, from the answer to the next arrival).
    assert!(r.retry_waits.max() >= 300_000, "{}", r.retry_waits.max());
    // Every attempt within the first second, 2 charged, 2 refused.
    assert_eq!(
        (r.peak_requests_per_60s, r.peak_tokens_per_60s > 0),
        (2, true)
    );
    let bins = &r.series.bins;
    assert_eq!(r.series.bin_s, 1);
    let sum = |f: fn(&capsize_mock::server::Bin) -> u64| bins.iter().map(f).sum::<u64>();
    assert_eq!(sum(|b| b.received), 4);
    assert_eq!(sum(|b| b.charged), 2);
    assert_eq!(sum(|b| b.rate_limited), 2);
    assert_eq!(bins.iter().map(|b| b.in_flight_peak).max(), Some(1));
}

#[tokio::test]
async fn get_report_serves_the_whole_report_as_data_and_it_reads_back_the_same() {
    let m = start("rpm = 2\nwindow = \"fixed\"").await;
    let uri = m.uri();
    assert_eq!(attempt(&uri, "a", 0).await, 200);
    sleep(Duration::from_millis(200)).await;
    assert_eq!(attempt(&uri, "a", 1).await, 200);
    assert_eq!(attempt(&uri, "a", 2).await, 429);
    let body = client()
        .get(format!("{uri}/report"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let served: capsize_mock::server::Report = serde_json::from_str(&body).expect(&body);
    let here = m.report();
    // The same run, read twice: everything equal but the instant of the reading.
    assert_eq!(served.generation, 0);
    assert!(served.elapsed_us >= 200_000 && served.elapsed_us <= here.elapsed_us);
    assert_eq!(served.counters, here.counters);
    assert_eq!(
        (served.counters.received, served.counters.rate_limited),
        (3, 1)
    );
    assert_eq!(served.traffic.traffic.retried, 2);
    // The retry waits come back as the same histogram: two waits, the first ≥ 200 ms.
    assert_eq!(served.traffic.retry_waits, here.traffic.retry_waits);
    assert_eq!(served.traffic.retry_waits.len(), 2);
    assert!(served.traffic.retry_waits.max() >= 200_000);
    // The bins' counts too (the open bin's mean in flight moves with the instant of reading).
    let counts = |r: &capsize_mock::server::Report| -> Vec<[u64; 6]> {
        let bins = r.traffic.series.bins.iter();
        bins.map(|b| {
            [
                b.received,
                b.charged,
                b.rate_limited,
                b.errored,
                b.tokens,
                b.in_flight_peak,
            ]
        })
        .collect()
    };
    assert_eq!(counts(&served), counts(&here));
    assert_eq!(counts(&served), vec![[3, 2, 1, 0, 4, 1]]);
    // A reset starts a new run: the next report is generation 1, and empty.
    m.reset();
    let after = m.report();
    assert_eq!((after.generation, after.counters.received), (1, 0));
    // Only GET.
    let post = client().post(format!("{uri}/report")).send().await.unwrap();
    assert_eq!(post.status().as_u16(), 405);
}
