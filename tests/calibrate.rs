//! `capsize calibrate`: a scenario measured from traces and logs gives back what they were drawn
//! from (within sampling error), predicts what was observed, and refuses what it cannot read in
//! one line.

mod common;

use std::path::{Path, PathBuf};

use common::calib::{calibrate, f, report, scenario, span_json};
use common::otel::{traces, Agent};
use common::temp::Temp;
use common::{capsize, stderr};
use serde_json::Value;

/// A trace of `Agent::default()` calibrated once into `out`.
fn calibrated(t: &Temp, agent: &Agent) -> PathBuf {
    let input = t.write("traces.jsonl", &traces(agent, 1));
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

#[test]
fn a_trace_drawn_from_known_distributions_gives_them_back() {
    let t = Temp::new("calibrate", "known");
    let agent = Agent::default();
    let out = calibrated(&t, &agent);
    let s = scenario(&out);
    let p = &s["providers"]["openai"];
    // The model's latency: ln N(7.2, 0.5), 1,684 calls. Within 3 standard errors:
    // sigma/sqrt(n) = 0.0122 for mu, sigma/sqrt(2n) = 0.0086 for sigma.
    assert_eq!(p["latency"]["dist"].as_str(), Some("lognormal"));
    assert!((f(&p["latency"]["mu"]) - 7.2).abs() < 3.0 * 0.0122, "{p}");
    assert!(
        (f(&p["latency"]["sigma"]) - 0.5).abs() < 3.0 * 0.0086,
        "{p}"
    );
    let w = &s["workload"];
    assert_eq!(w["mode"].as_str(), Some("closed"));
    assert_eq!(w["sessions"].as_integer(), Some(6));
    assert_eq!(w["rounds"].as_integer(), Some(3));
    assert_eq!(w["calls_per_query"].as_integer(), Some(4));
    let turn = &w["model_turn"];
    assert_eq!(turn["at"].as_str(), Some("around"));
    assert_eq!(turn["max_tokens"].as_integer(), Some(500));
    // Input tokens uniform on 2,000..=3,200: mean 2,600, standard error 346/sqrt(1,684) = 8.4.
    assert!((f(&turn["tokens"]) - 2600.0).abs() < 3.0 * 8.4, "{turn}");
    // Think time: exponential with mean 20 s, 415 gaps: standard error 20,000/sqrt(415) = 982 ms.
    assert_eq!(w["think_time"]["dist"].as_str(), Some("exponential"));
    assert!(
        (f(&w["think_time"]["mean_ms"]) - 20_000.0).abs() < 3.0 * 982.0,
        "{w}"
    );
    let tools = w["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"].as_str() == Some(name))
            .unwrap()
    };
    // kb_search: ln N(5.5, 0.6), 3,798 calls (standard errors 0.0097 and 0.0069).
    let kb = &tool("kb_search")["latency"];
    assert_eq!(kb["dist"].as_str(), Some("lognormal"));
    assert!((f(&kb["mu"]) - 5.5).abs() < 3.0 * 0.0097, "{kb}");
    assert!((f(&kb["sigma"]) - 0.6).abs() < 3.0 * 0.0069, "{kb}");
    // crm_lookup: uniform 100..600 ms, 1,254 calls: the least and most are within
    // 3 x 500/1,254 = 1.2 ms of the bounds.
    let crm = &tool("crm_lookup")["latency"];
    assert_eq!(crm["dist"].as_str(), Some("uniform"));
    assert!((f(&crm["min_ms"]) - 100.0).abs() < 1.2, "{crm}");
    assert!((f(&crm["max_ms"]) - 600.0).abs() < 1.2, "{crm}");
    // The tool mix: 3 to 1, by calls (5,052 calls: a share's standard error is 0.006).
    let share = f(&tool("kb_search")["weight"])
        / (f(&tool("kb_search")["weight"]) + f(&tool("crm_lookup")["weight"]));
    assert!((share - 0.75).abs() < 3.0 * 0.0061, "{share}");
    // Every fit is written down with its distance, and each fits.
    let fits = report(&out)["fits"].as_array().unwrap().clone();
    assert_eq!(fits.len(), 6, "{fits:?}");
    // Each is drawn: observed and fitted CDFs, in the HTML in place.
    let html = std::fs::read_to_string(out.join("calibration.html")).unwrap();
    for stem in [
        "fit-openai-gpt-4o-latency-ms",
        "fit-tool-kb-search-latency-ms",
        "fit-think-time-ms",
    ] {
        assert!(out.join(format!("{stem}.png")).is_file(), "{stem}");
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.contains("observed ("), "{stem}");
        assert!(
            html.contains(&svg[svg.find("<svg").unwrap()..][..200]),
            "{stem} inlined"
        );
    }
    assert!(fits
        .iter()
        .all(|f| f["ks"].as_f64().unwrap() <= f["accept"].as_f64().unwrap()));
}

