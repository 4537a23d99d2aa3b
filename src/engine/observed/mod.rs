//! What a user's own system was seen doing, read from the files they have: OpenTelemetry traces
//! (the Collector's OTLP JSON, [`otlp`], or protobuf, [`otlp_proto`]), `capsize exec`'s `calls.jsonl` ([`calls`]), and flat
//! request logs ([`logs`]). Each reader hands over one [`Span`] at a time, so memory does not
//! grow with the input; what it could not use is counted by reason in [`Tally`], never guessed.
//! `capsize calibrate` fits a scenario to what is read here.

pub mod calls;
pub mod logs;
pub mod otlp;
pub mod otlp_proto;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// What one span (or one log row) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A call to a model: `gen_ai.operation.name` `chat`, `text_completion` or
    /// `generate_content`.
    Model {
        /// `gen_ai.provider.name` (older: `gen_ai.system`); `""` when not said.
        provider: String,
        /// `gen_ai.request.model` (or `gen_ai.response.model`); `""` when not said.
        model: String,
    },
    /// A tool call: `execute_tool`, named by `gen_ai.tool.name`.
    Tool {
        /// The tool's name.
        name: String,
        /// The provider that served it, when a provider saw it (exec's calls); `None`: the
        /// agent ran it itself.
        provider: Option<String>,
    },
    /// A query's boundary: an `invoke_agent` span.
    Agent,
    /// One HTTP attempt (a span with `http.response.status_code` and no GenAI operation): under
    /// a model call, one try of it.
    Http,
    /// Anything else (a framework's own span, an embeddings call): kept for the tree only.
    Other,
}

/// One observed span or request, in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace it belongs to (0: none, as in a flat log: then it is a query by itself).
    pub trace: u128,
    /// Its id within the trace (0: none).
    pub id: u64,
    /// Its parent's id (0: a root).
    pub parent: u64,
    /// What it is.
    pub kind: Kind,
    /// When it started.
    pub start_ns: i64,
    /// When it ended (`None`: the log has no latency).
    pub end_ns: Option<i64>,
    /// The HTTP status answered, where recorded.
    pub status: Option<u16>,
    /// `error.type` (or the span's error status), where it failed.
    pub error: Option<String>,
    /// Input (prompt) tokens.
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens.
    pub output_tokens: Option<u64>,
    /// The most output tokens asked for (`gen_ai.request.max_tokens`).
    pub max_tokens: Option<u64>,
    /// Retries the client made (`http.request.resend_count`, or the SDK's retry header).
    pub resend_count: Option<u64>,
    /// Time to the first chunk of a streamed answer, in nanoseconds.
    pub first_chunk_ns: Option<i64>,
    /// The session (`gen_ai.conversation.id`, `session.id`), where said.
    pub session: Option<String>,
    /// Whether it is one attempt as the provider saw it (its time is the provider's alone), not
    /// a client's call that may hold retries and waits.
    pub attempt: bool,
    /// The provider's requests- and tokens-per-minute limits, as its rate-limit headers gave
    /// them (where recorded).
    pub limits: (Option<f64>, Option<f64>),
}

impl Span {
    /// A span of this kind from `start_ns`, every optional field empty.
    pub fn new(kind: Kind, start_ns: i64) -> Self {
        Span {
            trace: 0,
            id: 0,
            parent: 0,
            kind,
            start_ns,
            end_ns: None,
            status: None,
            error: None,
            input_tokens: None,
            output_tokens: None,
            max_tokens: None,
            resend_count: None,
            first_chunk_ns: None,
            session: None,
            attempt: false,
            limits: (None, None),
        }
    }

    /// Its duration in ms, when it has an end at or after its start.
    pub fn duration_ms(&self) -> Option<f64> {
        let end = self.end_ns?;
        (end >= self.start_ns).then(|| (end - self.start_ns) as f64 / 1e6)
    }
}

/// What a reader skipped or could not use, counted by reason (in a stable order), with the
/// first place each reason was seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    counts: BTreeMap<String, (u64, String)>,
}

impl Tally {
    /// Counts one `reason`, seen `at` (a place such as `traces.json:17`).
    pub fn add(&mut self, reason: impl Into<String>, at: impl FnOnce() -> String) {
        self.add_n(reason, 1, at);
    }

    /// Counts `n` of `reason`.
    pub fn add_n(&mut self, reason: impl Into<String>, n: u64, at: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        let entry = self
            .counts
            .entry(reason.into())
            .or_insert_with(|| (0, at()));
        entry.0 += n;
    }

    /// Each reason, its count and where it was first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64, &str)> {
        self.counts
            .iter()
            .map(|(k, (n, at))| (k.as_str(), *n, at.as_str()))
    }

    /// Every count added up.
    pub fn total(&self) -> u64 {
        self.counts.values().map(|(n, _)| n).sum()
    }

    /// Adds another tally to this one.
    pub fn merge(&mut self, other: Tally) {
        for (k, (n, at)) in other.counts {
            self.add_n(k, n, || at);
        }
    }
}

