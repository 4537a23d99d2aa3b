//! OTLP JSON traces: what the OpenTelemetry Collector's file exporter writes (one
//! `ExportTraceServiceRequest` a line: `resourceSpans[].scopeSpans[].spans[]`), or one such
//! request as a whole document (an OTLP/HTTP JSON body saved to a file). Spans are read by the
//! GenAI semantic conventions, current and older names alike (`gen_ai.provider.name` or
//! `gen_ai.system`, `gen_ai.usage.input_tokens` or `prompt_tokens`).

use std::io::{BufRead, Read};
use std::path::Path;

use serde::Deserialize;

use super::{duration_ns, place, Kind, Lines, ReadError, Span, Tally, MAX_RECORD_BYTES};

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
    fn val(&self) -> Val<'_> {
        if let Some(v) = &self.string_value {
            return Val::Str(v);
        }
        if let Some(n) = &self.int_value {
            return match n {
                Num::Int(i) => Val::Int(*i),
                Num::Float(f) => Val::Double(*f),
                Num::Text(t) => t.trim().parse().map_or(Val::Str(t), Val::Int),
            };
        }
        if let Some(n) = self.double_value.as_ref().and_then(Num::as_f64) {
            return Val::Double(n);
        }
        self.bool_value.map_or(Val::Other, Val::Bool)
    }
}

/// An attribute's value, as either encoding gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Val<'a> {
    /// A string.
    Str(&'a str),
    /// An integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// Anything else (an array, a map, bytes).
    Other,
}

impl Val<'_> {
    fn text(self) -> Option<String> {
        match self {
            Val::Str(s) => Some(s.to_string()),
            Val::Int(i) => Some(i.to_string()),
            Val::Bool(b) => Some(b.to_string()),
            Val::Double(_) | Val::Other => None,
        }
    }
    fn number(self) -> Option<f64> {
        let v = match self {
            Val::Int(i) => i as f64,
            Val::Double(d) => d,
            Val::Str(s) => s.trim().parse().ok()?,
            Val::Bool(_) | Val::Other => return None,
        };
        v.is_finite().then_some(v)
    }
    fn count(self) -> Option<u64> {
        self.number()
            .filter(|v| *v >= 0.0 && v.fract() == 0.0)
            .map(|v| v as u64)
    }
    fn seconds(self) -> Option<f64> {
        self.number().filter(|v| *v >= 0.0)
    }
}

/// What every span has, as either encoding gives it: ids (`None` when malformed), times, and
/// whether its status is an error.
pub(super) struct Head<'a> {
    /// The trace id.
    pub(super) trace: Option<u128>,
    /// The span id.
    pub(super) id: Option<u64>,
    /// The parent's id (0: a root).
    pub(super) parent: u64,
    /// Start, ns since the epoch.
    pub(super) start: Option<i64>,
    /// End, ns since the epoch.
    pub(super) end: Option<i64>,
    /// Its status says it failed (code 2), with this message.
    pub(super) failed: Option<&'a str>,
}

/// The operations that are a call to a model.
const MODEL_OPERATIONS: [&str; 4] = ["chat", "text_completion", "generate_content", "completion"];