#[test]
fn streamed_answers_are_fitted_as_a_generating_provider() {
    let t = Temp::new("calibrate", "stream");
    let agent = Agent {
        stream: Some(((6.2, 0.4), (15.0, 25.0), (100, 300))),
        ..Agent::default()
    };
    let out = calibrated(&t, &agent);
    let s = scenario(&out);
    let p = &s["providers"]["openai"];
    let n = report(&out)["fits"][1]["n"].as_f64().unwrap();
    // Time to first chunk: ln N(6.2, 0.4) over n answers: within 3 standard errors,
    // 0.4/sqrt(n) for mu and 0.4/sqrt(2n) for sigma.
    assert_eq!(p["ttft"]["dist"].as_str(), Some("lognormal"), "{p}");
    assert!(
        (f(&p["ttft"]["mu"]) - 6.2).abs() < 3.0 * 0.4 / n.sqrt(),
        "{p}"
    );
    assert!(
        (f(&p["ttft"]["sigma"]) - 0.4).abs() < 3.0 * 0.4 / (2.0 * n).sqrt(),
        "{p}"
    );
    // Time per token: uniform 15..25 ms; output tokens uniform 100..=300.
    assert_eq!(p["tpot"]["dist"].as_str(), Some("uniform"), "{p}");
    assert!((f(&p["tpot"]["min_ms"]) - 15.0).abs() < 0.1, "{p}");
    assert!((f(&p["tpot"]["max_ms"]) - 25.0).abs() < 0.1, "{p}");
    let o = &p["output_tokens"];
    assert_eq!(o["dist"].as_str(), Some("uniform"), "{p}");
    assert_eq!(
        (o["min"].as_integer(), o["max"].as_integer()),
        (Some(100), Some(300))
    );
    assert_eq!(s["workload"]["model_turn"]["stream"].as_bool(), Some(true));
    // And the generating provider predicts the queries.
    for row in report(&out)["check"].as_array().unwrap() {
        if row["target"].is_number() {
            assert_eq!(row["met"].as_bool(), Some(true), "{row}");
        }
    }
}

