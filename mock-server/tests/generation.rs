//! A generating provider (`output_tokens`, `ttft`, `tpot`): a model call's answer is its output
//! tokens, the first after `ttft` and each next one `tpot` later, capped at its `max_tokens`.
//! Pinned call by call on the model (exact latencies, the cap, queueing before the first token,
//! tool calls untouched, a phase that slows the first token), in the mock's answers (`usage`
//! reports the tokens generated), and bad tables refused naming the key.

mod common;

use std::path::Path;
use std::time::Duration;

use capsize_mock::{
    ConfigError, Generated, Outcome, ProviderModel, RawProvider, RawTokens, Service,
};
use common::{chat_body, post};
use serde_json::{json, Value};

const GENERATING: &str = "output_tokens = 200\nttft = { dist = \"constant\", ms = 500 }\n\
                          tpot = { dist = \"constant\", ms = 20 }\n";

fn config(table: &str) -> Result<capsize_mock::ProviderConfig, ConfigError> {
    let table = format!("latency = {{ dist = \"constant\", ms = 100 }}\n{table}");
    let raw: RawProvider =
        toml::from_str(&table).map_err(|e| ConfigError::new("toml", e.to_string()))?;
    raw.build(Path::new("."))
}

fn model(table: &str) -> ProviderModel {
    ProviderModel::new(config(table).expect("the table builds"), 1)
}

