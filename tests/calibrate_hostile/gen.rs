//! The property of `calibrate_hostile.rs`: generated inputs of random structure (chains, fans,
//! parent cycles, orphans, spans given twice, re-sent batches, clock skew, times at the edges
//! of i64), names of any Unicode (control characters, quotes, line and direction marks), in
//! each format calibrate reads: OTLP JSON (lines or one document), OTLP protobuf (framed or one
//! message), CSV and JSON-lines logs, exec's calls.jsonl. Each is read or refused: exit 0 with
//! a scenario the scenario parser accepts, or exit 2 with one line and nothing written; never a
//! panic, a hang (each case a child stopped at 60 s) or memory without bound (4 GiB of address
//! space). `HOSTILE_SHOW=1` prints each refusal (with `-- --nocapture`).

use std::path::Path;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span as PbSpan};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use prost::Message;
use serde_json::{json, Value};

use super::common::temp::Temp;

const EPOCH: i64 = 1_760_000_000_000_000_000;

/// The forms an input is written in.
#[derive(Debug, Clone, Copy)]
enum Form {
    JsonLines,
    JsonDocument,
    ProtoFramed,
    ProtoOne,
    Csv,
    Jsonl,
    Calls,
}

/// What a generated span is.
#[derive(Debug, Clone)]
enum What {
    Chat {
        provider: String,
        model: String,
        tokens: Option<i64>,
    },
    Tool(String),
    Agent,
    Op(String),
    Http(i64),
}

/// One generated span (or row): ids from a small space, so parents collide, loop and go
/// missing; times in ms from the epoch, at times far off it.
#[derive(Debug, Clone)]
struct Gen {
    trace: u8,
    id: u8,
    parent: u8,
    what: What,
    start: i64,
    end: i64,
    session: Option<String>,
}

/// Any text: every Unicode scalar, control characters and marks among them, or a usual name.
fn name() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[a-z_]{1,8}",
        2 => prop::collection::vec(any::<char>(), 0..10).prop_map(String::from_iter),
        1 => Just("\"\"\"\n[x]\nrpm = 7\n#".to_string()),
        1 => Just("\u{202e}\u{2028}\u{1b}[31m\u{0}".to_string()),
    ]
    .boxed()
}

/// A tool's name: any text but `/` and NUL, which calibrate's writer does not map to a file
/// name yet (U1, another branch).
fn tool_name() -> BoxedStrategy<String> {
    name().boxed()
}

/// A time in ms: near the epoch mostly, else at an edge.
fn time() -> BoxedStrategy<i64> {
    prop_oneof![
        60 => (0i64..600_000).prop_map(|ms| EPOCH / 1_000_000 + ms),
        1 => prop::sample::select(vec![0, 1, -1, i64::MAX / 1_000_000, i64::MIN / 1_000_000, 9_000_000_000_000]),
    ]
    .boxed()
}

fn what() -> BoxedStrategy<What> {
    prop_oneof![
        4 => (name(), name(), prop::option::of(-5i64..5_000)).prop_map(|(provider, model, tokens)| What::Chat { provider, model, tokens }),
        3 => tool_name().prop_map(What::Tool),
        2 => Just(What::Agent),
        1 => name().prop_map(What::Op),
        1 => prop::sample::select(vec![200, 429, 500, 0, 99_999]).prop_map(What::Http),
    ]
    .boxed()
}

fn span() -> BoxedStrategy<Gen> {
    (
        0u8..4,
        1u8..16,
        0u8..16,
        what(),
        time(),
        -50i64..5_000,
        prop::option::of(name()),
    )
        .prop_map(|(trace, id, parent, what, start, d, session)| Gen {
            trace,
            id,
            parent,
            what,
            start,
            end: start.saturating_add(d),
            session,
        })
        .boxed()
}

/// An input: its form, its spans (or rows) and the batches of them written twice.
fn input() -> impl Strategy<Value = (Form, Vec<Gen>, Vec<bool>)> {
    let form = prop::sample::select(vec![
        Form::JsonLines,
        Form::JsonDocument,
        Form::ProtoFramed,
        Form::ProtoOne,
        Form::Csv,
        Form::Jsonl,
        Form::Calls,
    ]);
    (
        form,
        prop::collection::vec(span(), 1..120),
        prop::collection::vec(prop::bool::weighted(0.2), 12),
    )
}

fn ns(ms: i64) -> i64 {
    ms.saturating_mul(1_000_000)
}

