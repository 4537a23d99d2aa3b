//! `capsize calibrate` with both sides of the model calls: exec's record of what the provider
//! answered beside the agent's spans of what it saw. The difference is the client's own time,
//! fitted as `[scheduler] client` by replaying the scenario.

mod common;

use std::path::PathBuf;

use common::calib::{calibrate, f, report, scenario, span_json};
use common::stderr;
use common::temp::Temp;

/// 4 sessions back to back, each query one model call: the provider's record (calls.jsonl)
/// says it answered in 100 ms, the agent's spans that the call took it 110 ms.
fn both_sides(t: &Temp) -> (PathBuf, PathBuf) {
    let chat = r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},{"key":"gen_ai.request.model","value":{"stringValue":"m"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"900"}}"#;
    let (mut spans, mut calls) = (Vec::new(), String::new());
    for session in 0..4u32 {
        let agent = format!(
            r#"{{"key":"gen_ai.operation.name","value":{{"stringValue":"invoke_agent"}}}},{{"key":"gen_ai.conversation.id","value":{{"stringValue":"s{session}"}}}}"#
        );
        for q in 0..150u32 {
            let trace = session * 1_000 + q + 1;
            let at = u64::from(q) * 111 + u64::from(session) * 7;
            spans.push(span_json(
                trace,
                trace * 10 + 1,
                trace * 10,
                at + 1,
                at + 111,
                chat,
            ));
            spans.push(span_json(trace, trace * 10, 0, at, at + 111, &agent));
            calls.push_str(&format!(
                "{{\"capsize_call\":1,\"unix_ns\":{},\"provider\":\"openai\",\"route\":\"model\",\"model\":\"m\",\"status\":200,\"latency_ms\":100,\"input_tokens\":900,\"max_tokens\":100}}\n",
                1_760_000_000_000_000_000u64 + (at + 6) * 1_000_000
            ));
        }
    }
    let traces = spans
        .chunks(100)
        .map(|c| {
            format!(
                r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
                c.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    (
        t.write("traces.jsonl", &format!("{traces}\n")),
        t.write("calls.jsonl", &calls),
    )
}

#[test]
fn the_agents_time_beyond_the_providers_is_fitted_as_the_clients_own() {
    let t = Temp::new("calibrate", "client-time");
    let (traces, calls) = both_sides(&t);
    let out = t.path("out");
    let o = calibrate(&[&traces, &calls], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fit = &report(&out)["client"];
    let n = |k: &str| fit[k].as_f64().unwrap_or_else(|| panic!("{k}: {fit}"));
    assert_eq!((n("observed_p50_ms"), n("provider_p50_ms")), (110.0, 100.0));
    // Replayed without it, the calls take the provider's 100 ms; with the fitted work, the
    // agent's 110 (to half a percent, the fit's stop). The work is less than the 10 ms gap:
    // four sessions back to back on one thread wait for each other there (8.7 ms here).
    assert!((n("without_p50_ms") - 100.0).abs() < 1.0, "{fit}");
    assert!((n("with_p50_ms") - 110.0).abs() <= 0.55, "{fit}");
    assert!((5.0..10.0).contains(&n("work_ms")), "{fit}");
    // The scenario carries it, and the check's model call p50 is the agent's.
    let s = scenario(&out);
    let client = &s["scheduler"]["client"];
    assert_eq!(client["threads"].as_integer(), Some(1));
    assert!(
        (f(&client["send"]["mean_ms"]) * 2.0 - n("work_ms")).abs() < 0.01,
        "{client}"
    );
    // The check's query p50 with it: the call's 110 ms (the agent's 1 ms of its own in each
    // query, observed in 111, capsize does not simulate).
    let check = &report(&out)["check"][0];
    assert_eq!(check["figure"], "query p50", "{check}");
    assert_eq!(check["observed"].as_f64(), Some(111.0), "{check}");
    let query_p50 = check["predicted"].as_f64().unwrap();
    assert!((query_p50 - 110.0).abs() < 1.0, "{check}");
    assert_eq!(fit["converged"], true, "{fit}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("the client's own time"), "{stdout}");
    // Given with --set, it is not fitted.
    let out2 = t.path("out2");
    let given = "scheduler.client.send={dist=\"constant\",ms=1}";
    let o = calibrate(&[&traces, &calls], &out2, &["--set", given]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(report(&out2)["client"].is_null());
}
