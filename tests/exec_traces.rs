//! `capsize exec`'s trace intake against the binary: the agent's OTLP exports reach the mock
//! whatever the user's environment says (a signal's own endpoint, a compression it does not
//! read: overridden, and named on stderr), gzip and deflate bodies are kept inflated, a body
//! that is not OTLP is answered 400 and kept out of traces.otlp (which calibrate then reads),
//! and an agent that looks instrumented but left no traces is told so in one line.
//!
//! The agent is this test binary itself (the ignored test `trace_agent`, run with
//! `CAPSIZE_TRACE_AGENT` set): plain HTTP/1.1 over a socket. The last test runs the real
//! OpenTelemetry Python SDK (the SDK venv: `scripts/test.sh`).

#![allow(clippy::disallowed_methods)] // talks to a real server on the real clock

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};

mod common;
use common::otel::{to_proto, traces, Agent};
use common::temp::Temp;
use common::{capsize, stderr};

const SCENARIO: &str = r#"
name = "exec-traces"
seed = 1
[provider]
latency = { dist = "constant", ms = 1 }
[workload]
queries = 1
calls_per_query = 1
tokens_per_call = 10
"#;

const AGENT_ENV: &str = "CAPSIZE_TRACE_AGENT";
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// The OpenTelemetry variables a run's environment is cleared of, then given.
const OTEL_VARS: [&str; 6] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
];

