//! Shared helpers of the HTTP tests: a mock provider from a `[provider]` table, a client, and
//! small request and header shortcuts.

#![allow(dead_code)]

pub mod raw;

use std::collections::BTreeMap;
use std::path::Path;

use capsize_mock::{Latency, MockProvider, RawLatency, RawProvider, ServerConfig};
use serde_json::{json, Value};

/// A server for `table` (a `[provider]` table; latency defaults to a constant 0 ms), with
/// `time_scale` and named latency overrides given as TOML inline tables.
pub async fn start_with(table: &str, time_scale: f64, latencies: &[(&str, &str)]) -> MockProvider {
    let table = if table.contains("latency") {
        table.to_string()
    } else {
        format!("latency = {{ dist = \"constant\", ms = 0 }}\n{table}")
    };
    let raw: RawProvider = toml::from_str(&table).expect("the table parses");
    let provider = raw.build(Path::new(".")).expect("the table builds");
    let latencies: BTreeMap<String, Latency> = latencies
        .iter()
        .map(|(name, t)| {
            let raw: RawLatency = toml::from_str::<toml::Table>(&format!("l = {t}"))
                .expect("the latency parses")["l"]
                .clone()
                .try_into()
                .expect("a latency table");
            let built = raw.build(name, Path::new(".")).expect("the latency builds");
            (name.to_string(), built)
        })
        .collect();
    let config = ServerConfig {
        provider,
        seed: 7,
        time_scale,
        latencies,
        max_body_bytes: capsize_mock::limits::MAX_BODY_BYTES,
        request_log: None,
        trace_sink: None,
        error_rates: Default::default(),
    };
    MockProvider::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("the server starts")
}

/// A server for `table` at real time, without latency overrides.
pub async fn start(table: &str) -> MockProvider {
    start_with(table, 1.0, &[]).await
}

/// A plain HTTP client.
pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// An OpenAI chat body whose one message has `content`.
pub fn chat_body(content: &str, max_tokens: u64) -> Value {
    json!({
        "model": "gpt-mock",
        "messages": [{ "role": "user", "content": content }],
        "max_tokens": max_tokens,
    })
}

/// POSTs `body` (JSON) to `path`.
pub async fn post(m: &MockProvider, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", m.uri()))
        .json(body)
        .send()
        .await
        .expect("the request is answered")
}

/// GET `path` (`/stats`, `/config`) as JSON.
pub async fn get_json(m: &MockProvider, path: &str) -> Value {
    client()
        .get(format!("{}{path}", m.uri()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {path} is not JSON: {e}"))
}

/// GET `/stats` as JSON.
pub async fn stats(m: &MockProvider) -> Value {
    get_json(m, "/stats").await
}

/// A header's value as text (panics if absent).
pub fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header in {:?}", r.headers()))
        .to_str()
        .expect("a text header")
}

/// The counters `keys` of a `/stats` body, in that order.
pub fn counts(s: &Value, keys: &[&str]) -> Vec<u64> {
    keys.iter()
        .map(|k| {
            s[k].as_u64()
                .unwrap_or_else(|| panic!("no counter {k} in {s}"))
        })
        .collect()
}
