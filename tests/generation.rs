//! A generating provider in scenarios (`output_tokens`, `ttft`, `tpot` on a provider): its
//! model turns last ttft + (output tokens - 1) x tpot, on both arms (virtual time exactly, real
//! time over HTTP within a few per cent), summary.json's `generation` says so (tokens, end to
//! end, first token and time per token where seen), and a model turn with a latency of its own
//! on such a provider is refused before anything runs.

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim::{self, RealtimeOptions};
use capsize::api::summary::Summary;

/// One session, ten queries: a local tool call (100 ms), a model turn (400 ms to the first of
/// 100 tokens, 10 ms each after it: 1,390 ms), a tool call again: 1,590 ms a query.
const GENERATING: &str = r#"
name = "generating"
seed = 1
[providers.llm]
rpm = 6000
output_tokens = 100
ttft = { dist = "constant", ms = 400 }
tpot = { dist = "constant", ms = 10 }
latency = { dist = "constant", ms = 1 }
[workload]
sessions = 1
queries = 10
rounds = 2
calls_per_query = 1
tokens_per_call = 0
provider = "none"
model_turn = { tokens = 100, provider = "llm" }
tools = [ { name = "calc", provider = "none", latency = { dist = "constant", ms = 100 } } ]
[scheduler]
max_concurrency = 1
"#;

/// [`GENERATING`] with `keys` added to its model turn (`"stream = true, "`).
fn with_turn(keys: &str) -> String {
    GENERATING.replace(
        "model_turn = { tokens = 100, provider = \"llm\" }",
        &format!("model_turn = {{ tokens = 100, {keys}provider = \"llm\" }}"),
    )
}

/// [`GENERATING`] with its model turns streamed (and so their first tokens seen).
fn streamed() -> String {
    with_turn("stream = true, ")
}

/// The summary of `s`'s virtual-time run.
fn run(s: &Scenario) -> Summary {
    Summary::new(s, &sim::run(s).unwrap())
}

fn scenario(toml: &str) -> Result<Scenario, String> {
    parse(toml, Path::new("test.toml"), &[]).map_err(|e| e.to_string())
}

#[test]
fn a_model_turn_lasts_its_first_token_and_the_rest_in_virtual_time() {
    let sum = run(&scenario(&streamed()).unwrap());
    assert_eq!(sum.calls, 30);
    // The recorder's histograms keep 3 significant digits: 1,590 ms reads back as 1,590.271.
    let q = sum.latency_ms.query;
    assert_eq!((q.count, q.p50, q.max), (10, 1590.271, 1590.271));
    // summary.json's `generation`: 10 answers of 100 tokens, each 400 ms to the first token,
    // 10 ms between the others, 1,390 ms in all; 1,000 tokens over the run's 15.9 s.
    let g = sum.generation.expect("a generating provider answered");
    assert_eq!((g.calls, g.output_tokens), (10, 1000));
    assert_eq!(g.output_tokens_per_s, 62.893);
    assert_eq!(g.end_to_end_ms.p50, 1390.591);
    assert_eq!(g.ttft_ms.map(|t| (t.count, t.p50)), Some((10, 400.127)));
    assert_eq!(g.tpot_ms.map(|t| (t.count, t.p50)), Some((10, 10.007)));
}

#[test]
fn an_answer_not_streamed_shows_no_first_token() {
    let g = run(&scenario(GENERATING).unwrap())
        .generation
        .expect("a generating provider answered");
    assert_eq!((g.calls, g.output_tokens), (10, 1000));
    assert_eq!(g.end_to_end_ms.p50, 1390.591);
    assert_eq!((g.ttft_ms, g.tpot_ms), (None, None));
}

#[test]
fn max_tokens_caps_the_answer_and_is_charged() {
    let s = scenario(&with_turn("max_tokens = 50, ")).unwrap();
    assert_eq!(s.workload.model_turn.as_ref().map(|t| t.tokens), Some(150));
    let sum = run(&s);
    // 400 ms to the first of 50 tokens, 49 x 10 ms after it: 890 ms; with the tools, 1,090.
    let g = sum.generation.expect("a generating provider answered");
    assert_eq!((g.calls, g.output_tokens), (10, 500));
    assert_eq!(g.end_to_end_ms.p50, 890.367);
    assert_eq!(sum.latency_ms.query.p50, 1090.559);
}

