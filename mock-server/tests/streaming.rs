//! Streamed answers (`"stream": true`): Server-Sent Events in each API's shape, one token an
//! event, paced by the model (never a token before its time), `usage` reporting the tokens
//! generated; refusals still come as JSON.

#![allow(clippy::disallowed_methods)] // real time: when each event arrives is the point

mod common;

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

const GENERATING: &str = "output_tokens = 20\nttft = { dist = \"constant\", ms = 200 }\n\
                          tpot = { dist = \"constant\", ms = 10 }\n";

/// The events of a streamed answer (`event:` name, if any, and `data:`), and when the first
/// and the last arrived after the request was sent.
struct Streamed {
    events: Vec<(Option<String>, String)>,
    first: Duration,
    last: Duration,
    /// How many reads the body took: one or two if it came at once, about one a token if paced.
    reads: usize,
    content_type: String,
}

async fn stream(m: &capsize_mock::MockProvider, path: &str, body: &Value) -> Streamed {
    let sent = Instant::now();
    let mut r = common::client()
        .post(format!("{}{path}", m.uri()))
        .json(body)
        .send()
        .await
        .unwrap();
    let content_type = common::header(&r, "content-type").to_string();
    let (mut text, mut first, mut last) = (String::new(), None, Duration::ZERO);
    let mut reads = 0;
    while let Some(chunk) = r.chunk().await.unwrap() {
        reads += 1;
        let at = sent.elapsed();
        first.get_or_insert(at);
        last = at;
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let events = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = d.to_string();
                }
            }
            (name, data)
        })
        .collect();
    Streamed {
        events,
        first: first.unwrap_or_default(),
        last,
        reads,
        content_type,
    }
}

fn json_of(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
}

#[tokio::test]
async fn openai_chunks_one_a_token_then_usage_then_done() {
    let m = common::start(GENERATING).await;
    let mut body = common::chat_body("hello", 100);
    body["stream"] = json!(true);
    body["stream_options"] = json!({ "include_usage": true });
    let s = stream(&m, "/v1/chat/completions", &body).await;
    assert_eq!(s.content_type, "text/event-stream");
    let data: Vec<&str> = s.events.iter().map(|(_, d)| d.as_str()).collect();
    // Role, 20 tokens, the finish, the usage, [DONE].
    assert_eq!(data.len(), 24, "{data:?}");
    assert_eq!(data[23], "[DONE]");
    let chunks: Vec<Value> = data[..23].iter().map(|d| json_of(d)).collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks[1..21]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "tok ".repeat(20));
    assert_eq!(chunks[21]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[22]["choices"], json!([]));
    assert_eq!(
        chunks[22]["usage"],
        json!({ "prompt_tokens": 2, "completion_tokens": 20, "total_tokens": 22 })
    );
    // Paced by the model: nothing before the first token at 200 ms, the last no earlier
    // than 200 + 19 x 10 ms, and the tokens in reads of their own, not all at once.
    assert!(s.first >= Duration::from_millis(200), "{:?}", s.first);
    assert!(s.last >= Duration::from_millis(390), "{:?}", s.last);
    assert!(s.reads >= 10, "{} reads", s.reads);
}

#[tokio::test]
async fn max_tokens_cuts_a_stream_and_says_so() {
    let m = common::start(GENERATING).await;
    let mut body = common::chat_body("hello", 5);
    body["stream"] = json!(true);
    let s = stream(&m, "/v1/chat/completions", &body).await;
    let data: Vec<&str> = s.events.iter().map(|(_, d)| d.as_str()).collect();
    // Role, 5 tokens, the finish, [DONE]: no usage chunk unless asked for.
    assert_eq!(data.len(), 8, "{data:?}");
    let finish = json_of(data[6]);
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    assert!(finish.get("usage").is_none());
}

#[tokio::test]
async fn anthropic_events_from_message_start_to_message_stop() {
    let m = common::start(GENERATING).await;
    let body = json!({ "model": "c", "max_tokens": 1000, "stream": true,
        "messages": [{ "role": "user", "content": "hello" }] });
    let s = stream(&m, "/v1/messages", &body).await;
    let names: Vec<&str> = s
        .events
        .iter()
        .map(|(n, _)| n.as_deref().unwrap_or("-"))
        .collect();
    let mut want = vec!["message_start", "content_block_start"];
    want.extend(std::iter::repeat_n("content_block_delta", 20));
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, want);
    let start = json_of(&s.events[0].1);
    assert_eq!(start["message"]["usage"]["input_tokens"], 2);
    let end = json_of(&s.events[23].1);
    assert_eq!(end["delta"]["stop_reason"], "end_turn");
    assert_eq!(end["usage"]["output_tokens"], 20);
    assert_eq!(json_of(&s.events[2].1)["delta"]["text"], "tok ");
    assert!(s.first >= Duration::from_millis(200), "{:?}", s.first);
    assert!(s.last >= Duration::from_millis(390), "{:?}", s.last);
}

#[tokio::test]
async fn a_refused_stream_is_a_json_error_and_a_plain_provider_streams_at_once() {
    let m = common::start(&format!("{GENERATING}rpm = 1\nretry_after = 30\n")).await;
    let mut body = common::chat_body("hello", 3);
    body["stream"] = json!(true);
    let ok = stream(&m, "/v1/chat/completions", &body).await;
    assert_eq!(ok.events.len(), 6);
    let r = common::post(&m, "/v1/chat/completions", &body).await;
    assert_eq!(r.status(), 429);
    assert_eq!(common::header(&r, "content-type"), "application/json");
    // A provider that does not generate streams max_tokens tokens, all after its latency.
    let plain = common::start("latency = { dist = \"constant\", ms = 50 }").await;
    let s = stream(&plain, "/v1/chat/completions", &body).await;
    let data: Vec<&str> = s.events.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(data.len(), 6, "{data:?}");
    assert!(s.first >= Duration::from_millis(50), "{:?}", s.first);
}