/// POSTs `body` to `url` (`http://HOST:PORT/PATH`) with `headers`: the status.
fn post(url: &str, headers: &[(&str, &str)], body: &[u8]) -> u16 {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut head = format!(
        "POST /{path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut s = TcpStream::connect(host).expect("connect to the mock");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut status = [0u8; 12];
    s.read_exact(&mut status).unwrap();
    String::from_utf8_lossy(&status[9..12]).parse().unwrap()
}

/// The protobuf export requests of a small traced agent, each as its own body.
fn exports() -> Vec<Vec<u8>> {
    let agent = Agent {
        sessions: 2,
        duration_s: 300.0,
        ..Agent::default()
    };
    let framed = to_proto(&traces(&agent, 5));
    let mut out = Vec::new();
    let mut rest = &framed[..];
    while rest.len() >= 4 {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        out.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    w.write_all(bytes).unwrap();
    w.finish().unwrap()
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    w.write_all(bytes).unwrap();
    w.finish().unwrap()
}

/// The agent, when this binary is run as one (`CAPSIZE_TRACE_AGENT=MODE:FILE`): one chat
/// request with a `traceparent` (two in `silent`), then its exports to the endpoint its SDK
/// would use (the traces endpoint, whole): in `exports` a body that is not protobuf, the
/// exports gzipped, deflated and plain, one in an encoding the mock does not read, and one
/// JSON body gzipped; in `refused` the bad body alone; in `silent` none. It writes the
/// statuses, then the OpenTelemetry variables it was given.
#[test]
#[ignore = "the agent run by the other tests"]
fn trace_agent() {
    let Ok(how) = std::env::var(AGENT_ENV) else {
        return;
    };
    let (mode, out) = how.split_once(':').unwrap();
    let chat = format!(
        "{}/chat/completions",
        std::env::var("OPENAI_BASE_URL").unwrap()
    );
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let json = [
        ("content-type", "application/json"),
        ("traceparent", TRACEPARENT),
    ];
    let mut statuses = vec![post(&chat, &json, body)];
    if mode == "silent" {
        statuses.push(post(&chat, &json, body));
    }
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").unwrap();
    let proto = ("content-type", "application/x-protobuf");
    if mode != "silent" {
        statuses.push(post(&endpoint, &[proto], b"\xff\xff not protobuf"));
    }
    if mode == "exports" {
        for (i, e) in exports().iter().enumerate() {
            let (body, encoding) = match i {
                0 => (gzip(e), "gzip"),
                1 => (zlib(e), "deflate"),
                _ => (e.clone(), "identity"),
            };
            statuses.push(post(
                &endpoint,
                &[proto, ("content-encoding", encoding)],
                &body,
            ));
        }
        statuses.push(post(&endpoint, &[proto, ("content-encoding", "br")], b"x"));
        let doc = gzip(br#"{"resourceSpans":[]}"#);
        let headers = [
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ];
        statuses.push(post(&endpoint, &headers, &doc));
    }
    let env: Vec<String> = OTEL_VARS
        .iter()
        .map(|k| format!("{k}={}", std::env::var(k).unwrap_or_default()))
        .collect();
    std::fs::write(out, format!("{statuses:?}\n{}\n", env.join("\n"))).unwrap();
}

/// `capsize exec` of the scenario with the agent in `mode`, its environment cleared of
/// OpenTelemetry variables but `env`: the output and what the agent wrote.
fn exec(t: &Temp, mode: &str, env: &[(&str, &str)]) -> (Output, String) {
    let scenario = t.write("s.toml", SCENARIO);
    let (out, seen) = (t.path("o"), t.path("agent.txt"));
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capsize"));
    cmd.arg("exec")
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .arg("--")
        .arg(&me)
        .args(["--ignored", "--exact", "trace_agent", "--nocapture"])
        .env(AGENT_ENV, format!("{mode}:{}", seen.display()));
    for v in OTEL_VARS {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let o = cmd.output().expect("capsize runs");
    let agent = std::fs::read_to_string(&seen).unwrap_or_default();
    (o, agent)
}

#[test]
fn exports_reach_the_mock_decoded_and_a_bad_one_is_refused() {
    let t = Temp::new("exec-traces", "exports");
    let env = [
        // Where the spans would have gone: a signal's own endpoint wins over exec's general one.
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:1/v1/traces",
        ),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd"),
    ];
    let (o, agent) = exec(&t, "exports", &env);
    let (stdout, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{stdout}{err}");
    assert_eq!(
        err,
        "capsize: the agent's traces go to the mock: overriding OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_COMPRESSION of the environment\n"
    );
    let exports = exports();
    let n = exports.len();
    assert!(n >= 3, "{n} exports");
    // The chat, the bad body (400), each export (200), br (415), the JSON document (200).
    let mut statuses = vec![200, 400];
    statuses.extend(std::iter::repeat_n(200, n));
    statuses.extend([415, 200]);
    let mut lines = agent.lines();
    assert_eq!(
        lines.next(),
        Some(format!("{statuses:?}").as_str()),
        "{agent}"
    );
    // The mock is every endpoint the SDK reads; gzip is read, so left; zstd is not: none.
    let env: Vec<&str> = lines.collect();
    let uri = env[0].strip_prefix("OTEL_EXPORTER_OTLP_ENDPOINT=").unwrap();
    assert!(uri.starts_with("http://127.0.0.1:"), "{agent}");
    assert_eq!(
        env[1..],
        [
            format!("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={uri}/v1/traces"),
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf".to_string(),
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf".to_string(),
            "OTEL_EXPORTER_OTLP_COMPRESSION=gzip".to_string(),
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none".to_string(),
        ]
    );
    // Only what decoded is kept, inflated, each after its length; the JSON a line.
    let out = t.path("o");
    let framed: Vec<u8> = exports
        .iter()
        .flat_map(|e| [(e.len() as u32).to_be_bytes().to_vec(), e.clone()].concat())
        .collect();
    assert_eq!(std::fs::read(out.join("traces.otlp")).unwrap(), framed);
    assert_eq!(
        std::fs::read_to_string(out.join("traces.jsonl")).unwrap(),
        "{\"resourceSpans\":[]}\n"
    );
    let dir = out.display();
    assert!(
        stdout.contains(&format!(
            "  recorded 1 requests in {dir}/calls.jsonl and {} trace exports in {dir}/traces.otlp, traces.jsonl (2 trace exports refused, the first 400: is not an OTLP protobuf ExportTraceServiceRequest: ",
            n + 1
        )),
        "{stdout}"
    );
    // Calibrate reads the file whole: every span of every export.
    let spans: usize = exports
        .iter()
        .map(|e| {
            use prost::Message;
            let r = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(&e[..]).unwrap();
            r.resource_spans[0].scope_spans[0].spans.len()
        })
        .sum();
    let traces = out.join("traces.otlp");
    let cal = t.path("cal");
    let o = capsize(&[
        "calibrate",
        traces.to_str().unwrap(),
        "--out",
        cal.to_str().unwrap(),
        "--no-check",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    assert!(
        text.contains(&format!("read {spans} spans or rows")),
        "{text}"
    );
}

#[test]
fn an_agent_that_looks_instrumented_but_left_no_traces_is_told_so() {
    let t = Temp::new("exec-traces", "silent");
    let (o, agent) = exec(&t, "silent", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(agent.starts_with("[200, 200]\n"), "{agent}");
    assert_eq!(
        stderr(&o),
        "capsize: warning: the agent looks instrumented: 2 of its 2 requests carried a traceparent, but it exported no traces to the mock: no traces recorded (is OTEL_TRACES_EXPORTER otlp, and does it flush its spans before it exits?)\n"
    );
    assert!(!t.path("o").join("traces.otlp").exists());

    let t = Temp::new("exec-traces", "refused");
    let (o, agent) = exec(&t, "refused", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(agent.starts_with("[200, 400]\n"), "{agent}");
    let err = stderr(&o);
    assert!(
        err.starts_with("capsize: warning: the agent looks instrumented: its one trace export was refused (400: is not an OTLP protobuf ExportTraceServiceRequest: "),
        "{err}"
    );
    assert!(err.ends_with("): no traces recorded (is OTEL_TRACES_EXPORTER otlp, and does it flush its spans before it exits?)\n"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!t.path("o").join("traces.otlp").exists());
}

/// The real OpenTelemetry Python SDK's OTLP/HTTP exporter: 10 queries of a root span and a
/// model span each.
const SDK_AGENT: &str = r#"
import os, json, http.client, urllib.parse
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
tp = TracerProvider(); tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter())); trace.set_tracer_provider(tp); tr = trace.get_tracer("a")
ep = urllib.parse.urlparse(os.environ["OPENAI_BASE_URL"])
for q in range(10):
    with tr.start_as_current_span("q", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tr.start_as_current_span("c", attributes={"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 10}):
            c = http.client.HTTPConnection(ep.hostname, ep.port); c.request("POST", "/v1/chat/completions", json.dumps({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}), {"content-type": "application/json"}); c.getresponse().read(); c.close()
tp.shutdown()
"#;

/// Runs [`SDK_AGENT`] under exec with `env`; calibrate's line on what it read.
fn sdk_run(t: &Temp, name: &str, env: &[(&str, &str)]) -> String {
    let scenario = t.write("s.toml", SCENARIO);
    let agent = t.write("sdk.py", SDK_AGENT);
    let out = t.path(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capsize"));
    cmd.arg("exec")
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .arg("--");
    cmd.arg(common::python()).arg(&agent);
    for v in OTEL_VARS {
        cmd.env_remove(v);
    }
    let o = cmd.envs(env.iter().copied()).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", stderr(&o));
    assert!(stdout.contains("trace exports in"), "{stdout}");
    let cal = t.path(&format!("{name}-cal"));
    let traces = out.join("traces.otlp");
    let o = capsize(&[
        "calibrate",
        traces.to_str().unwrap(),
        "--out",
        cal.to_str().unwrap(),
        "--no-check",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("read "))
        .unwrap_or_default()
        .to_string()
}

#[test]
#[ignore = "needs the SDK venv: scripts/test.sh"]
fn the_real_sdks_gzipped_or_redirected_spans_are_recorded() {
    let t = Temp::new("exec-traces", "sdk");
    for (name, env) in [
        ("gzip", [("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")]),
        (
            "elsewhere",
            [(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://127.0.0.1:1/v1/traces",
            )],
        ),
    ] {
        let read = sdk_run(&t, name, &env);
        assert!(
            read.starts_with("read 20 spans or rows: 10 queries"),
            "{name}: {read}"
        );
    }
}
