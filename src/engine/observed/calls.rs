//! `capsize exec`'s `calls.jsonl`: one line per request the mock saw, the provider's view of
//! someone else's agent. Each line is one attempt (a retry is a line of its own), so a 429 is
//! seen as such and an answered attempt's time is the provider's alone.
//!
//! A line: `{"capsize_call": 1, "unix_ns": ..., "provider": "llm", "route": "model" | "tool",
//! "tool": "kb_search", "model": "gpt-4o", "status": 200, "latency_ms": 812.5, "input_tokens":
//! 2600, "max_tokens": 500, "output_tokens": 312, "retry_count": 0, "traceparent": "00-…",
//! "rpm_limit": 500, "tpm_limit": 200000}` (the limits as the provider's headers gave them);
//! every key but `capsize_call`, `unix_ns`, `provider`, `route` and `status` may be absent.

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{duration_ns, end_of, lines, place, BadTime, Kind, ReadError, Span, Tally};

/// The key every line has, and the version of the line's form.
pub const MARKER: &str = "\"capsize_call\"";

/// One line of `calls.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallLine {
    /// The form's version: 1.
    pub capsize_call: u32,
    /// When the request arrived, in nanoseconds since the Unix epoch.
    pub unix_ns: i64,
    /// The provider's name in the scenario.
    pub provider: String,
    /// `"model"` or `"tool"`.
    pub route: String,
    /// The tool's name (a tool call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The model asked for (a model call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The status answered (0: the client went away before an answer).
    pub status: u16,
    /// From arrival to the answer's end, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// Time to the first streamed token, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// The most output tokens asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Output tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// The SDK's retry count header (`x-stainless-retry-count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u64>,
    /// The W3C `traceparent` the agent sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The requests-per-minute limit the provider's rate-limit headers gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_limit: Option<f64>,
    /// The tokens-per-minute limit the provider's rate-limit headers gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm_limit: Option<f64>,
}

impl CallLine {
    /// The line for a request the mock saw, to a provider named `provider`.
    pub fn of(provider: &str, r: &capsize_mock::server::RequestRecord) -> CallLine {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        CallLine {
            capsize_call: 1,
            unix_ns: i64::try_from(r.arrived.as_nanos()).unwrap_or(i64::MAX),
            provider: provider.to_string(),
            route: if r.tool.is_some() { "tool" } else { "model" }.into(),
            tool: r.tool.clone(),
            model: r.model.clone(),
            status: if r.answered { r.status } else { 0 },
            latency_ms: Some(ms(r.held)),
            ttft_ms: r.first_token.map(ms),
            input_tokens: r.input_tokens,
            max_tokens: r.max_tokens,
            output_tokens: r.output_tokens,
            retry_count: r.retry_count,
            traceparent: r.traceparent.clone(),
            rpm_limit: r.rpm_limit,
            tpm_limit: r.tpm_limit,
        }
    }
}

/// Reads `calls.jsonl`.
pub(super) fn read(
    path: &Path,
    reader: impl BufRead,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let mut skipped = Tally::default();
    let mut spans = 0;
    lines(path, reader, &mut skipped, |skipped, n, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        match serde_json::from_str::<CallLine>(line) {
            Ok(call) if call.capsize_call != 1 => skipped.add_example(
                "a line of another version of exec's calls (capsize_call is not 1): this capsize reads version 1",
                || place(path, n),
                || call.capsize_call.to_string(),
            ),
            Ok(call) if call.unix_ns <= 0 => skipped.add(
                "a call without its arrival time (unix_ns not after 1970)",
                || place(path, n),
            ),
            Ok(call) => match span(call) {
                Ok(s) => {
                    spans += 1;
                    sink(s);
                }
                Err(reason) => skipped.add(reason, || place(path, n)),
            },
            Err(e) if e.is_eof() => skipped.add("a truncated line", || place(path, n)),
            Err(_) => skipped.add("a line that is not one of exec's calls", || place(path, n)),
        }
        Ok(())
    })?;
    Ok((spans, skipped))
}

/// A call line as a span: its trace and parent from its `traceparent`, when it has one; or
/// why it cannot be read (a latency that is no time).
fn span(c: CallLine) -> Result<Span, &'static str> {
    let end =
        match c.latency_ms.map(|ms| end_of(c.unix_ns, ms)).transpose() {
            Ok(end) => end,
            Err(BadTime::Negative) => return Err("a call whose latency_ms is negative: not read"),
            Err(BadTime::NotANumber) => {
                return Err("a call whose latency_ms is not a number: not read")
            }
            Err(BadTime::TooLarge) => return Err(
                "a call whose latency_ms is too large (it would end past the year 2262): not read",
            ),
        };
    let first_chunk_ns = c
        .ttft_ms
        .map(duration_ns)
        .transpose()
        .map_err(|_| "a call whose ttft_ms is negative, not a number or too large: not read")?;
    let kind = match c.route.as_str() {
        "tool" => Kind::Tool {
            name: c.tool.unwrap_or_else(|| "tool".into()),
            provider: Some(c.provider),
        },
        _ => Kind::Model {
            provider: c.provider,
            model: c.model.unwrap_or_default(),
        },
    };
    let mut s = Span::new(kind, c.unix_ns);
    s.attempt = true;
    if let Some((trace, parent)) = c.traceparent.as_deref().and_then(traceparent) {
        s.trace = trace;
        s.parent = parent;
    }
    s.end_ns = end;
    s.status = (c.status != 0).then_some(c.status);
    s.error = match c.status {
        0 => Some("no answer".into()),
        st if st >= 400 => Some(format!("HTTP {st}")),
        _ => None,
    };
    s.input_tokens = c.input_tokens;
    s.output_tokens = c.output_tokens;
    s.max_tokens = c.max_tokens;
    s.resend_count = c.retry_count;
    s.first_chunk_ns = first_chunk_ns;
    s.limits = (c.rpm_limit, c.tpm_limit);
    Ok(s)
}

/// The trace id and parent span id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`).
pub fn traceparent(v: &str) -> Option<(u128, u64)> {
    let mut parts = v.trim().split('-');
    let (_version, trace, parent) = (parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(trace, 32) || !hex(parent, 16) {
        return None;
    }
    Some((
        u128::from_str_radix(trace, 16).ok()?,
        u64::from_str_radix(parent, 16).ok()?,
    ))
}
