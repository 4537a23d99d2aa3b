//! OTLP JSON traces: what the OpenTelemetry Collector's file exporter writes (one
//! `ExportTraceServiceRequest` a line: `resourceSpans[].scopeSpans[].spans[]`), or one such
//! request as a whole document (an OTLP/HTTP JSON body saved to a file). Spans are read by the
//! GenAI semantic conventions, current and older names alike (`gen_ai.provider.name` or
//! `gen_ai.system`, `gen_ai.usage.input_tokens` or `prompt_tokens`).

use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;

use super::{lines, place, Kind, ReadError, Span, Tally};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans {
    #[serde(default, alias = "instrumentationLibrarySpans")]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Deserialize)]
struct ScopeSpans {
    #[serde(default)]
    spans: Vec<RawSpan>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpan {
    #[serde(default)]
    trace_id: String,
    #[serde(default)]
    span_id: String,
    #[serde(default)]
    parent_span_id: String,
    #[serde(default)]
    start_time_unix_nano: Option<Num>,
    #[serde(default)]
    end_time_unix_nano: Option<Num>,
    #[serde(default)]
    attributes: Vec<KeyValue>,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    code: Option<Num>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct KeyValue {
    key: String,
    #[serde(default)]
    value: Option<AnyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyValue {
    string_value: Option<String>,
    int_value: Option<Num>,
    double_value: Option<Num>,
    bool_value: Option<bool>,
}

/// OTLP JSON writes 64-bit integers as strings ("1700000000000000000"); some writers as numbers.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Num {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Num {
    fn as_i64(&self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(*i),
            Num::Float(f) => (f.is_finite() && f.fract() == 0.0).then_some(*f as i64),
            Num::Text(s) => s.trim().parse().ok(),
        }
    }
    fn as_f64(&self) -> Option<f64> {
        match self {
            Num::Int(i) => Some(*i as f64),
            Num::Float(f) => Some(*f),
            Num::Text(s) => s.trim().parse().ok(),
        }
    }
}

impl AnyValue {
    fn text(&self) -> Option<String> {
        if let Some(s) = &self.string_value {
            return Some(s.clone());
        }
        if let Some(i) = self.int_value.as_ref().and_then(Num::as_i64) {
            return Some(i.to_string());
        }
        self.bool_value.map(|b| b.to_string())
    }
    fn count(&self) -> Option<u64> {
        let v = match (&self.int_value, &self.double_value, &self.string_value) {
            (Some(n), _, _) | (_, Some(n), _) => n.as_f64()?,
            (_, _, Some(s)) => s.trim().parse().ok()?,
            _ => return None,
        };
        (v.is_finite() && v >= 0.0 && v.fract() == 0.0).then_some(v as u64)
    }
    fn seconds(&self) -> Option<f64> {
        let v = match (&self.double_value, &self.int_value, &self.string_value) {
            (Some(n), _, _) | (_, Some(n), _) => n.as_f64()?,
            (_, _, Some(s)) => s.trim().parse().ok()?,
            _ => return None,
        };
        (v.is_finite() && v >= 0.0).then_some(v)
    }
}

/// The operations that are a call to a model.
const MODEL_OPERATIONS: [&str; 4] = ["chat", "text_completion", "generate_content", "completion"];

/// Reads OTLP JSON from `reader`: line by line (the file exporter's form); a file whose first
/// line is not a whole request is read as one document instead.
pub(super) fn read(
    path: &Path,
    reader: impl BufRead,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let mut skipped = Tally::default();
    let mut spans = 0u64;
    let mut whole = None;
    let mut text = String::new();
    lines(path, reader, &mut skipped, |skipped, n, line| {
        if let Some(doc) = whole.as_mut() {
            let doc: &mut String = doc;
            doc.push_str(line);
            doc.push('\n');
            return Ok(());
        }
        if line.trim().is_empty() {
            return Ok(());
        }
        match serde_json::from_str::<Request>(line) {
            Ok(request) => spans += spans_of(path, n, request, skipped, sink),
            Err(e) if e.is_eof() && n == 1 => {
                // Not one request a line: the whole file is one document.
                text.push_str(line);
                text.push('\n');
                whole = Some(std::mem::take(&mut text));
            }
            Err(e) if e.is_eof() => {
                skipped.add("a truncated line (the file was cut mid-request?)", || {
                    place(path, n)
                });
            }
            Err(_) => skipped.add("a line that is not an OTLP JSON request", || place(path, n)),
        }
        Ok(())
    })?;
    if let Some(doc) = whole {
        match serde_json::from_str::<Request>(&doc) {
            Ok(request) => spans += spans_of(path, 1, request, &mut skipped, sink),
            Err(e) if e.is_eof() => {
                return Err(ReadError::new(
                    path,
                    Some(e.line() as u64),
                    "truncated: the file ends inside its JSON document",
                ))
            }
            Err(e) => {
                return Err(ReadError::new(
                    path,
                    Some(e.line() as u64),
                    format!("not OTLP JSON: {e}"),
                ))
            }
        }
    }
    Ok((spans, skipped))
}

/// Hands over every span of `request` (from line `n`); returns how many.
fn spans_of(
    path: &Path,
    n: u64,
    request: Request,
    skipped: &mut Tally,
    sink: &mut dyn FnMut(Span),
) -> u64 {
    let mut count = 0;
    for raw in request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
    {
        match span(raw, skipped, &|| place(path, n)) {
            Some(s) => {
                count += 1;
                sink(s);
            }
            None => continue,
        }
    }
    count
}

/// One span, or `None` (counted in `skipped`) when it cannot be used.
fn span(raw: RawSpan, skipped: &mut Tally, at: &dyn Fn() -> String) -> Option<Span> {
    let (Some(trace), Some(id)) = (hex_u128(&raw.trace_id), hex_u64(&raw.span_id)) else {
        skipped.add(
            "a span whose traceId or spanId is not hex (OTLP JSON writes ids in hex)",
            at,
        );
        return None;
    };
    let parent = if raw.parent_span_id.is_empty() {
        0
    } else {
        hex_u64(&raw.parent_span_id).unwrap_or(0)
    };
    let start = raw.start_time_unix_nano.as_ref().and_then(Num::as_i64);
    let end = raw.end_time_unix_nano.as_ref().and_then(Num::as_i64);
    let (Some(start), Some(end)) = (start.filter(|s| *s > 0), end) else {
        skipped.add("a span without its start or end time", at);
        return None;
    };
    let mut a = Attributes::default();
    for kv in &raw.attributes {
        if let Some(v) = &kv.value {
            a.take(&kv.key, v);
        }
    }
    let kind = a.kind(skipped, at);
    let kind_is_http = kind == Kind::Http;
    let mut s = Span::new(kind, start);
    s.trace = trace;
    s.id = id;
    s.parent = parent;
    s.end_ns = Some(end);
    s.status = a.status;
    s.error = a.error.or_else(|| {
        let failed = raw
            .status
            .as_ref()
            .and_then(|st| st.code.as_ref()?.as_i64())
            == Some(2);
        failed.then(|| {
            raw.status
                .and_then(|st| st.message)
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "error".into())
        })
    });
    s.input_tokens = a.input_tokens;
    s.output_tokens = a.output_tokens;
    s.max_tokens = a.max_tokens;
    s.resend_count = a.resend_count;
    s.first_chunk_ns = a.first_chunk_s.map(|v| (v * 1e9) as i64);
    s.session = a.session;
    s.attempt = kind_is_http;
    if end < start {
        skipped.add(
            "a span that ends before it starts (clock skew?): kept for the tree, not timed",
            at,
        );
        s.end_ns = None;
    }
    Some(s)
}

/// The attributes capsize reads, under their current and older names.
#[derive(Default)]
struct Attributes {
    operation: Option<String>,
    provider: Option<String>,
    system: Option<String>,
    model: Option<String>,
    response_model: Option<String>,
    tool: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    max_tokens: Option<u64>,
    status: Option<u16>,
    error: Option<String>,
    resend_count: Option<u64>,
    first_chunk_s: Option<f64>,
    session: Option<String>,
}

impl Attributes {
    fn take(&mut self, key: &str, v: &AnyValue) {
        match key {
            "gen_ai.operation.name" => self.operation = v.text(),
            "gen_ai.provider.name" => self.provider = v.text(),
            "gen_ai.system" => self.system = v.text(),
            "gen_ai.request.model" => self.model = v.text(),
            "gen_ai.response.model" => self.response_model = v.text(),
            "gen_ai.tool.name" => self.tool = v.text(),
            "gen_ai.usage.input_tokens" => self.input_tokens = v.count(),
            "gen_ai.usage.prompt_tokens" => self.input_tokens = self.input_tokens.or(v.count()),
            "gen_ai.usage.output_tokens" => self.output_tokens = v.count(),
            "gen_ai.usage.completion_tokens" => {
                self.output_tokens = self.output_tokens.or(v.count())
            }
            "gen_ai.request.max_tokens" => self.max_tokens = v.count(),
            "http.response.status_code" | "http.status_code" => {
                self.status = v.count().and_then(|c| u16::try_from(c).ok())
            }
            "error.type" => self.error = v.text(),
            "http.request.resend_count" => self.resend_count = v.count(),
            "gen_ai.response.time_to_first_chunk" => self.first_chunk_s = v.seconds(),
            "gen_ai.conversation.id" => self.session = v.text(),
            "session.id" => self.session = self.session.take().or(v.text()),
            _ => {}
        }
    }

    fn kind(&mut self, skipped: &mut Tally, at: &dyn Fn() -> String) -> Kind {
        let model = || Kind::Model {
            provider: self
                .provider
                .clone()
                .or(self.system.clone())
                .unwrap_or_default(),
            model: self
                .model
                .clone()
                .or(self.response_model.clone())
                .unwrap_or_default(),
        };
        match self.operation.as_deref() {
            Some(op) if MODEL_OPERATIONS.contains(&op) => model(),
            Some("execute_tool") => Kind::Tool {
                name: self.tool.take().unwrap_or_else(|| "tool".into()),
                provider: None,
            },
            Some("invoke_agent") => Kind::Agent,
            Some(other) => {
                skipped.add(
                    format!(
                        "gen_ai.operation.name \"{other}\": neither a model call nor a tool call"
                    ),
                    at,
                );
                Kind::Other
            }
            None if self.system.is_some() || self.provider.is_some() => {
                skipped.add(
                    "model calls named by gen_ai.system alone (an older convention): read as chat",
                    at,
                );
                model()
            }
            None if self.status.is_some() => Kind::Http,
            None => Kind::Other,
        }
    }
}

fn hex_u128(s: &str) -> Option<u128> {
    (s.len() == 32)
        .then(|| u128::from_str_radix(s, 16).ok())
        .flatten()
}

fn hex_u64(s: &str) -> Option<u64> {
    (s.len() == 16)
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}