#[test]
fn the_calibrated_scenario_predicts_the_observed_queries_within_ten_percent() {
    let t = Temp::new("calibrate", "check");
    let out = calibrated(&t, &Agent::default());
    let check = report(&out)["check"].as_array().unwrap().clone();
    let row = |name: &str| {
        check
            .iter()
            .find(|r| r["figure"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {check:?}"))
            .clone()
    };
    for name in ["query p50", "query p95"] {
        let r = row(name);
        assert_eq!(r["met"].as_bool(), Some(true), "{r}");
        assert!((r["ratio"].as_f64().unwrap() - 1.0).abs() <= 0.10, "{r}");
    }
    // Each model call as the client saw it, the same calls per query, and the throughput of
    // the same sessions.
    for name in ["openai call p50", "openai call p95"] {
        let r = row(name);
        assert!((r["ratio"].as_f64().unwrap() - 1.0).abs() <= 0.10, "{r}");
    }
    assert_eq!(
        row("openai requests per query")["ratio"].as_f64(),
        Some(1.0)
    );
    assert!((row("throughput")["ratio"].as_f64().unwrap() - 1.0).abs() < 0.05);
}

#[test]
fn older_attribute_names_give_the_same_scenario() {
    let t = Temp::new("calibrate", "old-names");
    let new = calibrated(&t, &Agent::default());
    let text = std::fs::read_to_string(new.join("scenario.toml")).unwrap();
    let old = t.write(
        "old.jsonl",
        &traces(
            &Agent {
                old_names: true,
                ..Agent::default()
            },
            1,
        ),
    );
    let out = t.path("old-out");
    let o = calibrate(&[&old], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let old_text = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert_eq!(old_text.replace("old.jsonl", "traces.jsonl"), text);
}

#[test]
fn protobuf_traces_give_the_scenario_their_json_gives() {
    let t = Temp::new("calibrate", "proto");
    let json = calibrated(&t, &Agent::default());
    let text = std::fs::read_to_string(json.join("scenario.toml")).unwrap();
    let proto = t.path("traces.pb");
    std::fs::write(
        &proto,
        common::otel::to_proto(&traces(&Agent::default(), 1)),
    )
    .unwrap();
    let out = t.path("proto-out");
    let o = calibrate(&[&proto], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let proto_text = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert_eq!(proto_text.replace("traces.pb", "traces.jsonl"), text);
    assert_eq!(
        report(&out)["inputs"][0]["format"].as_str(),
        Some("OTLP protobuf traces")
    );
    // One message (an OTLP/HTTP body) reads as well: the first request alone.
    let bytes = std::fs::read(&proto).unwrap();
    let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    let one = t.path("one.pb");
    std::fs::write(&one, &bytes[4..4 + len]).unwrap();
    let o = calibrate(&[&one], &t.path("one-out"), &["--no-check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A file cut mid-message keeps what came before, and says so.
    let cut = t.path("cut.pb");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let o = calibrate(&[&cut], &t.path("cut-out"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let skipped = report(&t.path("cut-out"))["skipped"].to_string();
    assert!(skipped.contains("a message cut short"), "{skipped}");
}

#[test]
fn the_same_input_gives_byte_identical_outputs() {
    let t = Temp::new("calibrate", "determinism");
    let input = t.write("traces.jsonl", &traces(&Agent::default(), 3));
    let (a, b) = (t.path("a"), t.path("b"));
    for out in [&a, &b] {
        assert!(calibrate(&[&input], out, &[]).status.success());
    }
    for name in [
        "scenario.toml",
        "calibration.md",
        "calibration.html",
        "calibration.json",
    ] {
        let read = |d: &Path| std::fs::read(d.join(name)).unwrap();
        assert!(read(&a) == read(&b), "{name} differs");
    }
}

#[test]
fn what_the_input_cannot_say_is_given_with_set_and_asked_what_if_of() {
    let t = Temp::new("calibrate", "what-if");
    let input = t.write("traces.jsonl", &traces(&Agent::default(), 1));
    let out = t.path("out");
    let o = calibrate(
        &[&input],
        &out,
        &[
            "--set",
            "providers.openai.tpm=60000",
            "--set",
            "scheduler.max_concurrency=8",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert!(
        text.contains("tpm = 60000  # given: --set providers.openai.tpm=60000"),
        "{text}"
    );
    assert!(text.contains("max_concurrency = 8  # given: --set scheduler.max_concurrency=8"));
    // Twice the users, on the calibrated scenario, is one command.
    let scenario = out.join("scenario.toml");
    let run = capsize(&[
        "run",
        scenario.to_str().unwrap(),
        "--set",
        "workload.sessions=12",
        "--out",
        t.path("run").to_str().unwrap(),
        "--json",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let summary: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(summary["queries"].as_u64().unwrap() > 0);
}

#[test]
fn a_request_log_in_the_azure_traces_columns_is_an_open_workload_of_single_calls() {
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, Exp};
    let t = Temp::new("calibrate", "azure");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let gap = Exp::new(2.0).unwrap(); // 2 requests a second
    let mut csv = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    let mut t_s = 0.0f64;
    for _ in 0..2000 {
        t_s += gap.sample(&mut rng);
        let whole = t_s.floor() as i64;
        let frac = ((t_s - whole as f64) * 1e7) as i64;
        let (m, s) = (whole / 60, whole % 60);
        csv.push_str(&format!(
            "2023-11-16 18:{m:02}:{s:02}.{frac:07},{},{}\n",
            rng.random_range(500..1500),
            rng.random_range(50..300)
        ));
    }
    let input = t.write("azure.csv", &csv);
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = scenario(&out);
    let w = &s["workload"];
    assert_eq!(w["mode"].as_str(), Some("open"));
    // 1,999 gaps: the rate's standard error is 2/sqrt(1,999) = 0.045.
    assert!((f(&w["arrival_rate"]) - 2.0).abs() < 3.0 * 0.045, "{w}");
    assert_eq!(w["calls_per_query"].as_integer(), Some(1));
    let r = report(&out);
    assert_eq!(r["arrival"]["mode"].as_str(), Some("open"));
    assert!(r["arrival"]["poisson_ks"].as_f64() <= r["arrival"]["accept"].as_f64());
    // The log has no latency: said to be assumed.
    let assumed = r["assumed"].to_string();
    assert!(
        assumed.contains("latency: the input has no call times"),
        "{assumed}"
    );
}

#[test]
fn a_burstgpt_row_with_no_response_tokens_is_a_failed_request() {
    let t = Temp::new("calibrate", "burstgpt");
    let mut csv =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for i in 0..100 {
        let response = if i % 10 == 0 { 0 } else { 200 };
        csv.push_str(&format!(
            "{},ChatGPT,600,{response},{},Conversation log\n",
            i * 2,
            600 + response
        ));
    }
    let input = t.write("burst.csv", &csv);
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &["--no-check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = scenario(&out);
    let p = s["providers"].as_table().unwrap().values().next().unwrap();
    assert_eq!(f(&p["error_rate"]), 0.1, "{p}");
    // The columns not read are said.
    let md = std::fs::read_to_string(out.join("calibration.md")).unwrap();
    // One reason for both, the first one's name beside it.
    assert!(
        md.contains("| a column capsize does not read | 2 | burst.csv:1 "),
        "{md}"
    );
    assert!(md.contains("Total tokens"), "{md}");
    assert_eq!(
        report(&out)["check"],
        Value::Array(vec![]),
        "--no-check runs no check"
    );
}

#[test]
fn exec_calls_give_the_limits_the_provider_answered_with() {
    let t = Temp::new("calibrate", "calls");
    let mut lines = String::new();
    for i in 0..50u64 {
        let status = if i % 10 == 9 { 429 } else { 200 };
        lines.push_str(&format!(
            "{{\"capsize_call\":1,\"unix_ns\":{},\"provider\":\"llm\",\"route\":\"model\",\"model\":\"m\",\"status\":{status},\"latency_ms\":{},\"input_tokens\":900,\"max_tokens\":100,\"rpm_limit\":500,\"tpm_limit\":200000}}\n",
            1_760_000_000_000_000_000u64 + i * 1_000_000_000,
            200 + i * 10
        ));
    }
    let input = t.write("calls.jsonl", &lines);
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &["--no-check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert!(
        text.contains("rpm = 500.0  # from the rate-limit headers"),
        "{text}"
    );
    assert!(
        text.contains("tpm = 200000.0  # from the rate-limit headers"),
        "{text}"
    );
    let s = scenario(&out);
    // 45 answered, 5 refused with 429: those are not latencies.
    assert!(text.contains("45 answered, 5 429s"), "{text}");
    assert_eq!(s["workload"]["tokens_per_call"].as_integer(), Some(1000));
    let assumed = report(&out)["assumed"].to_string();
    assert!(!assumed.contains("rate limits"), "{assumed}");
}

#[test]
fn what_a_trace_leaves_unsaid_or_gets_wrong_is_counted_and_said() {
    let t = Temp::new("calibrate", "untidy");
    let chat = |model: &str, tokens: bool| {
        let mut a = format!(
            r#"{{"key":"gen_ai.operation.name","value":{{"stringValue":"chat"}}}},{{"key":"gen_ai.provider.name","value":{{"stringValue":"openai"}}}},{{"key":"gen_ai.request.model","value":{{"stringValue":"{model}"}}}}"#
        );
        if tokens {
            a.push_str(r#",{"key":"gen_ai.usage.input_tokens","value":{"intValue":"900"}}"#);
        }
        a
    };
    let agent = r#"{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}}"#;
    let embed = r#"{"key":"gen_ai.operation.name","value":{"stringValue":"embeddings"}}"#;
    let mut spans = Vec::new();
    for q in 0..20u32 {
        let (trace, at) = (q + 1, u64::from(q) * 10_000);
        let root = trace * 100;
        spans.push(span_json(
            trace,
            root + 1,
            root,
            at,
            at + 1_000,
            &chat("gpt-4o", q != 3),
        ));
        // One query also asks a second model, and one embeds.
        if q == 5 {
            spans.push(span_json(
                trace,
                root + 2,
                root,
                at + 1_000,
                at + 1_200,
                &chat("mini", true),
            ));
        }
        if q == 6 {
            spans.push(span_json(trace, root + 3, root, at, at + 10, embed));
        }
        // One query's call starts before its parent (clock skew between services)...
        let start = if q == 7 { at + 500 } else { at };
        // ... and one query's root never arrives.
        if q != 9 {
            spans.push(span_json(trace, root, 0, start, at + 1_500, agent));
        }
    }
    let line = format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    );
    let input = t.write("untidy.jsonl", &format!("{line}\n"));
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let skipped = report(&out)["skipped"].to_string();
    for said in [
        "a trace without a root span",
        "a span outside its parent's time",
        "an answered model call without input tokens",
        "a gen_ai.operation.name that is neither a model call nor a tool call",
        "untidy.jsonl:1 (\\\"embeddings\\\")",
    ] {
        assert!(skipped.contains(said), "{said}: {skipped}");
    }
    let md = std::fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(
        md.contains("not in the scenario: 1 calls to openai mini"),
        "{md}"
    );
    // The queries it could time: 19 of 20.
    assert_eq!(report(&out)["query_latency_ms"]["n"].as_u64(), Some(19));
}

#[test]
fn a_truncated_trace_is_read_up_to_its_cut_and_the_cut_is_counted() {
    let t = Temp::new("calibrate", "truncated");
    let text = traces(&Agent::default(), 1);
    let cut = &text[..text.len() - 500];
    let input = t.write("cut.jsonl", cut);
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let skipped = report(&out)["skipped"].to_string();
    assert!(skipped.contains("a truncated line"), "{skipped}");
}

#[test]
fn an_input_that_cannot_be_read_is_refused_in_one_line_and_nothing_is_written() {
    let t = Temp::new("calibrate", "bad");
    let out = t.path("out");
    let no_model = t.write(
        "tools-only.jsonl",
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0000000000000000000000000000000a","spanId":"000000000000000b","name":"x","startTimeUnixNano":"1000","endTimeUnixNano":"2000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}}]}]}]}]}"#,
    );
    let cases: Vec<(PathBuf, &str)> = vec![
        (t.write("empty.jsonl", ""), "is empty"),
        (
            t.write("binary.pb", "\u{0}\u{1}\u{2}binary"),
            "not OTLP protobuf traces",
        ),
        (t.dir().to_path_buf(), "not a regular file (a folder)"),
        (t.path("missing.jsonl"), "missing.jsonl"),
        (t.write("nothing.csv", "a,b\n1,2\n"), "needs a timestamp"),
        (no_model, "no model call could be read"),
    ];
    for (input, says) in cases {
        let o = calibrate(&[&input], &out, &[]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}: {}",
            input.display(),
            stderr(&o)
        );
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{says}: {err}");
        assert!(!out.exists(), "{}", input.display());
    }
    let good = t.write("traces.jsonl", &traces(&Agent::default(), 1));
    let o = calibrate(&[&good], &out, &["--set", "providers.openai.rpm=-5"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("providers.openai.rpm"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}