/// Reads OTLP JSON from `reader`: line by line (the file exporter's form); a file whose first
/// line is not a whole request is read as one document instead (of at most
/// [`MAX_RECORD_BYTES`]).
pub(super) fn read(
    path: &Path,
    reader: impl BufRead,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let mut skipped = Tally::default();
    let mut spans = 0u64;
    let mut lines = Lines::new(path, reader);
    // The first line that is not blank tells the two forms apart.
    let first = loop {
        let Some(n) = lines.next()? else {
            return Ok((0, skipped));
        };
        match lines.text() {
            Some(l) if l.trim().is_empty() => continue,
            Some(l) => break (n, serde_json::from_str::<Request>(l)),
            None => break (n, serde_json::from_slice::<Request>(lines.raw())),
        }
    };
    match first {
        (_, Err(e)) if e.is_eof() => return document(path, lines, sink),
        (n, Ok(request)) => spans += spans_of(path, n, request, &mut skipped, sink),
        (n, Err(_)) => one_line(path, n, lines.text(), &mut skipped),
    }
    while let Some(n) = lines.next()? {
        let Some(line) = lines.text() else {
            skipped.add("a line that is not UTF-8", || place(path, n));
            continue;
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Request>(line) {
            Ok(request) => spans += spans_of(path, n, request, &mut skipped, sink),
            Err(e) if e.is_eof() => {
                skipped.add("a truncated line (the file was cut mid-request?)", || {
                    place(path, n)
                });
            }
            Err(_) => one_line(path, n, Some(line), &mut skipped),
        }
    }
    Ok((spans, skipped))
}

/// Whether `body` is one OTLP JSON export request, as [`read`] reads a line: `Err` says why
/// not (what `capsize exec`'s trace sink answers 400 with, rather than keep it).
pub fn check_request(body: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<Request>(body)
        .map(drop)
        .map_err(|e| format!("is not an OTLP JSON ExportTraceServiceRequest: {e}"))
}

/// Counts line `n` (its text, if UTF-8), which is not a request.
fn one_line(path: &Path, n: u64, text: Option<&str>, skipped: &mut Tally) {
    match text {
        Some(_) => skipped.add("a line that is not an OTLP JSON request", || place(path, n)),
        None => skipped.add("a line that is not UTF-8", || place(path, n)),
    }
}

/// The whole file as one request: the line read so far and the rest, byte for byte (a cut
/// document is said to be truncated, not misread at the cut).
fn document(
    path: &Path,
    lines: Lines<'_, impl BufRead>,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let mut doc = lines.raw().to_vec();
    lines
        .into_rest()
        .take(MAX_RECORD_BYTES + 1 - doc.len() as u64)
        .read_to_end(&mut doc)
        .map_err(|e| ReadError::new(path, None, e.to_string()))?;
    if doc.len() as u64 > MAX_RECORD_BYTES {
        return Err(ReadError::new(
            path,
            None,
            format!(
                "one OTLP JSON document of more than {MAX_RECORD_BYTES} bytes (256 MiB), the most \
                 capsize reads as one document: export one request a line (the Collector's file \
                 exporter does)"
            ),
        ));
    }
    let mut skipped = Tally::default();
    match serde_json::from_slice::<Request>(&doc) {
        Ok(request) => Ok((spans_of(path, 1, request, &mut skipped, sink), skipped)),
        Err(e) if e.is_eof() => Err(ReadError::new(
            path,
            Some(e.line() as u64),
            "truncated: the file ends inside its JSON document",
        )),
        Err(e) => Err(ReadError::new(
            path,
            Some(e.line() as u64),
            format!("not OTLP JSON: {e}"),
        )),
    }
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

/// One JSON span, or `None` (counted in `skipped`) when it cannot be used.
fn span(raw: RawSpan, skipped: &mut Tally, at: &dyn Fn() -> String) -> Option<Span> {
    let failed = raw
        .status
        .as_ref()
        .filter(|st| st.code.as_ref().and_then(Num::as_i64) == Some(2))
        .map(|st| st.message.as_deref().unwrap_or(""));
    let head = Head {
        trace: hex_u128(&raw.trace_id),
        id: hex_u64(&raw.span_id),
        parent: hex_u64(&raw.parent_span_id).unwrap_or(0),
        start: raw.start_time_unix_nano.as_ref().and_then(Num::as_i64),
        end: raw.end_time_unix_nano.as_ref().and_then(Num::as_i64),
        failed,
    };
    let attrs = raw
        .attributes
        .iter()
        .filter_map(|kv| Some((kv.key.as_str(), kv.value.as_ref()?.val())));
    build(head, attrs, skipped, at)
}

/// A span from its head and attributes (either encoding), or `None` (counted in `skipped`)
/// when it cannot be used.
pub(super) fn build<'a>(
    head: Head,
    attrs: impl Iterator<Item = (&'a str, Val<'a>)>,
    skipped: &mut Tally,
    at: &dyn Fn() -> String,
) -> Option<Span> {
    let (Some(trace), Some(id)) = (head.trace.filter(|t| *t != 0), head.id.filter(|i| *i != 0))
    else {
        skipped.add(
            "a span without a trace id and span id (16 and 8 bytes; OTLP JSON writes them in hex)",
            at,
        );
        return None;
    };
    let (Some(start), Some(end)) = (head.start.filter(|s| *s > 0), head.end) else {
        skipped.add("a span without its start or end time", at);
        return None;
    };
    let mut a = Attributes::default();
    for (key, v) in attrs {
        a.take(key, v);
    }
    let kind = a.kind(skipped, at);
    let kind_is_http = kind == Kind::Http;
    let mut s = Span::new(kind, start);
    s.trace = trace;
    s.id = id;
    s.parent = head.parent;
    s.end_ns = Some(end);
    s.status = a.status;
    s.error = a.error.or_else(|| {
        head.failed.map(|m| {
            if m.is_empty() {
                "error".into()
            } else {
                m.to_string()
            }
        })
    });
    s.input_tokens = a.input_tokens;
    s.output_tokens = a.output_tokens;
    s.max_tokens = a.max_tokens;
    s.resend_count = a.resend_count;
    s.first_chunk_ns = match a.first_chunk_s.map(|v| duration_ns(v * 1e3)).transpose() {
        Ok(first) => first,
        Err(_) => {
            skipped.add(
                "a time to first chunk too large for a time in ns: the span is read without it",
                at,
            );
            None
        }
    };
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
    fn take(&mut self, key: &str, v: Val) {
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
                skipped.add_example(
                    "a gen_ai.operation.name that is neither a model call nor a tool call",
                    at,
                    || other.to_string(),
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

/// 32 hex digits (and nothing else: no sign) as a trace id.
fn hex_u128(s: &str) -> Option<u128> {
    (s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u128::from_str_radix(s, 16).ok())
        .flatten()
}

/// 16 hex digits as a span id.
fn hex_u64(s: &str) -> Option<u64> {
    (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}
