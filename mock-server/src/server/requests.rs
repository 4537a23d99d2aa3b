//! A log of the model-facing requests, one [`RequestRecord`] each, handed to the caller's
//! [`RequestLog`] when the request leaves (answered, or its client gone): for a caller that wants
//! every request the provider saw, as `capsize exec` does (it writes them as `calls.jsonl`).
//! Off unless `ServerConfig::request_log` is set; nothing is kept by the server either way.
//! Requests refused before the model (400, 404, 405, 408, 413) are not logged. Likewise a
//! [`TraceSink`] takes the OTLP traces an instrumented agent exports to the server
//! (`traces.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hyper::HeaderMap;
use tokio::time::Instant;

use super::traffic::RETRY_COUNT_HEADER;

/// The W3C trace-context header a traced client sends.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// When it arrived, since the Unix epoch (the server's wall clock at start, plus real time).
    pub arrived: Duration,
    /// From arrival until the answer was handed over (a streamed one: its last event) or the
    /// client went away.
    pub held: Duration,
    /// The tool's name, for `POST /tools/NAME`; `None`: a chat request.
    pub tool: Option<String>,
    /// The `model` the request named (a chat request).
    pub model: Option<String>,
    /// The status decided.
    pub status: u16,
    /// Whether its answer was handed over before the client went away.
    pub answered: bool,
    /// Time to the first token of a generated answer.
    pub first_token: Option<Duration>,
    /// Prompt tokens (a chat request).
    pub input_tokens: Option<u64>,
    /// `max_tokens` asked for (a chat request that set it).
    pub max_tokens: Option<u64>,
    /// Output tokens generated (a generating provider's answer).
    pub output_tokens: Option<u64>,
    /// Tokens the request cost (charged if it was).
    pub tokens: u64,
    /// The client's `x-stainless-retry-count`.
    pub retry_count: Option<u64>,
    /// The client's `traceparent`.
    pub traceparent: Option<String>,
    /// The requests-per-minute limit its rate-limit headers gave (`None`: unlimited).
    pub rpm_limit: Option<f64>,
    /// The tokens-per-minute limit its rate-limit headers gave (`None`: unlimited).
    pub tpm_limit: Option<f64>,
}

/// Where records go: called once per request, from the server's thread, when it leaves.
#[derive(Clone)]
pub struct RequestLog(pub Arc<dyn Fn(RequestRecord) + Send + Sync>);

impl fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestLog(..)")
    }
}

impl PartialEq for RequestLog {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What the model decided about a request, for its record.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Seen {
    pub(crate) tool: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) status: u16,
    pub(crate) first_token: Option<Duration>,
    pub(crate) input_tokens: Option<u64>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    pub(crate) tokens: u64,
    pub(crate) rpm_limit: Option<f64>,
    pub(crate) tpm_limit: Option<f64>,
}

/// A record being made: started on arrival, finished when the request leaves.
pub(crate) struct Pending {
    log: RequestLog,
    arrived: Duration,
    entered: Instant,
    retry_count: Option<u64>,
    traceparent: Option<String>,
    pub(crate) seen: Seen,
}

impl Pending {
    /// A request with `headers` arriving now, at `arrived` since the epoch.
    #[allow(clippy::disallowed_methods)] // real time: the server's clock
    pub(crate) fn start(log: &RequestLog, arrived: Duration, headers: &HeaderMap) -> Self {
        let text = |name: &str| {
            let v = headers.get(name)?.to_str().ok()?.trim();
            (!v.is_empty() && v.len() <= 256).then(|| v.to_string())
        };
        Pending {
            log: log.clone(),
            arrived,
            entered: Instant::now(),
            retry_count: text(RETRY_COUNT_HEADER).and_then(|v| v.parse().ok()),
            traceparent: text(TRACEPARENT_HEADER),
            seen: Seen::default(),
        }
    }

    /// Hands the record over: the request leaves now, answered or not.
    pub(crate) fn finish(self, answered: bool) {
        let s = self.seen;
        (self.log.0)(RequestRecord {
            arrived: self.arrived,
            held: self.entered.elapsed(),
            tool: s.tool,
            model: s.model,
            status: s.status,
            answered,
            first_token: s.first_token,
            input_tokens: s.input_tokens,
            max_tokens: s.max_tokens,
            output_tokens: s.output_tokens,
            tokens: s.tokens,
            retry_count: self.retry_count,
            traceparent: self.traceparent,
            rpm_limit: s.rpm_limit,
            tpm_limit: s.tpm_limit,
        });
    }
}

/// Where OTLP trace requests an agent exports to the server (`POST /v1/traces`) go. Without
/// one, the route is unknown (404).
#[derive(Clone)]
pub struct TraceSink(pub Arc<TraceFn>);

/// What a [`TraceSink`] is handed, once per export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceExport<'a> {
    /// A body read whole, its `Content-Encoding` undone, and whether it is JSON (else
    /// protobuf). The sink keeps it and returns `Ok`, or returns why it is not an OTLP
    /// export, which the server answers 400.
    Body {
        /// The body, decoded.
        bytes: &'a [u8],
        /// Sent as `application/json`.
        json: bool,
    },
    /// An export the server refused before the sink saw its body: its status (413 too large,
    /// 415 an encoding it does not read, 400 cut short or not in its encoding), and why.
    Refused {
        /// The status answered.
        status: u16,
        /// Why, in a few words.
        why: &'a str,
    },
}

/// What a [`TraceSink`] calls, from the server's thread.
pub type TraceFn = dyn Fn(TraceExport<'_>) -> Result<(), String> + Send + Sync;

impl fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TraceSink(..)")
    }
}

impl PartialEq for TraceSink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
