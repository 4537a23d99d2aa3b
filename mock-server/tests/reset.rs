//! `POST /reset`: the provider starts afresh, as a server just started with the same config and
//! seed (windows, counters, randomness, phases' clock, traffic and series), while a request in
//! flight across it is decided, counted and let go by the run it arrived in.

#![allow(clippy::disallowed_methods)] // real time: model time restarting is the point

mod common;

use std::time::Duration;

use capsize_mock::MockProvider;
use common::{chat_body, client, counts, post, start, start_with, stats};
use serde_json::{json, Value};
use tokio::time::sleep;

/// Every counter `/stats` has, in a fixed order.
const ALL: [&str; 10] = [
    "received",
    "served",
    "rate_limited",
    "errored",
    "timed_out",
    "tokens_charged",
    "in_flight",
    "in_flight_peak",
    "retried",
    "orphaned",
];

async fn reset(m: &MockProvider) -> (u16, Value) {
    let r = client()
        .post(format!("{}/reset", m.uri()))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn chat(m: &MockProvider) -> u16 {
    post(m, "/v1/chat/completions", &chat_body("hi", 1))
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_reset_clears_the_window_the_counters_and_the_series() {
    let m = start("rpm = 2\nwindow = \"fixed\"").await;
    let mut before = Vec::new();
    for _ in 0..3 {
        before.push(chat(&m).await);
    }
    assert_eq!(before, [200, 200, 429]);
    // "hi" is 1 token, max_tokens 1: 2 tokens a request.
    assert_eq!(
        counts(&stats(&m).await, &ALL),
        [3, 2, 1, 0, 0, 4, 0, 1, 0, 0]
    );
    assert_eq!(
        reset(&m).await,
        (200, json!({ "reset": true, "generation": 1 }))
    );
    assert_eq!(counts(&stats(&m).await, &ALL), [0; 10]);
    let report = m.traffic_report();
    assert_eq!(
        report.series.bins.iter().map(|b| b.received).sum::<u64>(),
        0
    );
    assert_eq!(report.peak_requests_per_60s, 0);
    // The window is empty again: two more are served, not 429s.
    assert_eq!(
        [chat(&m).await, chat(&m).await, chat(&m).await],
        [200, 200, 429]
    );
    assert_eq!(
        counts(&stats(&m).await, &ALL),
        [3, 2, 1, 0, 0, 4, 0, 1, 0, 0]
    );
    assert_eq!(m.traffic_report().peak_requests_per_60s, 2);
    // Resets count up; the in-process handle does the same.
    assert_eq!(reset(&m).await.1, json!({ "reset": true, "generation": 2 }));
    assert_eq!(m.reset(), 3);
    assert_eq!(m.counters(), capsize_mock::Counters::default());
    assert_eq!(chat(&m).await, 200);
    // GET is not a reset.
    let r = client()
        .get(format!("{}/reset", m.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), common::header(&r, "allow")),
        (405, "POST")
    );
    assert_eq!(counts(&stats(&m).await, &["received"]), [1]);
}

#[tokio::test]
async fn a_reset_restarts_the_randomness_from_the_seed() {
    let m = start("error_rate = 0.5").await;
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut statuses = Vec::new();
        for _ in 0..12 {
            statuses.push(chat(&m).await);
        }
        runs.push(statuses);
        reset(&m).await;
    }
    assert_eq!(runs[0], runs[1]);
    assert!(
        runs[0].contains(&200) && runs[0].iter().any(|s| *s >= 500),
        "{runs:?}"
    );
}

#[tokio::test]
async fn a_reset_restarts_model_time_for_the_phases() {
    // An outage from model time 0.4 s on.
    let m = start("[[phases]]\nat_s = 0.4\noutage = \"503\"\n").await;
    assert_eq!(chat(&m).await, 200);
    sleep(Duration::from_millis(500)).await;
    assert_eq!(chat(&m).await, 503);
    reset(&m).await;
    // Model time 0 again: before the outage, which comes 0.4 s after the reset.
    assert_eq!(chat(&m).await, 200);
    assert_eq!(m.phase_counters(), [capsize_mock::Counters::default()]);
    sleep(Duration::from_millis(500)).await;
    assert_eq!(chat(&m).await, 503);
    let s = stats(&m).await;
    assert_eq!(counts(&s, &["received", "served", "errored"]), [2, 1, 1]);
    assert_eq!(s["phases"][0]["errored"], 1);
}

/// The slow service: a request naming it is answered after 600 ms.
const SLOW: (&str, &str) = ("slow", "{ dist = \"constant\", ms = 600 }");
/// The slower service: 1.5 s.
const SLOWER: (&str, &str) = ("slower", "{ dist = \"constant\", ms = 1500 }");

async fn slow(uri: String, service: &str, timeout: Duration) -> Result<u16, reqwest::Error> {
    client()
        .post(format!("{uri}/v1/chat/completions"))
        .header("x-capsize-latency", service)
        .json(&chat_body("hi", 1))
        .timeout(timeout)
        .send()
        .await
        .map(|r| r.status().as_u16())
}

/// Waits until the server has one request in flight.
async fn one_in_flight(m: &MockProvider) {
    for _ in 0..100 {
        if m.traffic().in_flight == 1 {
            return;
        }
        sleep(Duration::from_millis(10)).await;
    }
    panic!("the slow request never arrived");
}

#[tokio::test]
async fn a_request_in_flight_across_a_reset_is_the_old_runs() {
    let m = start_with("", 1.0, &[SLOW, SLOWER]).await;
    let long = Duration::from_secs(10);
    let old = tokio::spawn(slow(m.uri(), "slow", long));
    one_in_flight(&m).await;
    assert_eq!(reset(&m).await.0, 200);
    assert_eq!(counts(&stats(&m).await, &ALL), [0; 10]);
    // One of the new run's own, in flight while the old one leaves.
    let new = tokio::spawn(slow(m.uri(), "slower", long));
    one_in_flight(&m).await;
    // The old request is answered by its own run, and leaves it, not the new one.
    assert_eq!(old.await.unwrap().unwrap(), 200);
    assert_eq!(
        counts(&stats(&m).await, &ALL),
        [1, 1, 0, 0, 0, 2, 1, 1, 0, 0]
    );
    assert_eq!(new.await.unwrap().unwrap(), 200);
    assert_eq!(
        counts(&stats(&m).await, &ALL),
        [1, 1, 0, 0, 0, 2, 0, 1, 0, 0]
    );
    assert_eq!(m.counters().served, 1);
}

#[tokio::test]
async fn a_request_abandoned_across_a_reset_is_the_old_runs_orphan() {
    let m = start_with("", 1.0, &[SLOW]).await;
    let old = tokio::spawn(slow(m.uri(), "slow", Duration::from_millis(300)));
    one_in_flight(&m).await;
    reset(&m).await;
    assert!(old.await.unwrap().is_err(), "the client gave up");
    // Give the server time to notice the closed connection.
    sleep(Duration::from_millis(300)).await;
    assert_eq!(chat(&m).await, 200);
    assert_eq!(
        counts(&stats(&m).await, &ALL),
        [1, 1, 0, 0, 0, 2, 0, 1, 0, 0]
    );
}