/// The kinds of file read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// OTLP JSON: the Collector's file exporter (`resourceSpans[]`), one request a line or one
    /// document.
    OtlpJson,
    /// OTLP protobuf: length-prefixed requests (the Collector's file exporter, `format:
    /// proto`) or one request (an OTLP/HTTP body).
    OtlpProto,
    /// `capsize exec`'s `calls.jsonl`: one line per request the mock saw.
    Calls,
    /// A flat request log, CSV.
    LogCsv,
    /// A flat request log, JSON lines.
    LogJsonl,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::OtlpJson => "OTLP JSON traces",
            Format::OtlpProto => "OTLP protobuf traces",
            Format::Calls => "capsize exec calls.jsonl",
            Format::LogCsv => "request log (CSV)",
            Format::LogJsonl => "request log (JSON lines)",
        })
    }
}

/// What reading one file gave.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRead {
    /// The file.
    pub path: PathBuf,
    /// How it was read.
    pub format: Format,
    /// Spans (or rows) handed over.
    pub spans: u64,
    /// What was skipped, by reason.
    pub skipped: Tally,
}

/// A file that cannot be read at all: one line naming it, where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}{}: {message}", path.display(), at.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line, where known.
    pub at: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl ReadError {
    fn new(path: &Path, at: Option<u64>, message: impl Into<String>) -> Self {
        ReadError {
            path: path.to_path_buf(),
            at,
            message: message.into(),
        }
    }
}

/// Opens `path` for streaming: a regular file only (a FIFO or a device could block or never
/// end), and not empty.
fn open(path: &Path) -> Result<BufReader<File>, ReadError> {
    let fail = |m: String| ReadError::new(path, None, m);
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail(format!(
            "not a regular file ({})",
            capsize_files::file_kind(&meta)
        )));
    }
    if meta.len() == 0 {
        return Err(fail("is empty: nothing to read".into()));
    }
    let file = File::open(path).map_err(|e| fail(e.to_string()))?;
    Ok(BufReader::with_capacity(1 << 16, file))
}

/// Which kind of file `path` is: by its first bytes (a JSON object naming `resourceSpans`, or
/// one of exec's call lines, or any other JSON object: a log), a CSV header otherwise.
pub fn detect(path: &Path) -> Result<Format, ReadError> {
    let mut head = Vec::with_capacity(4096);
    open(path)?
        .take(4096)
        .read_to_end(&mut head)
        .map_err(|e| ReadError::new(path, None, e.to_string()))?;
    let text = String::from_utf8_lossy(&head);
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if trimmed.contains("\"resourceSpans\"") {
            return Ok(Format::OtlpJson);
        }
        if trimmed.contains(calls::MARKER) {
            return Ok(Format::Calls);
        }
        return Ok(Format::LogJsonl);
    }
    // Text has no NUL and is UTF-8; a protobuf message almost always has one or the other.
    if head.contains(&0) || std::str::from_utf8(&head).is_err_and(|e| e.error_len().is_some()) {
        return Ok(Format::OtlpProto);
    }
    Ok(Format::LogCsv)
}

/// Reads `path` (of the kind [`detect`] finds), handing each span to `sink`.
pub fn read(path: &Path, sink: &mut dyn FnMut(Span)) -> Result<FileRead, ReadError> {
    let format = detect(path)?;
    let reader = open(path)?;
    let size = reader.get_ref().metadata().map_or(0, |m| m.len());
    let (spans, skipped) = match format {
        Format::OtlpJson => otlp::read(path, reader, sink)?,
        Format::OtlpProto => otlp_proto::read(path, reader, size, sink)?,
        Format::Calls => calls::read(path, reader, sink)?,
        Format::LogCsv => logs::read_csv(path, reader, sink)?,
        Format::LogJsonl => logs::read_jsonl(path, reader, sink)?,
    };
    if spans == 0 {
        let why = skipped
            .iter()
            .next()
            .map(|(reason, n, at)| format!(": {n} skipped, {reason} (first at {at})"))
            .unwrap_or_default();
        return Err(ReadError::new(
            path,
            None,
            format!("no model or tool call could be read as {format}{why}"),
        ));
    }
    Ok(FileRead {
        path: path.to_path_buf(),
        format,
        spans,
        skipped,
    })
}

/// Each line of `reader` with its 1-based number (and the tally, to count what it skips); a line that is not UTF-8 is counted in
/// `skipped` and passed over. Stops at the first I/O error, as a [`ReadError`].
fn lines(
    path: &Path,
    mut reader: impl BufRead,
    skipped: &mut Tally,
    mut each: impl FnMut(&mut Tally, u64, &str) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| ReadError::new(path, Some(n + 1), e.to_string()))?;
        if got == 0 {
            return Ok(());
        }
        n += 1;
        match std::str::from_utf8(&buf) {
            Ok(line) => each(skipped, n, line.trim_end_matches(['\n', '\r']))?,
            Err(_) => skipped.add("a line that is not UTF-8", || place(path, n)),
        }
    }
}

/// `file:line`, for a [`Tally`].
fn place(path: &Path, line: u64) -> String {
    format!(
        "{}:{line}",
        path.file_name().unwrap_or_default().to_string_lossy()
    )
}
