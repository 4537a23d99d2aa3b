//! Answers as the real APIs give them: an answer cut at its `max_tokens` says so whole or
//! streamed (`length`, `max_tokens`); a `max_tokens` of 0 or above the provider's
//! `max_output_tokens` is a 400 in each API's shape, never charged; and a streamed answer is in
//! flight until its last event.

#![allow(clippy::disallowed_methods)] // real time: when a stream ends is the point

mod common;

use std::path::Path;
use std::time::Duration;

use capsize_mock::config::DEFAULT_MAX_OUTPUT_TOKENS;
use capsize_mock::{MockProvider, RawProvider};
use common::{counts, post, start, stats};
use serde_json::{json, Value};
use tokio::time::sleep;

/// 20 output tokens, the first after 50 ms, then one every 10 ms.
const GENERATING: &str = "output_tokens = 20\nttft = { dist = \"constant\", ms = 50 }\n\
                          tpot = { dist = \"constant\", ms = 10 }\n";

fn openai(max_tokens: Value, stream: bool) -> Value {
    json!({ "model": "gpt-mock", "messages": [{ "role": "user", "content": "hello" }],
        "max_tokens": max_tokens, "stream": stream })
}

fn anthropic(max_tokens: Value, stream: bool) -> Value {
    json!({ "model": "claude-mock", "messages": [{ "role": "user", "content": "hello" }],
        "max_tokens": max_tokens, "stream": stream })
}

/// The finish reason of an answer, whole or streamed, in either API.
async fn reason(m: &MockProvider, path: &str, body: &Value) -> String {
    let r = post(m, path, body).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    if body["stream"] != json!(true) {
        let v: Value = serde_json::from_str(&text).unwrap();
        let r = &v["choices"][0]["finish_reason"];
        return r.as_str().or(v["stop_reason"].as_str()).unwrap().into();
    }
    let found = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            let r = &v["choices"][0]["finish_reason"];
            r.as_str()
                .or(v["delta"]["stop_reason"].as_str())
                .map(String::from)
        })
        .collect::<Vec<_>>();
    assert_eq!(found.len(), 1, "{text}");
    found[0].clone()
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_says_so_whole_or_streamed() {
    let m = start(GENERATING).await;
    let mut seen = Vec::new();
    for stream in [false, true] {
        for max in [3, 1000] {
            let o = reason(&m, "/v1/chat/completions", &openai(json!(max), stream)).await;
            let a = reason(&m, "/v1/messages", &anthropic(json!(max), stream)).await;
            seen.push((stream, max, o, a));
        }
    }
    let want = |s, m, o: &str, a: &str| (s, m, o.to_string(), a.to_string());
    assert_eq!(
        seen,
        [
            want(false, 3, "length", "max_tokens"),
            want(false, 1000, "stop", "end_turn"),
            want(true, 3, "length", "max_tokens"),
            want(true, 1000, "stop", "end_turn"),
        ]
    );
    // A whole answer's usage: the 3 tokens it was cut at.
    let v: Value = post(&m, "/v1/chat/completions", &openai(json!(3), false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 3);
}

/// The status and body of a request.
async fn answer(m: &MockProvider, path: &str, body: &Value) -> (u16, Value) {
    let r = post(m, path, body).await;
    (r.status().as_u16(), r.json().await.unwrap())
}

fn openai_error(message: &str) -> Value {
    json!({ "error": { "message": message, "type": "invalid_request_error", "param": null,
        "code": null } })
}

fn anthropic_error(message: &str) -> Value {
    json!({ "type": "error", "error": { "type": "invalid_request_error", "message": message } })
}

#[tokio::test]
async fn max_tokens_of_zero_is_refused_by_both_apis_and_not_charged() {
    let m = start(GENERATING).await;
    let chat = "/v1/chat/completions";
    assert_eq!(
        answer(&m, chat, &openai(json!(0), false)).await,
        (
            400,
            openai_error(
                "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but \
                 got 0 instead."
            )
        )
    );
    let mut body = openai(json!(null), true);
    body["max_completion_tokens"] = json!(0);
    assert_eq!(
        answer(&m, chat, &body).await,
        (
            400,
            openai_error(
                "Invalid 'max_completion_tokens': integer below minimum value. Expected a value \
                 >= 1, but got 0 instead."
            )
        )
    );
    assert_eq!(
        answer(&m, "/v1/messages", &anthropic(json!(0), false)).await,
        (
            400,
            anthropic_error("max_tokens: Input should be greater than or equal to 1")
        )
    );
    // Negative and fractional values are not numbers of tokens either.
    for bad in [json!(-1), json!(1.5), json!("5")] {
        let (status, e) = answer(&m, chat, &openai(bad.clone(), false)).await;
        assert_eq!(
            (status, &e["error"]["type"]),
            (400, &json!("invalid_request_error"))
        );
        let (status, e) = answer(&m, "/v1/messages", &anthropic(bad, false)).await;
        assert_eq!(
            (status, &e["error"]["type"]),
            (400, &json!("invalid_request_error"))
        );
    }
    let s = stats(&m).await;
    assert_eq!(counts(&s, &["received", "tokens_charged"]), [0, 0]);
}

#[tokio::test]
async fn max_tokens_above_the_providers_output_limit_is_refused() {
    let m = start(&format!("{GENERATING}max_output_tokens = 100\n")).await;
    let chat = "/v1/chat/completions";
    assert_eq!(
        answer(&m, chat, &openai(json!(101), true)).await,
        (
            400,
            openai_error(
                "max_tokens is too large: 101. This model supports at most 100 completion \
                 tokens, whereas you provided 101."
            )
        )
    );
    assert_eq!(
        answer(&m, "/v1/messages", &anthropic(json!(101), false)).await,
        (
            400,
            anthropic_error(
                "max_tokens: 101 > 100, which is the maximum allowed number of output tokens \
                 for claude-mock"
            )
        )
    );
    assert_eq!(counts(&stats(&m).await, &["received"]), [0]);
    // At the limit: served.
    let (status, v) = answer(&m, chat, &openai(json!(100), false)).await;
    assert_eq!(
        (status, &v["usage"]["completion_tokens"]),
        (200, &json!(20))
    );
    // The default limit, on a provider that does not set one: 32768.
    assert_eq!(DEFAULT_MAX_OUTPUT_TOKENS, 32_768);
    let plain = start("").await;
    let (status, _) = answer(&plain, chat, &openai(json!(32_768), false)).await;
    assert_eq!(status, 200);
    let (status, e) = answer(&plain, chat, &openai(json!(32_769), true)).await;
    assert_eq!(
        (status, e["error"]["message"].as_str().unwrap()),
        (
            400,
            "max_tokens is too large: 32769. This model supports at most 32768 completion \
             tokens, whereas you provided 32769."
        )
    );
}

#[tokio::test]
async fn an_answer_without_max_tokens_is_cut_at_the_output_limit() {
    let m = start(&format!("{GENERATING}max_output_tokens = 12\n")).await;
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] });
    let (status, v) = answer(&m, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200);
    assert_eq!(v["usage"]["completion_tokens"], 12);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
}

