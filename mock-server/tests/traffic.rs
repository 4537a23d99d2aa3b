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