fn attrs(g: &Gen) -> Vec<(&'static str, Value)> {
    let mut a = match &g.what {
        What::Chat {
            provider,
            model,
            tokens,
        } => {
            let mut a = vec![
                ("gen_ai.operation.name", json!("chat")),
                ("gen_ai.provider.name", json!(provider)),
                ("gen_ai.request.model", json!(model)),
            ];
            if let Some(t) = tokens {
                a.push(("gen_ai.usage.input_tokens", json!(t)));
            }
            a
        }
        What::Tool(n) => vec![
            ("gen_ai.operation.name", json!("execute_tool")),
            ("gen_ai.tool.name", json!(n)),
        ],
        What::Agent => vec![("gen_ai.operation.name", json!("invoke_agent"))],
        What::Op(n) => vec![("gen_ai.operation.name", json!(n))],
        What::Http(s) => vec![("http.response.status_code", json!(s))],
    };
    if let Some(s) = &g.session {
        a.push(("session.id", json!(s)));
    }
    a
}

fn json_span(g: &Gen) -> Value {
    let attributes: Vec<Value> = attrs(g)
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => json!({"key": k, "value": {"stringValue": s}}),
            n => json!({"key": k, "value": {"intValue": n.to_string()}}),
        })
        .collect();
    json!({
        "traceId": format!("{:032x}", u128::from(g.trace) + 1),
        "spanId": format!("{:016x}", g.id),
        "parentSpanId": if g.parent == 0 { String::new() } else { format!("{:016x}", g.parent) },
        "startTimeUnixNano": ns(g.start).to_string(),
        "endTimeUnixNano": ns(g.end).to_string(),
        "attributes": attributes,
    })
}

fn pb_span(g: &Gen) -> PbSpan {
    let attributes = attrs(g)
        .into_iter()
        .map(|(k, v)| KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(match v {
                    Value::String(s) => any_value::Value::StringValue(s),
                    n => any_value::Value::IntValue(n.as_i64().unwrap_or(0)),
                }),
            }),
            ..Default::default()
        })
        .collect();
    PbSpan {
        trace_id: (u128::from(g.trace) + 1).to_be_bytes().to_vec(),
        span_id: u64::from(g.id).to_be_bytes().to_vec(),
        parent_span_id: if g.parent == 0 {
            Vec::new()
        } else {
            u64::from(g.parent).to_be_bytes().to_vec()
        },
        start_time_unix_nano: ns(g.start) as u64,
        end_time_unix_nano: ns(g.end) as u64,
        attributes,
        ..Default::default()
    }
}