fn build(table: &str) -> Result<u64, String> {
    let table = format!("latency = {{ dist = \"constant\", ms = 0 }}\n{table}");
    let raw: RawProvider = toml::from_str(&table).map_err(|e| e.message().to_string())?;
    raw.build(Path::new("."))
        .map(|p| p.max_output_tokens)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn max_output_tokens_is_bounded_defaulted_and_served_in_config() {
    assert_eq!(build(""), Ok(32_768));
    assert_eq!(build("max_output_tokens = 1"), Ok(1));
    assert_eq!(build("max_output_tokens = 10000000"), Ok(10_000_000));
    for bad in ["0", "10000001"] {
        assert_eq!(
            build(&format!("max_output_tokens = {bad}")),
            Err(format!(
                "provider.max_output_tokens: must be a number of tokens in [1, 10000000], got \
                 {bad}"
            ))
        );
    }
    assert!(build("max_output_tokens = -1").is_err());
    assert!(build("max_output_tokens = 1.5").is_err());
    let m = start("max_output_tokens = 4096").await;
    let config = common::get_json(&m, "/config").await;
    assert_eq!(config["model"]["provider.max_output_tokens"], "4096");
    let plain = start("").await;
    let config = common::get_json(&plain, "/config").await;
    assert_eq!(config["model"]["provider.max_output_tokens"], "32768");
}

#[tokio::test]
async fn a_stream_is_in_flight_until_its_last_event() {
    // 40 tokens: the first at 50 ms, the last at 50 + 39 x 20 = 830 ms.
    let m = start(
        "output_tokens = 40\nttft = { dist = \"constant\", ms = 50 }\n\
         tpot = { dist = \"constant\", ms = 20 }\n",
    )
    .await;
    for (path, body) in [
        ("/v1/chat/completions", openai(json!(1000), true)),
        ("/v1/messages", anthropic(json!(1000), true)),
    ] {
        let mut r = post(&m, path, &body).await;
        // The headers came with the first token; the stream has 0.78 s to go.
        sleep(Duration::from_millis(200)).await;
        let during = stats(&m).await;
        assert_eq!(counts(&during, &["in_flight", "in_flight_peak"]), [1, 1]);
        assert_eq!(m.traffic().in_flight, 1);
        while r.chunk().await.unwrap().is_some() {}
        let after = stats(&m).await;
        assert_eq!(counts(&after, &["in_flight", "in_flight_peak"]), [0, 1]);
    }
    // The per-second series saw one in flight (never two: the streams did not overlap).
    let series = m.traffic_report().series;
    assert_eq!(series.bins.iter().map(|b| b.in_flight_peak).max(), Some(1));
    let held: f64 = series.bins.iter().map(|b| b.in_flight_mean).sum();
    // Two streams of about 0.83 s each, in one-second bins.
    assert!(held > 1.6, "{held}");
}

#[tokio::test]
async fn a_stream_whose_client_goes_away_leaves_the_requests_in_flight() {
    // 100 tokens at 50 ms: a 5 s stream.
    let m = start(
        "output_tokens = 100\nttft = { dist = \"constant\", ms = 10 }\n\
         tpot = { dist = \"constant\", ms = 50 }\n",
    )
    .await;
    let mut r = post(&m, "/v1/chat/completions", &openai(json!(1000), true)).await;
    assert!(r.chunk().await.unwrap().is_some());
    assert_eq!(m.traffic().in_flight, 1);
    drop(r);
    // Well before the stream's end, the server notices and lets it go.
    let mut left = None;
    for k in 0..40 {
        if m.traffic().in_flight == 0 {
            left = Some(k);
            break;
        }
        sleep(Duration::from_millis(50)).await;
    }
    assert!(left.is_some(), "still in flight 2 s after its client left");
    // Answered (its headers went out): not an orphan.
    assert_eq!((m.traffic().orphaned, m.traffic().in_flight_peak), (0, 1));
}
