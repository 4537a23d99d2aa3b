//! OTLP JSON traces of an agent drawn from known distributions, as the OpenTelemetry
//! Collector's file exporter writes them (one export request a line, spans in the order they
//! ended, in batches): for calibration tests that must recover what they were drawn from.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal, Uniform};
use serde_json::{json, Value};

/// The agent the traces are drawn from: closed-loop sessions, each query a model turn before
/// each round of parallel tool calls and one to answer, unbounded concurrency, no limits.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Sessions, all active for the whole run.
    pub sessions: u32,
    /// How long, s.
    pub duration_s: f64,
    /// Mean think time, ms (exponential).
    pub think_ms: f64,
    /// Rounds of tool calls per query.
    pub rounds: u32,
    /// Tool calls a round.
    pub calls: u32,
    /// The model's latency: ln-ms (mu, sigma).
    pub model: (f64, f64),
    /// Input tokens: uniform between.
    pub input: (u64, u64),
    /// `kb_search` (weight 3): ln-ms (mu, sigma).
    pub kb: (f64, f64),
    /// `crm_lookup` (weight 1): uniform ms between.
    pub crm: (f64, f64),
    /// Older attribute names (`gen_ai.system`, `prompt_tokens`).
    pub old_names: bool,
    /// Streamed answers: `Some((ttft ln-ms (mu, sigma), tpot uniform ms (lo, hi), output tokens
    /// uniform (lo, hi)))`, the model's latency then ttft + (output − 1) × tpot, and
    /// `gen_ai.response.time_to_first_chunk` on each model span.
    pub stream: Option<Stream>,
}

/// Streamed answers' time to first chunk, time per token and output tokens.
pub type Stream = ((f64, f64), (f64, f64), (u64, u64));

impl Default for Agent {
    fn default() -> Self {
        Agent {
            sessions: 6,
            duration_s: 1800.0,
            think_ms: 20_000.0,
            rounds: 3,
            calls: 4,
            model: (7.2, 0.5),
            input: (2000, 3200),
            kb: (5.5, 0.6),
            crm: (100.0, 600.0),
            old_names: false,
            stream: None,
        }
    }
}

struct Span {
    trace: u128,
    id: u64,
    parent: u64,
    name: String,
    start_ns: i64,
    end_ns: i64,
    attrs: Vec<(String, Value)>,
}

fn attr(key: &str, v: Value) -> (String, Value) {
    let value = match v {
        Value::String(s) => json!({ "stringValue": s }),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({ "intValue": n.to_string() }),
        Value::Number(n) => json!({ "doubleValue": n }),
        other => json!({ "stringValue": other.to_string() }),
    };
    (key.to_string(), value)
}