fn pb_request(spans: Vec<PbSpan>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// A log row's cells: a timestamp (a number, a date, or text that is neither), a model, a
/// latency that may be no time, tokens, a status, a session.
fn row(g: &Gen) -> Vec<String> {
    let stamp = match g.id % 5 {
        0 => format!("{}", g.start / 1_000),
        1 => format!("{}", g.start),
        2 => format!(
            "2023-{:02}-{:02} 18:15:{:02}+a\u{e9}00",
            1 + g.id % 12,
            28 + g.id % 4,
            g.parent % 60
        ),
        3 => format!(
            "2023-11-16T18:{:02}:46.{}Z",
            g.parent % 70,
            g.start.rem_euclid(1_000)
        ),
        _ => g.session.clone().unwrap_or_default(),
    };
    let latency = match g.parent % 6 {
        0 => "NaN".into(),
        1 => "-5".into(),
        2 => "9e300".into(),
        3 => String::new(),
        _ => (g.end - g.start).to_string(),
    };
    let (model, tokens) = match &g.what {
        What::Chat { model, tokens, .. } => (
            model.clone(),
            tokens.map(|t| t.to_string()).unwrap_or_default(),
        ),
        What::Tool(n) | What::Op(n) => (n.clone(), String::new()),
        _ => (String::new(), String::new()),
    };
    let status = match g.what {
        What::Http(s) => s.to_string(),
        _ => String::new(),
    };
    vec![
        stamp,
        model,
        latency,
        tokens,
        status,
        g.session.clone().unwrap_or_default(),
    ]
}

const HEADER: [&str; 6] = [
    "timestamp",
    "model",
    "latency_ms",
    "input_tokens",
    "status",
    "session_id",
];

/// The input's bytes: the spans in batches of 10, the batches marked written twice so.
fn bytes(form: Form, spans: &[Gen], again: &[bool]) -> Vec<u8> {
    let mut batches: Vec<&[Gen]> = Vec::new();
    for (i, b) in spans.chunks(10).enumerate() {
        batches.push(b);
        if again[i % again.len()] {
            batches.push(b);
        }
    }
    let mut out = Vec::new();
    match form {
        Form::JsonLines | Form::JsonDocument => {
            for b in &batches {
                let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": b.iter().map(json_span).collect::<Vec<_>>()}]}]});
                if matches!(form, Form::JsonDocument) {
                    // One pretty document of everything.
                    let all: Vec<Value> = batches
                        .iter()
                        .flat_map(|b| b.iter().map(json_span))
                        .collect();
                    let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": all}]}]});
                    return serde_json::to_vec_pretty(&doc).unwrap();
                }
                out.extend(doc.to_string().into_bytes());
                out.push(b'\n');
            }
        }
        Form::ProtoFramed => {
            for b in &batches {
                let body = pb_request(b.iter().map(pb_span).collect()).encode_to_vec();
                out.extend((body.len() as u32).to_be_bytes());
                out.extend(body);
            }
        }
        Form::ProtoOne => {
            return pb_request(batches.iter().flat_map(|b| b.iter().map(pb_span)).collect())
                .encode_to_vec();
        }
        Form::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(HEADER).unwrap();
            for g in batches.iter().flat_map(|b| b.iter()) {
                w.write_record(row(g)).unwrap();
            }
            return w.into_inner().unwrap();
        }
        Form::Jsonl => {
            for g in batches.iter().flat_map(|b| b.iter()) {
                let obj: serde_json::Map<String, Value> = HEADER
                    .iter()
                    .zip(row(g))
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                out.extend(Value::Object(obj).to_string().into_bytes());
                out.push(b'\n');
            }
        }
        Form::Calls => {
            for g in batches.iter().flat_map(|b| b.iter()) {
                let (route, tool, model) = match &g.what {
                    What::Tool(n) => ("tool", Some(n.clone()), None),
                    What::Chat { model, .. } => ("model", None, Some(model.clone())),
                    _ => ("model", None, None),
                };
                let status = [200, 429, 500, 0][usize::from(g.parent % 4)];
                let rpm = [500.0, 1e300, -5.0, 1e-300][usize::from(g.id % 4)];
                let line = json!({
                    "capsize_call": if g.id == 15 { 2 } else { 1 }, "unix_ns": ns(g.start),
                    "provider": g.session.clone().unwrap_or_else(|| "llm".into()),
                    "route": route, "tool": tool, "model": model,
                    "status": status,
                    "latency_ms": (g.end - g.start) as f64,
                    "traceparent": format!("00-{:032x}-{:016x}-01", u128::from(g.trace) + 1, g.parent),
                    "rpm_limit": rpm,
                });
                out.extend(line.to_string().into_bytes());
                out.push(b'\n');
            }
        }
    }
    out
}

/// Runs the property with `run` (the input, the output folder → exit code, stderr, time).
/// What one run gave: its exit code (`None`: stopped), stderr, and how long it took.
pub type Ran = (Option<i32>, String, Duration);

pub fn property(run: &dyn Fn(&Path, &Path) -> Ran) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let t = Temp::new("hostile", "property");
    let counts = std::cell::Cell::new((0u32, 0u32));
    let result = runner.run(&input(), |(form, spans, again)| {
        let input = t.path("input");
        std::fs::write(&input, bytes(form, &spans, &again)).unwrap();
        let out = t.path("out");
        let _ = std::fs::remove_dir_all(&out);
        let (code, err, took) = run(&input, &out);
        prop_assert!(!err.contains("panicked"), "{form:?}: a panic: {err}");
        prop_assert!(code.is_some(), "{form:?}: stopped after {took:?}: {err}");
        match code {
            Some(0) => {
                let scenario = out.join("scenario.toml");
                let parsed = capsize::api::scenario::load(&scenario, &[]);
                prop_assert!(
                    parsed.is_ok(),
                    "{form:?}: its own scenario refused: {:?}",
                    parsed.err()
                );
                let (ok, refused) = counts.get();
                counts.set((ok + 1, refused));
            }
            Some(2) => {
                prop_assert_eq!(err.lines().count(), 1, "{:?}: {}", form, err);
                prop_assert!(!out.exists(), "{form:?}: written though refused: {err}");
                if std::env::var("HOSTILE_SHOW").is_ok() {
                    println!("{form:?}: {}", err.trim());
                }
                let (ok, refused) = counts.get();
                counts.set((ok, refused + 1));
            }
            other => prop_assert!(false, "{form:?}: exit {other:?}: {err}"),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (ok, refused) = counts.get();
    println!("{ok} calibrated, {refused} refused in one line");
    assert_eq!(ok + refused, cases);
}
