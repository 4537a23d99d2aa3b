//! What the mock does with requests at and beyond its limits, over real HTTP on 127.0.0.1: a
//! request costing more tokens than the whole `tpm` is a 413 in the provider's own error shape
//! (not a 429 whose Retry-After promises it will fit), counted as `errored`.

mod common;

use common::{chat_body, client, counts, start, stats};
use serde_json::{json, Value};

const COUNTERS: [&str; 6] = [
    "received",
    "served",
    "rate_limited",
    "errored",
    "timed_out",
    "tokens_charged",
];

#[tokio::test]
async fn a_request_larger_than_the_whole_tpm_is_a_413_that_says_it_can_never_be_served() {
    let m = start("tpm = 1000000\nretry_after = 30").await;
    let message = "Request too large: it costs 20000000 tokens, more than the limit of 1000000 \
                   tokens per minute, so it can never be served (capsize mock provider).";
    let send = |path: &'static str, body: Value| {
        client()
            .post(format!("{}{path}", m.uri()))
            .header("x-capsize-tokens", "20000000")
            .json(&body)
            .send()
    };
    let r = send("/v1/chat/completions", chat_body("hello", 1))
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert!(
        r.headers().get("retry-after").is_none(),
        "{:?}",
        r.headers()
    );
    assert!(
        r.headers().get("retry-after-ms").is_none(),
        "{:?}",
        r.headers()
    );
    assert_eq!(r.headers()["x-capsize-charged"], "false");
    assert_eq!(r.headers()["x-ratelimit-limit-tokens"], "1000000");
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e,
        json!({ "error": { "message": message, "type": "invalid_request_error",
            "param": null, "code": "request_too_large" } })
    );

    let anthropic = json!({"model": "c", "max_tokens": 1, "messages": []});
    let r = send("/v1/messages", anthropic).await.unwrap();
    assert_eq!(r.status(), 413);
    assert!(
        r.headers().get("retry-after").is_none(),
        "{:?}",
        r.headers()
    );
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e,
        json!({ "type": "error", "error": { "type": "request_too_large", "message": message } })
    );

    // One token fewer than the limit still fits.
    let r = client()
        .post(format!("{}/tools/t", m.uri()))
        .header("x-capsize-tokens", "1000000")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Counted as errored: received = served + rate_limited + errored + timed_out.
    assert_eq!(
        counts(&stats(&m).await, &COUNTERS),
        [3, 1, 0, 2, 0, 1_000_000]
    );
}