/// The traces, as the file's text.
pub fn traces(agent: &Agent, seed: u64) -> String {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let model = LogNormal::new(agent.model.0, agent.model.1).unwrap();
    let kb = LogNormal::new(agent.kb.0, agent.kb.1).unwrap();
    let crm = Uniform::new(agent.crm.0, agent.crm.1).unwrap();
    let think = Exp::new(1.0 / agent.think_ms).unwrap();
    let epoch: i64 = 1_760_000_000_000_000_000;
    let ms = |x: f64| (x * 1e6) as i64;
    let mut spans = Vec::new();
    let mut next_id = 1u64;
    let mut trace = 1u128;
    for session in 0..agent.sessions {
        let mut t = 0.0f64;
        let end_of_run = agent.duration_s * 1e3;
        while t < end_of_run {
            let (q_start, root) = (t, next_id);
            next_id += 1;
            let mut now = t;
            let turn =
                |now: &mut f64, rng: &mut Xoshiro256PlusPlus, spans: &mut Vec<Span>, id: u64| {
                    let (mut d, mut output, mut first) = (model.sample(rng), 200u64, None);
                    if let Some(((mu, sigma), (t_lo, t_hi), (o_lo, o_hi))) = agent.stream {
                        let ttft = LogNormal::new(mu, sigma).unwrap().sample(rng);
                        output = rng.random_range(o_lo..=o_hi);
                        let tpot = Uniform::new(t_lo, t_hi).unwrap().sample(rng);
                        d = ttft + (output - 1) as f64 * tpot;
                        first = Some(ttft / 1e3);
                    }
                    let input = rng.random_range(agent.input.0..=agent.input.1);
                    let (provider_key, in_key) = if agent.old_names {
                        ("gen_ai.system", "gen_ai.usage.prompt_tokens")
                    } else {
                        ("gen_ai.provider.name", "gen_ai.usage.input_tokens")
                    };
                    spans.push(Span {
                        trace,
                        id,
                        parent: root,
                        name: "chat gpt-4o".into(),
                        start_ns: epoch + ms(*now),
                        end_ns: epoch + ms(*now + d),
                        attrs: vec![
                            attr("gen_ai.operation.name", json!("chat")),
                            attr(provider_key, json!("openai")),
                            attr("gen_ai.request.model", json!("gpt-4o")),
                            attr(in_key, json!(input)),
                            attr("gen_ai.usage.output_tokens", json!(output)),
                            attr("gen_ai.request.max_tokens", json!(500)),
                        ]
                        .into_iter()
                        .chain(first.map(|s| attr("gen_ai.response.time_to_first_chunk", json!(s))))
                        .collect(),
                    });
                    *now += d;
                };
            for _ in 0..agent.rounds {
                turn(&mut now, &mut rng, &mut spans, next_id);
                next_id += 1;
                let mut round_end = now;
                for _ in 0..agent.calls {
                    let (name, d) = if rng.random_range(0..4) < 3 {
                        ("kb_search", kb.sample(&mut rng))
                    } else {
                        ("crm_lookup", crm.sample(&mut rng))
                    };
                    spans.push(Span {
                        trace,
                        id: next_id,
                        parent: root,
                        name: format!("execute_tool {name}"),
                        start_ns: epoch + ms(now),
                        end_ns: epoch + ms(now + d),
                        attrs: vec![
                            attr("gen_ai.operation.name", json!("execute_tool")),
                            attr("gen_ai.tool.name", json!(name)),
                        ],
                    });
                    next_id += 1;
                    round_end = round_end.max(now + d);
                }
                now = round_end;
            }
            turn(&mut now, &mut rng, &mut spans, next_id);
            next_id += 1;
            spans.push(Span {
                trace,
                id: root,
                parent: 0,
                name: "invoke_agent support".into(),
                start_ns: epoch + ms(q_start),
                end_ns: epoch + ms(now),
                attrs: vec![
                    attr("gen_ai.operation.name", json!("invoke_agent")),
                    attr(
                        "gen_ai.conversation.id",
                        json!(format!("session-{session}")),
                    ),
                ],
            });
            trace += 1;
            t = now + think.sample(&mut rng);
        }
    }
    // Exported as they end, 128 a request.
    spans.sort_by_key(|s| (s.end_ns, s.id));
    let mut out = String::new();
    for batch in spans.chunks(128) {
        let spans: Vec<Value> = batch
            .iter()
            .map(|s| {
                let attrs: Vec<Value> = s
                    .attrs
                    .iter()
                    .map(|(k, v)| json!({ "key": k, "value": v }))
                    .collect();
                json!({
                    "traceId": format!("{:032x}", s.trace),
                    "spanId": format!("{:016x}", s.id),
                    "parentSpanId": if s.parent == 0 { String::new() } else { format!("{:016x}", s.parent) },
                    "name": s.name,
                    "kind": 1,
                    "startTimeUnixNano": s.start_ns.to_string(),
                    "endTimeUnixNano": s.end_ns.to_string(),
                    "attributes": attrs,
                    "status": {},
                })
            })
            .collect();
        let request = json!({
            "resourceSpans": [{
                "resource": { "attributes": [ { "key": "service.name", "value": { "stringValue": "support-agent" } } ] },
                "scopeSpans": [{ "scope": { "name": "agent" }, "spans": spans }]
            }]
        });
        out.push_str(&request.to_string());
        out.push('\n');
    }
    out
}

/// OTLP JSON lines (as [`traces`] writes them) as the Collector's protobuf file: each request
/// after its length, 4 bytes big-endian.
pub fn to_proto(json_lines: &str) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span as PSpan};
    use prost::Message;
    let hex = |v: &Value| {
        let s = v.as_str().unwrap_or("");
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let mut out = Vec::new();
    for line in json_lines.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let mut spans = Vec::new();
        for s in v["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .unwrap()
        {
            let attributes = s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| {
                    let val = &kv["value"];
                    let value = if let Some(t) = val["stringValue"].as_str() {
                        any_value::Value::StringValue(t.into())
                    } else if let Some(d) = val["doubleValue"].as_f64() {
                        any_value::Value::DoubleValue(d)
                    } else {
                        any_value::Value::IntValue(
                            val["intValue"].as_str().unwrap().parse().unwrap(),
                        )
                    };
                    KeyValue {
                        key: kv["key"].as_str().unwrap().into(),
                        value: Some(AnyValue { value: Some(value) }),
                        ..Default::default()
                    }
                })
                .collect();
            spans.push(PSpan {
                trace_id: hex(&s["traceId"]),
                span_id: hex(&s["spanId"]),
                parent_span_id: hex(&s["parentSpanId"]),
                name: s["name"].as_str().unwrap().into(),
                start_time_unix_nano: s["startTimeUnixNano"].as_str().unwrap().parse().unwrap(),
                end_time_unix_nano: s["endTimeUnixNano"].as_str().unwrap().parse().unwrap(),
                attributes,
                ..Default::default()
            });
        }
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let bytes = request.encode_to_vec();
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}