fn model_call(max_tokens: Option<u64>) -> Service<'static> {
    Service {
        model_call: true,
        max_tokens,
        ..Service::default()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_model_call_lasts_ttft_then_one_tpot_per_further_token() {
    let mut m = model(GENERATING);
    let d = m.on_request_with(ms(0), 10, model_call(None));
    assert_eq!(d.outcome, Outcome::Served);
    // 500 ms to the first token, 199 more at 20 ms: the last at 4,480 ms.
    assert_eq!(d.latency, Some(ms(4_480)));
    assert_eq!(
        d.generated,
        Some(Generated {
            output_tokens: 200,
            first_token: ms(500)
        })
    );
    // max_tokens caps the answer, and so its length.
    let d = m.on_request_with(ms(0), 10, model_call(Some(50)));
    assert_eq!(d.latency, Some(ms(500 + 49 * 20)));
    assert_eq!(d.generated.map(|g| g.output_tokens), Some(50));
    // A tool call to the same provider is served after its latency, generating nothing.
    let d = m.on_request_with(ms(0), 10, Service::default());
    assert_eq!((d.latency, d.generated), (Some(ms(100)), None));
}

#[test]
fn a_queued_model_call_gets_its_first_token_after_the_wait() {
    let mut m = model(&format!("{GENERATING}max_in_flight = 1\n"));
    m.on_request_with(ms(0), 10, model_call(Some(10)));
    // The one server is busy until 500 + 9 x 20 = 680 ms.
    let d = m.on_request_with(ms(100), 10, model_call(Some(10)));
    assert_eq!(d.queued, ms(580));
    assert_eq!(d.latency, Some(ms(580 + 680)));
    assert_eq!(d.generated.map(|g| g.first_token), Some(ms(580 + 500)));
}

#[test]
fn only_a_served_call_has_generated_anything() {
    let mut m = model(&format!("{GENERATING}rpm = 1\nerror_rate = 0\n"));
    assert!(m
        .on_request_with(ms(0), 10, model_call(None))
        .generated
        .is_some());
    let refused = m.on_request_with(ms(1), 10, model_call(None));
    assert_eq!(
        (refused.outcome, refused.generated),
        (Outcome::RateLimited, None)
    );
    let mut m = model(&format!("{GENERATING}error_rate = 1\n"));
    let failed = m.on_request_with(ms(0), 10, model_call(None));
    assert_eq!(
        (failed.outcome, failed.generated),
        (Outcome::Error(529), None)
    );
}

#[test]
fn a_phase_can_slow_the_first_token_alone() {
    let mut m = model(&format!(
        "{GENERATING}[[phases]]\nfrom_s = 10\nto_s = 20\nttft = {{ dist = \"constant\", ms = 3000 }}\n"
    ));
    let before = m.on_request_with(ms(0), 10, model_call(Some(2)));
    let during = m.on_request_with(ms(15_000), 10, model_call(Some(2)));
    let after = m.on_request_with(ms(25_000), 10, model_call(Some(2)));
    assert_eq!(before.latency, Some(ms(520)));
    assert_eq!(during.latency, Some(ms(3_020)));
    assert_eq!(after.latency, Some(ms(520)));
}

#[test]
fn output_token_draws_follow_their_distribution() {
    // A log-normal of mean 300: the mean of 40,000 draws within 4 standard errors (its sd
    // is about 0.7 x the mean for this p95, so a standard error of about 1.05 tokens).
    let raw: RawTokens =
        toml::from_str::<toml::Table>("t = { dist = \"lognormal\", mean = 300, p95 = 700 }")
            .unwrap()["t"]
            .clone()
            .try_into()
            .unwrap();
    let dist = raw.build("t").unwrap();
    let mut rng = <rand::rngs::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(5);
    let n = 40_000;
    let draws: Vec<u64> = (0..n).map(|_| dist.sample(&mut rng)).collect();
    let mean = draws.iter().sum::<u64>() as f64 / n as f64;
    assert!((mean - 300.0).abs() < 4.0 * 1.05 * 1.2, "mean {mean}");
    assert!(draws.iter().all(|&d| d >= 1));
    // Uniform counts stay within their bounds, both reached.
    let raw: RawTokens =
        toml::from_str::<toml::Table>("t = { dist = \"uniform\", min = 5, max = 8 }").unwrap()["t"]
            .clone()
            .try_into()
            .unwrap();
    let dist = raw.build("t").unwrap();
    let draws: Vec<u64> = (0..1000).map(|_| dist.sample(&mut rng)).collect();
    assert_eq!(draws.iter().min(), Some(&5));
    assert_eq!(draws.iter().max(), Some(&8));
}

#[test]
fn bad_generation_tables_are_refused_naming_the_key() {
    let err = |t: &str| config(t).unwrap_err().to_string();
    assert_eq!(
        err("ttft = { dist = \"constant\", ms = 500 }\n"),
        "provider.output_tokens: missing: a generating provider needs output_tokens, ttft and \
         tpot together (a model call's latency is ttft + (output tokens - 1) x tpot); add \
         output_tokens and tpot, or remove the others"
    );
    assert_eq!(
        err("output_tokens = 0\nttft = { dist = \"constant\", ms = 1 }\ntpot = { dist = \"constant\", ms = 1 }\n"),
        "provider.output_tokens: must be a number of tokens in [1, 10000000], got 0"
    );
    assert_eq!(
        err("output_tokens = { dist = \"uniform\", min = 9, max = 3 }\nttft = { dist = \"constant\", ms = 1 }\ntpot = { dist = \"constant\", ms = 1 }\n"),
        "provider.output_tokens.max: must be at least min (9), got 3"
    );
    assert!(
        err("output_tokens = { dist = \"lognormal\", mean = 300, p95 = 200 }\nttft = { dist = \"constant\", ms = 1 }\ntpot = { dist = \"constant\", ms = 1 }\n")
            .starts_with("provider.output_tokens.p95: a log-normal with mean 300 needs a p95 above the mean"),
    );
    assert!(
        err("output_tokens = 10\nttft = { dist = \"constant\", ms = -1 }\ntpot = { dist = \"constant\", ms = 1 }\n")
            .starts_with("provider.ttft.ms: "),
    );
}

#[tokio::test]
async fn the_mock_reports_the_tokens_it_generated() {
    // At 1,000x: each answer takes 4.48 ms of real time.
    let m = common::start_with(GENERATING, 1000.0, &[]).await;
    let r = post(&m, "/v1/chat/completions", &chat_body("hello", 50)).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    // 5 characters: 2 prompt tokens; 50 output tokens, capped by max_tokens.
    assert_eq!(
        body["usage"],
        json!({ "prompt_tokens": 2, "completion_tokens": 50, "total_tokens": 52 })
    );
    let anthropic = json!({"model": "c", "max_tokens": 1000,
        "messages": [{"role": "user", "content": "hello"}]});
    let r = post(&m, "/v1/messages", &anthropic).await;
    let body: Value = r.json().await.unwrap();
    // Under a cap of 1,000 the provider's own 200.
    assert_eq!(
        body["usage"],
        json!({ "input_tokens": 2, "output_tokens": 200 })
    );
    // A tool call generates nothing.
    let r = post(&m, "/tools/search", &json!({})).await;
    assert_eq!(r.status(), 200);
    // /config says how it generates, so a run expecting another provider refuses this mock.
    let c = common::get_json(&m, "/config").await;
    assert_eq!(c["model"]["provider.output_tokens"], "200");
    assert_eq!(
        c["model"]["provider.ttft"],
        r#"{ dist = "constant", ms = 500 }"#
    );
    assert_eq!(
        c["model"]["provider.tpot"],
        r#"{ dist = "constant", ms = 20 }"#
    );
    let plain = common::start_with("", 1000.0, &[]).await;
    let plain = common::get_json(&plain, "/config").await;
    assert!(plain["model"].get("provider.ttft").is_none());
}
