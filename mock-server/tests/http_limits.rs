//! What the mock does with requests at and beyond its limits, over real HTTP on 127.0.0.1: a
//! request costing more tokens than the whole `tpm` is a 429 "Request too large" in the
//! provider's own error shape, as the APIs answer it, without a Retry-After that would promise
//! it will fit, counted as `rate_limited`; a body over
//! `MAX_BODY_BYTES` is a 413 without reading past the limit (a declared length at once, a chunked
//! body as it passes it), never reaching the model; and time scales at the extremes of what
//! validation lets through answer without panicking.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

mod common;

use std::time::Duration;

use tokio::time::Instant;

use capsize_mock::limits::MAX_BODY_BYTES;
use common::raw::{exchange, post, post_chunked, End};
use common::{chat_body, client, counts, start, start_with, stats};
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
async fn a_request_larger_than_the_whole_tpm_is_a_429_that_says_it_can_never_be_served() {
    let m = start("tpm = 1000000\nretry_after = 30").await;
    let message = "Request too large on tokens per min (TPM): it costs 20000000 tokens, more \
                   than the limit of 1000000 tokens per minute, so it can never be served; the \
                   input or output tokens must be reduced (capsize mock provider).";
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
    // A 429, as the APIs answer it, but with no Retry-After: no wait will cure it.
    assert_eq!(r.status(), 429);
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
    // OpenAI's API sends no x-should-retry.
    assert!(r.headers().get("x-should-retry").is_none());
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e,
        json!({ "error": { "message": message, "type": "tokens",
            "param": null, "code": "rate_limit_exceeded" } })
    );

    let anthropic = json!({"model": "c", "max_tokens": 1, "messages": []});
    let r = send("/v1/messages", anthropic).await.unwrap();
    assert_eq!(r.status(), 429);
    // Anthropic's says no wait will help, and its SDK then stops retrying.
    assert_eq!(r.headers()["x-should-retry"], "false");
    assert!(
        r.headers().get("retry-after").is_none(),
        "{:?}",
        r.headers()
    );
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e,
        json!({ "type": "error", "error": { "type": "rate_limit_error", "message": message } })
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
    // Counted as 429s: received = served + rate_limited + errored + timed_out.
    assert_eq!(
        counts(&stats(&m).await, &COUNTERS),
        [3, 1, 2, 0, 0, 1_000_000]
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413_and_never_reaches_the_model() {
    let m = start("").await;
    let addr = m.address();
    let limit = MAX_BODY_BYTES;
    let want =
        format!("Request body too large: over the limit of {limit} bytes (capsize mock provider).");
    // Exactly the limit is read and served (a tool call costs bytes / 4).
    let at_limit = vec![b'x'; limit];
    let r = exchange(addr, &post("/tools/t", "", &at_limit), End::Open).response();
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    // One byte more, declared: 413 in the route's own shape, with the charged header.
    for (path, anthropic) in [
        ("/tools/t", false),
        ("/v1/chat/completions", false),
        ("/v1/messages", true),
    ] {
        let over = vec![b'x'; limit + 1];
        let r = exchange(addr, &post(path, "", &over), End::Open).response();
        assert_eq!(r.status, 413, "{path}");
        assert_eq!(r.header("x-capsize-charged"), Some("false"), "{path}");
        assert_eq!(r.error_message(), want, "{path}");
        if anthropic {
            assert_eq!(r.json()["error"]["type"], "request_too_large");
        } else {
            assert_eq!(r.json()["error"]["code"], "request_too_large");
        }
        // Chunked: refused as it passes the limit.
        let r = exchange(addr, &post_chunked(path, &over), End::Open).response();
        assert_eq!((r.status, r.error_message()), (413, want.clone()), "{path}");
    }
    // A declared 10 MB body is refused at once, without waiting for (or reading) any of it.
    let t0 = Instant::now();
    let head = b"POST /tools/t HTTP/1.1\r\nHost: mock\r\nContent-Length: 10000000\r\n\r\nxxxx";
    let r = exchange(addr, head, End::Open).response();
    assert_eq!((r.status, r.error_message()), (413, want.clone()));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // With Expect: 100-continue, no 100 is sent for a body that will be refused.
    let head = b"POST /tools/t HTTP/1.1\r\nHost: mock\r\nExpect: 100-continue\r\n\
                 Content-Length: 10000000\r\n\r\n";
    let r = exchange(addr, head, End::Open).response();
    assert_eq!(r.status, 413);
    // Only the request at the limit reached the model.
    let tokens = u64::try_from(limit / 4).unwrap();
    assert_eq!(counts(&stats(&m).await, &COUNTERS), [1, 1, 0, 0, 0, tokens]);
}

#[tokio::test]
async fn time_scales_at_the_extremes_answer_without_panicking() {
    // 1e300: every model time saturates at Duration::MAX, where a sliding window holds nothing.
    let m = start_with("rpm = 1", 1e300, &[]).await;
    for _ in 0..2 {
        let r = common::post(&m, "/v1/chat/completions", &chat_body("x", 1)).await;
        assert_eq!(r.status(), 200);
    }
    // 1e-300: model time stands still, and a 60 s Retry-After is more than any Duration holds
    // in real time: it saturates instead of panicking.
    let m = start_with("rpm = 1", 1e-300, &[]).await;
    let r = common::post(&m, "/v1/chat/completions", &chat_body("x", 1)).await;
    assert_eq!(r.status(), 200);
    let r = common::post(&m, "/v1/chat/completions", &chat_body("x", 1)).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after-ms"], u64::MAX.to_string().as_str());
    assert_eq!(counts(&stats(&m).await, &COUNTERS), [2, 1, 1, 0, 0, 2]);
}
