//! The client's own time (`[scheduler.client]`) in virtual time: work before an attempt leaves
//! and after its answer comes, queueing for the client's threads, one client per replica, its
//! own phase in summary.json, and nothing at all without the table.

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim::{self, SimOutcome};
use capsize::api::summary::Summary;

/// `toml` with `sets`, validated.
fn scenario(toml: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    parse(toml, Path::new("t.toml"), &sets).unwrap_or_else(|e| panic!("{e}"))
}

/// `toml` with `sets`, simulated.
fn run(toml: &str, sets: &[&str]) -> SimOutcome {
    sim::run(&scenario(toml, sets)).unwrap_or_else(|e| panic!("{e}"))
}

/// The run's client times: (count, min, max) in µs.
fn client_times(out: &SimOutcome) -> (u64, u64, u64) {
    let client = out
        .recording
        .client
        .as_ref()
        .expect("a client model records its time");
    (client.len(), client.min(), client.max())
}

/// 20 queries of one call each, all at once, against a 50 ms provider with no limit in reach;
/// the client's sends take 1 ms each.
const TWENTY_AT_ONCE: &str = r#"
name = "twenty-at-once"
[provider]
rpm = 1000000
tpm = 1000000000
latency = { dist = "constant", ms = 50 }
[workload]
sessions = 20
queries_per_session = 1
calls_per_query = 1
tokens_per_call = 1
[scheduler]
client = { send = { dist = "constant", ms = 1 } }
"#;

/// The run's call latencies' (min, max, count) and its client times' (min, max), in µs at the
/// histograms' resolution.
fn spread(sets: &[&str]) -> ((u64, u64, u64), (u64, u64)) {
    let out = run(TWENTY_AT_ONCE, sets);
    let (call, client) = (&out.recording.call, out.recording.client.as_ref().unwrap());
    let at = |h: &hdrhistogram::Histogram<u64>, v: u64| h.median_equivalent(v);
    (
        (at(call, call.min()), at(call, call.max()), call.len()),
        (at(client, client.min()), at(client, client.max())),
    )
}

fn us(h: u64) -> u64 {
    // The median equivalent of a value at 3 significant digits, as `spread` reads them.
    let h0 = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 86_400_000_000, 3).unwrap();
    h0.median_equivalent(h)
}

#[test]
fn sends_queue_for_one_thread_so_the_nth_call_leaves_n_ms_late() {
    // The n-th send ends at n ms: the call is answered at n + 50 ms, having spent n ms of
    // its own (n - 1 waiting for the thread).
    let (call, client) = spread(&[]);
    assert_eq!(call, (us(51_000), us(70_000), 20));
    assert_eq!(client, (us(1_000), us(20_000)));
}

#[test]
fn calls_on_new_connections_leave_together_after_every_send() {
    // Each opens its connection 1 ms after its send and writes its request in a turn behind
    // the sends still waiting: the first 19 leave at 20 ms, once all sends are done, the last
    // at 21 ms, when its connection opens.
    let (call, client) = spread(&["scheduler.client.connect={ dist = \"constant\", ms = 1 }"]);
    assert_eq!(call, (us(70_000), us(71_000), 20));
    assert_eq!(client, (us(20_000), us(21_000)));
}

#[test]
fn more_threads_or_more_replicas_take_the_queue_apart() {
    // Two threads: two sends at a time, the last leaves at 10 ms.
    let (call, client) = spread(&["scheduler.client.threads=2"]);
    assert_eq!(
        (call, client),
        ((us(51_000), us(60_000), 20), (us(1_000), us(10_000)))
    );
    // Two replicas, each with its own event loop: the same.
    let (call, client) = spread(&["fleet.replicas=2"]);
    assert_eq!(
        (call, client),
        ((us(51_000), us(60_000), 20), (us(1_000), us(10_000)))
    );
}

#[test]
fn parse_work_comes_after_the_answer_and_queues_behind_the_others() {
    // Sends of 1 ms, parses of 2 ms: the n-th leaves at n ms and is answered at n + 50, but the
    // parses queue from the first answer at 51 ms: the n-th is done at 51 + 2n.
    let (call, client) = spread(&["scheduler.client.parse={dist=\"constant\",ms=2}"]);
    assert_eq!(call, (us(53_000), us(91_000), 20));
    // The first call's own time is its 1 ms send and 2 ms parse; the last's, 20 ms to send
    // and, answered at 70 ms, 21 ms until its parse is done at 91 ms.
    assert_eq!(client, (us(3_000), us(41_000)));
}

#[test]
fn every_attempt_costs_the_client_and_a_timeout_has_nothing_to_parse() {
    // One call against a provider that takes 200 ms, timed out at 100 ms and retried once
    // after 1 s: two sends of 1 ms, no parse (no answer came); the call fails after 2 × 101 ms
    // and the backoff.
    let toml = r#"
name = "timeouts"
[provider]
latency = { dist = "constant", ms = 200 }
[workload]
sessions = 1
queries_per_session = 1
calls_per_query = 1
tokens_per_call = 1
[scheduler]
timeout_ms = 100
retry = { max_retries = 1, base_ms = 1000, cap_ms = 1000, jitter = "none" }
client = { send = { dist = "constant", ms = 1 }, parse = { dist = "constant", ms = 5 } }
"#;
    let out = run(toml, &[]);
    assert_eq!(client_times(&out), (2, 1_000, 1_000));
    assert_eq!(out.recording.calls.failed, 1);
    // 1 ms + 100 ms, 1 s of backoff, 1 ms + 100 ms.
    assert_eq!(out.span, std::time::Duration::from_millis(1_202));
    // A timed-out attempt closes its connection: the retry opens another, 3 ms more each.
    let out = run(
        toml,
        &["scheduler.client.connect={ dist = \"constant\", ms = 3 }"],
    );
    assert_eq!(values_ms(out.recording.client.as_ref().unwrap()), [4, 4]);
    assert_eq!(out.span, std::time::Duration::from_millis(1_208));
}

