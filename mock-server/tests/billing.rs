//! What a priced provider bills, request by request, worked by hand: a served answer is billed
//! (its prompt at the input and cached rates, its output at the output rate: what it generated,
//! or its `max_tokens`); a 429 and a request never answered are not; a 5xx only with
//! `bill_errors`; a phase's price holds for the requests that arrive in it. Over HTTP, a billed
//! answer carries its bill in `x-capsize-bill`, and `/stats` adds them up.

mod common;

use std::path::Path;
use std::time::Duration;

use capsize_mock::{Bill, ConfigError, Outcome, ProviderModel, RawProvider, Service};

/// $3 a million prompt tokens, $15 a million answer tokens: 3e6 and 15e6 picodollars a token.
const PRICE: &str = "price = { input_per_mtok = 3.0, output_per_mtok = 15.0 }\n";

fn model(table: &str) -> ProviderModel {
    let table = format!("latency = {{ dist = \"constant\", ms = 100 }}\n{table}");
    let raw: RawProvider = toml::from_str(&table).expect("the table parses");
    ProviderModel::new(raw.build(Path::new(".")).expect("the table builds"), 1)
}

fn build_err(table: &str) -> ConfigError {
    let table = format!("latency = {{ dist = \"constant\", ms = 100 }}\n{table}");
    let raw: RawProvider = toml::from_str(&table).expect("the table parses");
    raw.build(Path::new(".")).unwrap_err()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn call(max_tokens: Option<u64>) -> Service<'static> {
    Service {
        model_call: true,
        max_tokens,
        ..Service::default()
    }
}

#[test]
fn a_served_answer_is_billed_and_a_refusal_is_not() {
    let mut m = model(&format!("rpm = 2\nwindow = \"fixed\"\n{PRICE}"));
    // 1,000 tokens, 200 of them max_tokens: an 800-token prompt and a 200-token answer.
    let d = m.on_request_with(ms(0), 1_000, call(Some(200)));
    assert_eq!(d.outcome, Outcome::Served);
    // 800 x 3e6 + 200 x 15e6 = 2.4e9 + 3e9 = 5.4e9 p$.
    let first = Bill {
        requests: 1,
        input_tokens: 800,
        cached_input_tokens: 0,
        output_tokens: 200,
        input_picodollars: 2_400_000_000,
        cached_input_picodollars: 0,
        output_picodollars: 3_000_000_000,
    };
    assert_eq!(d.bill.as_deref(), Some(&first));
    // A tool call with no max_tokens: all prompt. 50 x 3e6 = 1.5e8 p$.
    let d = m.on_request(ms(1), 50);
    assert_eq!(
        d.bill.as_deref().map(|b| (b.input_tokens, b.picodollars())),
        Some((50, 150_000_000))
    );
    // The minute's two are spent: a 429, not billed.
    let d = m.on_request(ms(2), 50);
    assert_eq!((d.outcome, d.bill), (Outcome::RateLimited, None));
    let c = m.counters();
    assert_eq!(c.billed.requests, 2);
    assert_eq!(c.billed.picodollars(), 5_550_000_000);
    assert_eq!(c.billed.usd(), 0.00555);
}

#[test]
fn a_generating_provider_bills_what_it_generated_and_caches_a_share() {
    let gen = "output_tokens = 120\nttft = { dist = \"constant\", ms = 100 }\ntpot = { dist = \"constant\", ms = 10 }\n";
    let price = "price = { input_per_mtok = 2.5, output_per_mtok = 10.0, cached_input_per_mtok = 1.25, cached_input_share = 0.5 }\n";
    let mut m = model(&format!("{gen}{price}"));
    // 1,500 tokens, 500 of them max_tokens: a 1,000-token prompt, half cached; 120 generated.
    let d = m.on_request_with(ms(0), 1_500, call(Some(500)));
    let b = d.bill.map(|b| *b).expect("billed");
    assert_eq!(
        (b.input_tokens, b.cached_input_tokens, b.output_tokens),
        (500, 500, 120)
    );
    // 500 x 2.5e6 + 500 x 1.25e6 + 120 x 10e6 = 1.25e9 + 6.25e8 + 1.2e9 = 3.075e9 p$.
    assert_eq!(b.picodollars(), 3_075_000_000);
}

