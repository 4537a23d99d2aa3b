//! The mock provider over real HTTP on 127.0.0.1: 429s with Retry-After and both providers'
//! rate-limit headers and error bodies, the time scale dividing every duration on the wire,
//! served latency, per-request latency overrides, token costs from the header or the body,
//! errors and timeouts, bad requests (400/404/405, never charged, the server keeps serving),
//! `/stats` and `/healthz`.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

mod common;

use std::time::Duration;

use common::{chat_body, client, counts, header, post, start, start_with, stats};
use serde_json::{json, Value};
use tokio::time::Instant;

/// Parses `2025-01-31T12:00:05Z` into seconds since the epoch (for checking, not general).
fn parse_rfc3339(s: &str) -> u64 {
    assert_eq!(s.len(), 20, "{s}");
    assert!(s.ends_with('Z') && &s[10..11] == "T", "{s}");
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from civil (Howard Hinnant), to compare with the wall clock.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) as u64
}

#[allow(clippy::disallowed_types, clippy::disallowed_methods)]
fn wall_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn a_429_carries_each_apis_own_headers_and_error_shape() {
    let m = start("rpm = 2\ntpm = 1000000\nretry_after = 30").await;
    let body = chat_body("hello", 10);
    let ok = post(&m, "/v1/chat/completions", &body).await;
    assert_eq!(ok.status(), 200);
    // Successful responses carry the rate-limit headers too.
    assert_eq!(header(&ok, "x-ratelimit-limit-requests"), "2");
    assert_eq!(header(&ok, "x-ratelimit-remaining-requests"), "1");
    assert_eq!(header(&ok, "x-ratelimit-limit-tokens"), "1000000");
    // OpenAI's endpoint sends OpenAI's headers only.
    assert!(ok
        .headers()
        .get("anthropic-ratelimit-requests-remaining")
        .is_none());
    let ok = post(&m, "/v1/chat/completions", &body).await;
    assert_eq!(ok.status(), 200);

    let r = post(&m, "/v1/chat/completions", &body).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "retry-after"), "30");
    assert_eq!(header(&r, "retry-after-ms"), "30000");
    assert_eq!(header(&r, "x-ratelimit-limit-requests"), "2");
    assert_eq!(header(&r, "x-ratelimit-remaining-requests"), "0");
    let reset = header(&r, "x-ratelimit-reset-requests");
    assert!(reset.ends_with('s') && reset.starts_with("59."), "{reset}");
    assert_eq!(header(&r, "x-ratelimit-limit-tokens"), "1000000");
    let e: Value = r.json().await.unwrap();
    // OpenAI names the limit that refused in `type`.
    assert_eq!(e["error"]["type"], "requests", "{e}");
    assert_eq!(e["error"]["code"], "rate_limit_exceeded", "{e}");
    assert_eq!(e["error"]["param"], Value::Null, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("30s"),
        "{e}"
    );

    let body = json!({"model": "claude-mock", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hello"}]});
    let r = post(&m, "/v1/messages", &body).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "retry-after"), "30");
    // Anthropic's API sends whole seconds only, and its own rate-limit headers; and says the
    // 429 is worth retrying, which OpenAI's does not.
    assert!(r.headers().get("retry-after-ms").is_none());
    assert_eq!(header(&r, "x-should-retry"), "true");
    assert!(r.headers().get("x-ratelimit-remaining-requests").is_none());
    assert_eq!(header(&r, "anthropic-ratelimit-requests-limit"), "2");
    assert_eq!(header(&r, "anthropic-ratelimit-requests-remaining"), "0");
    assert_eq!(header(&r, "anthropic-ratelimit-tokens-limit"), "1000000");
    let at = parse_rfc3339(header(&r, "anthropic-ratelimit-requests-reset"));
    let now = wall_secs();
    assert!(
        (now + 58..=now + 61).contains(&at),
        "reset {at} vs now {now}"
    );
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["type"], "error", "{e}");
    assert_eq!(e["error"]["type"], "rate_limit_error", "{e}");
    assert!(e["error"]["message"].is_string(), "{e}");

    let s = stats(&m).await;
    assert_eq!(
        counts(&s, &["received", "served", "rate_limited"]),
        [4, 2, 2]
    );
}