#[test]
fn the_client_time_is_its_own_phase_in_summary_json_and_absent_without_the_table() {
    let with = scenario(TWENTY_AT_ONCE, &[]);
    let summary = Summary::new(&with, &run(TWENTY_AT_ONCE, &[]));
    let json = serde_json::to_value(&summary).unwrap();
    let client = &json["latency_ms"]["client"];
    assert_eq!(client["count"], 20);
    assert_eq!(client["p50"].as_f64().map(f64::round), Some(10.0));
    let without: String = TWENTY_AT_ONCE
        .lines()
        .filter(|l| !l.starts_with("client"))
        .collect::<Vec<_>>()
        .join("\n");
    let summary = Summary::new(&scenario(&without, &[]), &run(&without, &[]));
    let json = serde_json::to_value(&summary).unwrap();
    assert!(json["latency_ms"].get("client").is_none(), "{json}");
    assert_eq!(
        json["latency_ms"]["call"]["max"].as_f64().map(f64::round),
        Some(50.0)
    );
}

#[test]
fn a_preset_is_the_sdks_measured_time_and_reads_from_the_scenario() {
    // The openai SDK's preset: 1.75 ms a request on one loop (1.0 to send, 0.75 to parse, each
    // exponential). With 50 tasks the loop is the bottleneck: about 50 × 1.75 ms a call.
    let toml = TWENTY_AT_ONCE
        .replace("sessions = 20", "sessions = 50")
        .replace("queries_per_session = 1", "queries_per_session = 40")
        .replace(
            "client = { send = { dist = \"constant\", ms = 1 } }",
            "client = { preset = \"openai-python\" }",
        );
    let out = run(&toml, &[]);
    let p50 = out.recording.call.value_at_quantile(0.5) as f64 / 1000.0;
    assert!((p50 - 87.5).abs() < 87.5 * 0.03, "p50 {p50} ms");
}

#[test]
fn a_tool_the_agent_runs_itself_costs_the_client_nothing() {
    // A query: a model turn around one round of one tool call that runs in the agent
    // (`provider = "none"`). Only the two model turns go through the client: two attempts'
    // time recorded, and the tool call takes its 10 ms.
    let toml = r#"
name = "local-tool"
[providers.llm]
latency = { dist = "constant", ms = 50 }
[workload]
sessions = 1
queries_per_session = 1
calls_per_query = 1
tokens_per_call = 1
provider = "none"
tools = [{ name = "t", provider = "none", latency = { dist = "constant", ms = 10 } }]
model_turn = { tokens = 1, at = "around", provider = "llm" }
[scheduler]
client = { send = { dist = "constant", ms = 1 }, parse = { dist = "constant", ms = 1 } }
"#;
    let out = run(toml, &[]);
    assert_eq!(client_times(&out), (2, 2_000, 2_000));
    // Two turns of 52 ms and the tool's 10 ms.
    assert_eq!(out.span, std::time::Duration::from_millis(114));
}

/// Two sessions of two queries of one call, against a 50 ms provider; the client (one thread)
/// sends in 1 ms, warms up for 10 ms once and opens a connection in 2 ms.
fn two_by_two() -> String {
    TWENTY_AT_ONCE
        .replace("sessions = 20", "sessions = 2")
        .replace("queries_per_session = 1", "queries_per_session = 2")
        .replace(
            "client = { send = { dist = \"constant\", ms = 1 } }",
            "client = { send = { dist = \"constant\", ms = 1 }, warmup = { dist = \"constant\", \
             ms = 10 }, connect = { dist = \"constant\", ms = 2 } }",
        )
}

/// Each recorded value of `h`, in whole ms, ascending.
fn values_ms(h: &hdrhistogram::Histogram<u64>) -> Vec<u64> {
    let mut v = Vec::new();
    for r in h.iter_recorded() {
        let ms = (h.median_equivalent(r.value_iterated_to()) as f64 / 1000.0).round() as u64;
        v.extend(std::iter::repeat_n(ms, r.count_at_value() as usize));
    }
    v
}

#[test]
fn the_first_attempt_warms_up_and_new_connections_cost_until_the_pool_has_them() {
    // A's first send is the warm-up and its send, 11 ms on the thread; it opens a connection
    // off the thread (2 ms) while B sends (11-12 ms), and writes its request at 13 ms. B's
    // connection opens at 14 ms and it leaves then. Answered at 63 and 64 ms, each gives its
    // connection back, and each second query takes one: 1 ms to send, 51 ms in all.
    let out = run(&two_by_two(), &[]);
    assert_eq!(values_ms(&out.recording.call), [51, 51, 63, 64]);
    let client = out.recording.client.as_ref().unwrap();
    assert_eq!(values_ms(client), [1, 1, 13, 14]);
    // A pool that keeps no idle connection: every attempt opens one, 2 ms more (its turn to
    // write comes at once, the thread being free).
    let out = run(&two_by_two(), &["scheduler.client.keepalive=0"]);
    assert_eq!(values_ms(&out.recording.call), [53, 53, 63, 64]);
}
