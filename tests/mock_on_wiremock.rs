//! The mock provider's model mounted on a `wiremock::MockServer`, as a Rust user would in their
//! own tests (`capsize-mock` with feature `wiremock`): its limits, 429s, headers and error shapes
//! are the standalone server's, and other mocks mounted beside it keep working.

use std::path::Path;

use capsize_mock::server::{ProviderResponder, ServerConfig};
use capsize_mock::RawProvider;
use serde_json::{json, Value};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config(table: &str) -> ServerConfig {
    let raw: RawProvider = toml::from_str(table).expect("the table parses");
    ServerConfig {
        provider: raw.build(Path::new(".")).expect("the table builds"),
        seed: 1,
        time_scale: 1.0,
        latencies: Default::default(),
        max_body_bytes: capsize_mock::limits::MAX_BODY_BYTES,
        request_log: None,
        trace_sink: None,
        error_rates: Default::default(),
    }
}

async fn json_of(r: reqwest::Response) -> Value {
    serde_json::from_slice(&r.bytes().await.expect("a body")).expect("a JSON body")
}

#[tokio::test]
async fn the_provider_model_answers_on_a_wiremock_server() {
    let server = MockServer::start().await;
    // A user's own stub beside it, matched first.
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": []})))
        .mount(&server)
        .await;
    let table = "rpm = 2\nretry_after = 30\nlatency = { dist = \"constant\", ms = 20 }";
    Mock::given(path_regex("^/(v1|tools|healthz|stats|config)"))
        .respond_with(ProviderResponder::new(config(table)).expect("a valid config"))
        .mount(&server)
        .await;
    let client = reqwest::Client::new();
    let chat =
        json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]});
    let post = |p: &str| {
        client
            .post(format!("{}{p}", server.uri()))
            .header("content-type", "application/json")
            .body(chat.to_string())
            .send()
    };
    for _ in 0..2 {
        let r = post("/v1/chat/completions").await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-capsize-charged"], "true");
        let body = json_of(r).await;
        assert_eq!(body["object"], "chat.completion", "{body}");
    }
    // The minute's two are spent: a 429 with the OpenAI endpoint's headers and body...
    let r = post("/v1/chat/completions").await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "30");
    assert_eq!(r.headers()["retry-after-ms"], "30000");
    assert_eq!(r.headers()["x-ratelimit-remaining-requests"], "0");
    let e = json_of(r).await;
    assert_eq!(e["error"]["type"], "requests", "{e}");
    // ...and with Anthropic's on its endpoint.
    let r = post("/v1/messages").await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after-ms").is_none());
    assert_eq!(r.headers()["anthropic-ratelimit-requests-remaining"], "0");
    // The user's stub, and the model's own counters.
    let models = client
        .get(format!("{}/v1/models", server.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    let stats = json_of(
        client
            .get(format!("{}/stats", server.uri()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (&stats["received"], &stats["served"], &stats["rate_limited"]),
        (&json!(4), &json!(2), &json!(2))
    );
    // A bad request is the model's 400, not charged.
    let r = client
        .post(format!("{}/v1/chat/completions", server.uri()))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[test]
fn a_time_scale_that_is_not_positive_is_refused() {
    let mut c = config("rpm = 2\nlatency = { dist = \"constant\", ms = 1 }");
    c.time_scale = 0.0;
    assert!(ProviderResponder::new(c.clone()).is_err());
    // A body limit outside 1 KiB to 1 GiB is refused too (0 would refuse every body).
    c.time_scale = 1.0;
    c.max_body_bytes = 0;
    let e = ProviderResponder::new(c).err().expect("refused");
    assert!(e.to_string().contains("max_body_bytes"), "{e}");
}