#[test]
fn real_time_agrees_with_virtual_time_on_a_streamed_answer() {
    let s = scenario(&streamed()).unwrap();
    let out = sim::run_realtime(
        &s,
        &RealtimeOptions {
            time_scale: 5.0,
            target: None,
            fleet_redis: None,
            single_run: true,
            replica: None,
            announce: None,
        },
    )
    .unwrap();
    let g = Summary::new(&s, &out)
        .generation
        .expect("a generating provider answered");
    // Tokens and the first token read from the event stream as it came. At 5x, a stall of
    // 4 ms on a machine busy with other tests is 20 ms of model time: within 10 %.
    assert_eq!((g.calls, g.output_tokens), (10, 1000));
    let ttft = g
        .ttft_ms
        .expect("a streamed answer shows its first token")
        .p50;
    assert!((ttft - 400.0).abs() < 0.1 * 400.0, "real-time ttft {ttft}");
    let tpot = g.tpot_ms.expect("and its time per token").p50;
    assert!((tpot - 10.0).abs() < 0.1 * 10.0, "real-time tpot {tpot}");
}

#[test]
fn real_time_agrees_with_virtual_time_on_a_generating_provider() {
    let s = scenario(GENERATING).unwrap();
    let out = sim::run_realtime(
        &s,
        &RealtimeOptions {
            time_scale: 10.0,
            target: None,
            fleet_redis: None,
            single_run: true,
            replica: None,
            announce: None,
        },
    )
    .unwrap();
    let sum = Summary::new(&s, &out);
    let p50 = sum.latency_ms.query.p50;
    assert!(
        (p50 - 1590.0).abs() < 0.05 * 1590.0,
        "real-time query p50 {p50}"
    );
    // The tokens come from each answer's `usage`; not streamed, no first token is seen.
    let g = sum.generation.expect("a generating provider answered");
    assert_eq!((g.calls, g.output_tokens), (10, 1000));
    let e2e = g.end_to_end_ms.p50;
    assert!(
        (e2e - 1390.0).abs() < 0.05 * 1390.0,
        "real-time end to end {e2e}"
    );
    assert_eq!((g.ttft_ms, g.tpot_ms), (None, None));
}

#[test]
fn a_model_turn_latency_on_a_generating_provider_is_refused() {
    let toml = GENERATING.replace(
        "model_turn = { tokens = 100, provider = \"llm\" }",
        "model_turn = { tokens = 100, provider = \"llm\", latency = { dist = \"constant\", ms = 5 } }",
    );
    let err = scenario(&toml).unwrap_err();
    assert!(
        err.contains(
            "workload.model_turn.latency: the model turns' provider \"llm\" generates its \
             answers (output_tokens, ttft, tpot)"
        ),
        "{err}"
    );
}

#[test]
fn output_tokens_are_settled_to_what_was_generated_in_a_run() {
    // otpm 1,000 and max_tokens 500: charged as 500 at admission, the third turn of the
    // minute would be refused; settled to the 100 generated at each last token, six fit
    // (5 x 100 + 500 = 1,000).
    let toml = with_turn("max_tokens = 500, ")
        .replace("rpm = 6000", "rpm = 6000\notpm = 1000")
        .replace("queries = 10", "queries = 6");
    let sum = run(&scenario(&toml).unwrap());
    let llm = &sum.providers["llm"].counts.counters;
    assert_eq!((llm.received, llm.served, llm.rate_limited), (6, 6, 0));
    assert_eq!(sum.calls, 18);
}

#[test]
fn a_max_tokens_over_the_output_limit_is_refused_before_the_run() {
    let toml = with_turn("max_tokens = 2000, ").replace("rpm = 6000", "rpm = 6000\notpm = 1000");
    assert_eq!(
        scenario(&toml).unwrap_err(),
        "test.toml:18:30: workload.model_turn.max_tokens: a request of 2000 output tokens can never \
         be served under provider.otpm = 1000: it is more than the whole per-minute limit"
    );
}