#[tokio::test]
async fn the_time_scale_divides_retry_after_and_resets() {
    let m = start_with("rpm = 1\nretry_after = 30", 10.0, &[]).await;
    let body = chat_body("hello", 10);
    assert_eq!(post(&m, "/v1/chat/completions", &body).await.status(), 200);
    let r = post(&m, "/v1/chat/completions", &body).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "retry-after"), "3");
    assert_eq!(header(&r, "retry-after-ms"), "3000");
    // The sliding window frees the slot 60 model seconds after the first request: ~6 s real.
    let reset = header(&r, "x-ratelimit-reset-requests");
    assert!(reset.starts_with("5.") || reset == "6s", "{reset}");
    let anthropic = json!({"model": "c", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hello"}]});
    let r = post(&m, "/v1/messages", &anthropic).await;
    assert_eq!(r.status(), 429);
    let at = parse_rfc3339(header(&r, "anthropic-ratelimit-requests-reset"));
    let now = wall_secs();
    assert!((now + 5..=now + 7).contains(&at), "reset {at} vs now {now}");
}

#[tokio::test]
async fn served_latency_is_the_model_latency_divided_by_the_time_scale() {
    let m = start_with("latency = { dist = \"constant\", ms = 3000 }", 10.0, &[]).await;
    let body = chat_body("hello", 10);
    for _ in 0..3 {
        let t0 = Instant::now();
        let r = post(&m, "/v1/chat/completions", &body).await;
        let took = t0.elapsed();
        assert_eq!(r.status(), 200);
        assert!(
            took >= Duration::from_millis(295) && took < Duration::from_millis(450),
            "3000 ms at 10x took {took:?}"
        );
    }
}

#[tokio::test]
async fn a_latency_override_is_chosen_by_header_and_an_unknown_one_is_a_400() {
    let slow = "{ dist = \"constant\", ms = 400 }";
    let m = start_with("", 1.0, &[("model_turn", slow)]).await;
    let body = chat_body("hello", 10);
    let t0 = Instant::now();
    assert_eq!(post(&m, "/v1/chat/completions", &body).await.status(), 200);
    assert!(
        t0.elapsed() < Duration::from_millis(200),
        "{:?}",
        t0.elapsed()
    );
    let send = |name: &'static str| {
        client()
            .post(format!("{}/v1/chat/completions", m.uri()))
            .header("x-capsize-latency", name)
            .json(&body)
            .send()
    };
    let t0 = Instant::now();
    let r = send("model_turn").await.unwrap();
    let took = t0.elapsed();
    assert_eq!(r.status(), 200);
    assert!(
        took >= Duration::from_millis(395) && took < Duration::from_millis(600),
        "{took:?}"
    );
    let r = send("tool").await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("'tool'") && msg.contains("model_turn"),
        "{msg}"
    );
    assert_eq!(stats(&m).await["received"], 2);
}