#[test]
fn errors_are_billed_only_when_the_price_says_and_no_answer_never() {
    for (bill_errors, billed) in [(false, 0), (true, 1)] {
        let price = format!(
            "price = {{ input_per_mtok = 1.0, output_per_mtok = 1.0, bill_errors = {bill_errors} }}\n"
        );
        let mut m = model(&format!("error_rate = 1.0\n{price}"));
        let d = m.on_request(ms(0), 10);
        assert!(matches!(d.outcome, Outcome::Error(_)), "{:?}", d.outcome);
        assert_eq!(
            m.counters().billed.requests,
            billed,
            "bill_errors = {bill_errors}"
        );
    }
    let mut m = model(&format!("timeout_rate = 1.0\n{PRICE}"));
    let d = m.on_request(ms(0), 10);
    assert_eq!((d.outcome, d.bill), (Outcome::Timeout, None));
    // An outage's 503 is a refusal: not billed, whatever bill_errors says.
    let mut m = model(
        "price = { input_per_mtok = 1.0, output_per_mtok = 1.0, bill_errors = true }\n[[phases]]\nat_s = 0\noutage = \"503\"\n",
    );
    assert_eq!(m.on_request(ms(0), 10).bill, None);
}

#[test]
fn a_phase_bills_at_its_own_price() {
    // From 10 s to 20 s another model at $30 a million prompt tokens.
    let mut m = model(&format!(
        "{PRICE}[[phases]]\nfrom_s = 10\nto_s = 20\nprice = {{ input_per_mtok = 30.0, output_per_mtok = 60.0 }}\n"
    ));
    let before = m.on_request(ms(0), 100).bill.map(|b| *b).expect("billed");
    let during = m
        .on_request(ms(15_000), 100)
        .bill
        .map(|b| *b)
        .expect("billed");
    let after = m
        .on_request(ms(25_000), 100)
        .bill
        .map(|b| *b)
        .expect("billed");
    assert_eq!(
        [
            before.picodollars(),
            during.picodollars(),
            after.picodollars()
        ],
        [300_000_000, 3_000_000_000, 300_000_000]
    );
    assert_eq!(m.phase_counters()[0].billed, during);
    assert_eq!(m.counters().billed.picodollars(), 3_600_000_000);
}

#[test]
fn bad_prices_are_refused_naming_the_key() {
    let e = build_err("price = { input_per_mtok = -1.0, output_per_mtok = 1.0 }\n");
    assert_eq!(e.key, "provider.price.input_per_mtok");
    let e = build_err(
        "price = { input_per_mtok = 1.0, output_per_mtok = 1.0, cached_input_share = 1.5 }\n",
    );
    assert_eq!(e.key, "provider.price.cached_input_share");
    let e = build_err(
        "price = { input_per_mtok = 1.0, output_per_mtok = 1.0 }\n[[phases]]\nat_s = 5\nprice = { input_per_mtok = 1.0, output_per_mtok = 1e9 }\n",
    );
    assert_eq!(e.key, "provider.phases[0].price.output_per_mtok");
    let raw: Result<RawProvider, _> = toml::from_str(
        "latency = { dist = \"constant\", ms = 1 }\nprice = { input_per_mtok = 1.0, output_per_mtok = 1.0, per_request = 2.0 }\n",
    );
    assert!(raw.is_err(), "an unknown key in price is refused");
}

#[tokio::test]
async fn a_billed_answer_carries_its_bill_and_stats_add_them_up() {
    let m = common::start(&format!("rpm = 1\nwindow = \"fixed\"\n{PRICE}")).await;
    let send = || async {
        common::client()
            .post(format!("{}/v1/chat/completions", m.uri()))
            .header("x-capsize-tokens", "40")
            .json(&common::chat_body("hi", 1))
            .send()
            .await
            .unwrap()
    };
    let served = send().await;
    assert_eq!(served.status(), 200);
    let bill = served.headers()["x-capsize-bill"]
        .to_str()
        .unwrap()
        .to_string();
    let bill = Bill::parse_header(&bill).expect("a bill");
    // 40 tokens, max_tokens 1: a 39-token prompt and a 1-token answer.
    assert_eq!(
        (bill.input_tokens, bill.output_tokens, bill.picodollars()),
        (39, 1, 39 * 3_000_000 + 15_000_000)
    );
    let refused = send().await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get("x-capsize-bill").is_none());
    let stats = common::stats(&m).await;
    assert_eq!(stats["billed"]["requests"], 1);
    assert_eq!(stats["billed"]["output_picodollars"], 15_000_000);
}