#[tokio::test]
async fn token_cost_comes_from_the_header_or_else_from_the_body() {
    let m = start("tpm = 1000000").await;
    let c = client();
    let tokens = |s: Value| s["tokens_charged"].as_u64().unwrap();
    // 9 characters: 3 tokens, plus max_tokens 10.
    let r = post(&m, "/v1/chat/completions", &chat_body("abcdefghi", 10)).await;
    assert_eq!(r.status(), 200);
    let usage: Value = r.json().await.unwrap();
    assert_eq!(usage["usage"]["total_tokens"], 13, "{usage}");
    assert_eq!(tokens(stats(&m).await), 13);
    // The header wins over the body.
    let r = c
        .post(format!("{}/v1/chat/completions", m.uri()))
        .header("x-capsize-tokens", "1234")
        .json(&chat_body("abcdefghi", 10))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(tokens(stats(&m).await), 13 + 1234);
    // Anthropic: the system prompt counts too; 5 + 4 characters -> 3 tokens, plus 7.
    let body = json!({"model": "claude-mock", "max_tokens": 7, "system": "abcde",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "abcd"}]}]});
    let r = post(&m, "/v1/messages", &body).await;
    assert_eq!(r.status(), 200);
    let msg: Value = r.json().await.unwrap();
    assert_eq!(msg["type"], "message");
    assert_eq!(msg["content"][0]["type"], "text");
    assert_eq!(msg["usage"]["input_tokens"], 3, "{msg}");
    assert_eq!(tokens(stats(&m).await), 13 + 1234 + 10);
    // A tool call without the header: body bytes / 4, rounded up (10 bytes -> 3).
    let r = c
        .post(format!("{}/tools/search", m.uri()))
        .body("0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["tool"], "search");
    assert_eq!(tokens(stats(&m).await), 13 + 1234 + 10 + 3);
    // And with it.
    let r = c
        .post(format!("{}/tools/search", m.uri()))
        .header("x-capsize-tokens", "0")
        .body("0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let s = stats(&m).await;
    assert_eq!(tokens(s.clone()), 13 + 1234 + 10 + 3);
    assert_eq!(s["received"], 5);
}

#[tokio::test]
async fn bad_requests_get_4xx_bodies_are_not_charged_and_the_server_keeps_serving() {
    let m = start("rpm = 100").await;
    let c = client();
    let url = |p: &str| format!("{}{p}", m.uri());
    let raw = |p: &str, body: &'static str| c.post(url(p)).body(body).send();
    let cases = [
        (raw("/v1/chat/completions", "{not json").await.unwrap(), 400),
        (
            raw("/v1/chat/completions", r#"{"model":"m"}"#)
                .await
                .unwrap(),
            400,
        ),
        (
            raw("/v1/chat/completions", r#"{"messages":[]}"#)
                .await
                .unwrap(),
            400,
        ),
        (
            raw("/v1/messages", r#"{"model":"m","messages":[]}"#)
                .await
                .unwrap(),
            400,
        ),
        (raw("/v1/messages", "").await.unwrap(), 400),
        (
            c.get(url("/v1/chat/completions")).send().await.unwrap(),
            405,
        ),
        (c.get(url("/v1/messages")).send().await.unwrap(), 405),
        (c.delete(url("/tools/x")).send().await.unwrap(), 405),
        (c.post(url("/stats")).send().await.unwrap(), 405),
        (c.post(url("/config")).send().await.unwrap(), 405),
        (c.get(url("/reset")).send().await.unwrap(), 405),
        (c.get(url("/nowhere")).send().await.unwrap(), 404),
        (c.post(url("/tools/")).send().await.unwrap(), 404),
        (
            c.post(url("/v1/chat/completions/x")).send().await.unwrap(),
            404,
        ),
        (
            c.post(url("/v1/chat/completions"))
                .header("x-capsize-tokens", "-5")
                .json(&chat_body("x", 1))
                .send()
                .await
                .unwrap(),
            400,
        ),
    ];
    for (i, (r, want)) in cases.into_iter().enumerate() {
        assert_eq!(r.status().as_u16(), want, "case {i}");
        let anthropic = r.url().path() == "/v1/messages";
        let e: Value = r.json().await.expect("an error body");
        if anthropic {
            assert_eq!(e["type"], "error", "case {i}: {e}");
            assert!(e["error"]["message"].is_string(), "case {i}: {e}");
        } else {
            assert!(e["error"]["message"].is_string(), "case {i}: {e}");
            assert_eq!(e["error"]["type"], "invalid_request_error", "case {i}: {e}");
        }
    }
    let r = raw("/v1/chat/completions", r#"{"model":"m"}"#)
        .await
        .unwrap();
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"].as_str().unwrap().contains("messages"),
        "{e}"
    );
    let r = c.get(url("/v1/chat/completions")).send().await.unwrap();
    assert_eq!(header(&r, "allow"), "POST");
    // Still serving, and nothing was charged or counted.
    assert_eq!(
        post(&m, "/v1/chat/completions", &chat_body("x", 1))
            .await
            .status(),
        200
    );
    let s = stats(&m).await;
    assert_eq!(counts(&s, &["received", "served"]), [1, 1]);
    assert_eq!(m.counters().received, 1);
}

#[tokio::test]
async fn stats_has_the_model_counters_and_the_traffic_and_healthz_says_ok() {
    let m = start("").await;
    let s = stats(&m).await;
    let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = [
        "received",
        "served",
        "rate_limited",
        "errored",
        "timed_out",
        "tokens_charged",
        "in_flight",
        "in_flight_peak",
        "in_flight_mean",
        "retried",
        "orphaned",
    ];
    want.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, want);
    assert!(
        s.as_object()
            .unwrap()
            .values()
            .all(|v| v.as_f64() == Some(0.0)),
        "{s}"
    );
    let r = client()
        .get(format!("{}/healthz", m.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "ok");
    // Neither goes through the model.
    assert_eq!(stats(&m).await["received"], 0);
}

#[tokio::test]
async fn errors_come_in_each_providers_shape() {
    let only = |s: u16| {
        let w = |x: u16| u8::from(x == s);
        format!(
            "error_rate = 1\nerror_mix = {{ 500 = {}, 503 = {}, 529 = {} }}",
            w(500),
            w(503),
            w(529)
        )
    };
    let anthropic =
        json!({"model": "c", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]});
    for (status, openai_type, anthropic_type) in [
        (529, "overloaded", "overloaded_error"),
        (500, "server_error", "api_error"),
        (503, "service_unavailable", "api_error"),
    ] {
        let m = start(&only(status)).await;
        let r = post(&m, "/v1/chat/completions", &chat_body("x", 1)).await;
        assert_eq!(r.status().as_u16(), status);
        assert!(r.headers().get("x-should-retry").is_none());
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["type"], openai_type, "{e}");
        let r = post(&m, "/v1/messages", &anthropic).await;
        assert_eq!(r.status().as_u16(), status);
        assert_eq!(header(&r, "x-should-retry"), "true");
        let e: Value = r.json().await.unwrap();
        assert_eq!(
            (&e["type"], &e["error"]["type"]),
            (&json!("error"), &json!(anthropic_type))
        );
        assert_eq!(stats(&m).await["errored"], 2);
    }
}

#[tokio::test]
async fn a_timeout_is_never_answered() {
    let m = start("timeout_rate = 1").await;
    let r = client()
        .post(format!("{}/v1/chat/completions", m.uri()))
        .json(&chat_body("x", 1))
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(r.as_ref().is_err_and(|e| e.is_timeout()), "{r:?}");
    let s = stats(&m).await;
    assert_eq!(counts(&s, &["received", "timed_out"]), [1, 1]);
}

#[tokio::test]
async fn config_says_what_the_server_serves_without_reaching_the_model() {
    let m = start_with(
        "rpm = 60\nwindow = \"fixed\"",
        4.0,
        &[("model_turn", "{ dist = \"constant\", ms = 7 }")],
    )
    .await;
    let r = client()
        .get(format!("{}/config", m.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let c: Value = r.json().await.unwrap();
    let model = &c["model"];
    assert_eq!(model["provider.rpm"], "60");
    assert_eq!(model["provider.tpm"], "unlimited");
    assert_eq!(model["provider.window"], "\"fixed\"");
    assert_eq!(model["time_scale"], "4");
    assert_eq!(
        model["latencies.model_turn"],
        r#"{ dist = "constant", ms = 7 }"#
    );
    assert!(c["seed"].is_u64(), "{c}");
    assert_eq!(stats(&m).await["received"], 0);
}

/// Every value `/config` names is written as a scenario writes it: no Rust form (`Some(`,
/// `Constant(`, `Price {`) reaches a user, in `/config` or in a mismatch that quotes it.
#[tokio::test]
async fn config_writes_every_value_in_the_scenarios_own_spelling() {
    let m = start_with(
        r#"rpm = 60
tpm = 90000
window = "token_bucket"
clock_from = "first_request"
retry_after = 2.5
latency = { dist = "uniform", min_ms = 5, max_ms = 50 }
max_in_flight = 4
overload = "503"
error_rate = 0.1
error_mix = { 500 = 1, 529 = 3 }
timeout_rate = 0.05
output_tokens = { dist = "lognormal", mean = 300, p95 = 900 }
ttft = { dist = "exponential", mean_ms = 400 }
tpot = { dist = "constant", ms = 20 }
price = { input_per_mtok = 3, output_per_mtok = 15, cached_input_per_mtok = 0.3, cached_input_share = 0.5, bill_errors = true }
[[phases]]
from_s = 60
to_s = 120
rpm = 30
latency = { dist = "normal", mean_ms = 100, sd_ms = 10 }
[[phases]]
at_s = 300
outage = "no_answer"
"#,
        2.0,
        &[(
            "search",
            "{ dist = \"mixture\", components = [{ weight = 1, dist = \"constant\", ms = 10 }, { weight = 3, dist = \"pareto\", scale_ms = 10, shape = 2.5 }] }",
        )],
    )
    .await;
    let c = common::get_json(&m, "/config").await;
    let model: Vec<(String, String)> = c["model"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let expected = [
        (
            "latencies.search",
            r#"{ dist = "mixture", components = [{ weight = 0.25, dist = "constant", ms = 10 }, { weight = 0.75, dist = "pareto", scale_ms = 10, shape = 2.5 }] }"#,
        ),
        ("provider.clock_from", r#""first_request""#),
        ("provider.error_mix", "{ 500 = 0.25, 503 = 0, 529 = 0.75 }"),
        ("provider.error_rate", "0.1"),
        ("provider.itpm", "unlimited"),
        ("provider.latency", r#"{ dist = "uniform", min_ms = 5, max_ms = 50 }"#),
        ("provider.max_in_flight", "4"),
        ("provider.max_output_tokens", "32768"),
        ("provider.otpm", "unlimited"),
        ("provider.output_tokens", r#"{ dist = "lognormal", mean = 300, p95 = 900 }"#),
        ("provider.overload", r#""503""#),
        (
            "provider.phases",
            r#"[{ from_s = 60, to_s = 120, rpm = 30, latency = { dist = "normal", mean_ms = 100, sd_ms = 10 } }, { at_s = 300, outage = "no_answer" }]"#,
        ),
        (
            "provider.price",
            "{ input_per_mtok = 3, output_per_mtok = 15, cached_input_per_mtok = 0.3, cached_input_share = 0.5, bill_errors = true }",
        ),
        ("provider.retry_after", "2.5"),
        ("provider.rpm", "60"),
        ("provider.timeout_rate", "0.05"),
        ("provider.tpm", "90000"),
        ("provider.tpot", r#"{ dist = "constant", ms = 20 }"#),
        ("provider.ttft", r#"{ dist = "exponential", mean_ms = 400 }"#),
        ("provider.window", r#""token_bucket""#),
        ("time_scale", "2"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(model, expected);
}

#[tokio::test]
async fn an_openai_429_names_the_limit_that_refused_it() {
    // 100 tokens a minute: a 60-token request fits, a second does not (tokens), while
    // requests are left; at 1 RPM the second request is refused for requests.
    for (table, kind, on) in [
        ("rpm = 100\ntpm = 100", "tokens", "tokens per min (TPM)"),
        (
            "rpm = 1\ntpm = 100000",
            "requests",
            "requests per min (RPM)",
        ),
    ] {
        let m = start(table).await;
        let body = chat_body("x", 60);
        let c = client();
        let send = || {
            c.post(format!("{}/v1/chat/completions", m.uri()))
                .header("x-capsize-tokens", "60")
                .json(&body)
                .send()
        };
        assert_eq!(send().await.unwrap().status(), 200);
        let r = send().await.unwrap();
        assert_eq!(r.status(), 429, "{table}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["type"], kind, "{table}: {e}");
        assert_eq!(e["error"]["code"], "rate_limit_exceeded", "{e}");
        assert!(e["error"]["message"].as_str().unwrap().contains(on), "{e}");
    }
}
