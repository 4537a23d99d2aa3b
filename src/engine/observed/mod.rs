//! What a user's own system was seen doing, read from the files they have: OpenTelemetry traces
//! (the Collector's OTLP JSON, [`otlp`], or protobuf, [`otlp_proto`]), `capsize exec`'s `calls.jsonl` ([`calls`]), and flat
//! request logs ([`logs`]). Each reader hands over one [`Span`] at a time, so memory does not
//! grow with the input; what it could not use is counted by reason in [`Tally`], never guessed.
//! `capsize calibrate` fits a scenario to what is read here.

pub mod calls;
mod dates;
pub mod logs;
pub mod otlp;
pub mod otlp_proto;
mod tally;

pub use tally::Tally;

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

    /// Cuts each name it holds (provider, model, tool, session, error) to [`MAX_NAME_CHARS`]
    /// characters; whether any was longer.
    fn cut_names(&mut self) -> bool {
        let mut cut = false;
        let mut one = |s: &mut String| {
            if let Some((at, _)) = s.char_indices().nth(MAX_NAME_CHARS) {
                s.truncate(at);
                cut = true;
            }
        };
        match &mut self.kind {
            Kind::Model { provider, model } => {
                one(provider);
                one(model);
            }
            Kind::Tool { name, provider } => {
                one(name);
                if let Some(p) = provider {
                    one(p);
                }
            }
            Kind::Agent | Kind::Http | Kind::Other => {}
        }
        if let Some(s) = &mut self.session {
            one(s);
        }
        if let Some(s) = &mut self.error {
            one(s);
        }
        cut
    }

    /// Its duration in ms, when it has an end at or after its start.
    pub fn duration_ms(&self) -> Option<f64> {
        let end = self.end_ns?;
        (end >= self.start_ns).then(|| (end - self.start_ns) as f64 / 1e6)
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
            message: one_line(&message.into(), MAX_MESSAGE_CHARS),
        }
    }
}

/// The most characters of a [`ReadError`]'s message (a parser's error may quote the input).
const MAX_MESSAGE_CHARS: usize = 300;

/// The most bytes read as one line, one JSON document or one protobuf message: a file is
/// streamed, but each of these is held whole while it is parsed.
pub const MAX_RECORD_BYTES: u64 = 256 << 20;

/// `text` on one line (each control character written as `\u{…}`), at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
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

/// Which kind of file `path` is, by its first 4 KiB: a JSON object naming `resourceSpans`, or
/// one of exec's call lines, or any other JSON object (a log); a CSV log when its first line is
/// a header naming a timestamp; protobuf when the bytes are binary (a NUL, or a control
/// character text does not hold); a CSV log otherwise. A stray byte that is not UTF-8 does
/// not make text binary: the text reader then says which line it is on.
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
    let first = head.split(|b| *b == b'\n').next().unwrap_or_default();
    if std::str::from_utf8(first).is_ok_and(logs::is_header) {
        return Ok(Format::LogCsv);
    }
    let binary = |b: &u8| matches!(b, 0..=8 | 0x0b | 0x0c | 0x0e..=0x1f | 0x7f);
    if head.iter().any(binary) {
        return Ok(Format::OtlpProto);
    }
    Ok(Format::LogCsv)
}

/// Refuses an input given twice: one file under two paths (the same device and inode), or
/// two files of the same bytes. Its spans would be read twice (a trace's are told apart by
/// their ids, a log's rows and exec's calls cannot be). A path that cannot be read is left to
/// [`read`] to report.
pub fn repeated(paths: &[PathBuf]) -> Result<(), ReadError> {
    let metas: Vec<Option<std::fs::Metadata>> = paths
        .iter()
        .map(|p| std::fs::metadata(p).ok().filter(|m| m.is_file()))
        .collect();
    for (j, b) in paths.iter().enumerate() {
        for (i, a) in paths[..j].iter().enumerate() {
            let (Some(ma), Some(mb)) = (&metas[i], &metas[j]) else {
                continue;
            };
            let same = if same_inode(ma, mb) {
                "the same file as"
            } else if ma.len() == mb.len() && same_bytes(a, b) {
                "the same bytes as"
            } else {
                continue;
            };
            return Err(ReadError::new(
                b,
                None,
                format!(
                    "{same} {} (an input given twice): give each input once",
                    a.display()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

/// Whether two files hold the same bytes (read side by side; `false` if either cannot be).
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (Ok(fa), Ok(fb)) = (open(a), open(b)) else {
        return false;
    };
    let (mut fa, mut fb) = (fa, fb);
    loop {
        let (Ok(x), Ok(y)) = (fa.fill_buf(), fb.fill_buf()) else {
            return false;
        };
        let n = x.len().min(y.len());
        if n == 0 {
            return x.is_empty() && y.is_empty();
        }
        if x[..n] != y[..n] {
            return false;
        }
        fa.consume(n);
        fb.consume(n);
    }
}

/// The most characters of a name read (a provider's, a model's, a tool's, a session's, an
/// error's): what is written and kept per name does not grow with a name's length.
pub const MAX_NAME_CHARS: usize = 256;

/// Reads `path` (of the kind [`detect`] finds), handing each span to `sink` (its names cut to
/// [`MAX_NAME_CHARS`]).
pub fn read(path: &Path, sink: &mut dyn FnMut(Span)) -> Result<FileRead, ReadError> {
    let format = detect(path)?;
    let reader = open(path)?;
    let size = reader.get_ref().metadata().map_or(0, |m| m.len());
    let mut cut = 0u64;
    let sink = &mut |mut s: Span| {
        cut += u64::from(s.cut_names());
        sink(s)
    };
    let (spans, mut skipped) = match format {
        Format::OtlpJson => otlp::read(path, reader, sink)?,
        Format::OtlpProto => otlp_proto::read(path, reader, size, sink)?,
        Format::Calls => calls::read(path, reader, sink)?,
        Format::LogCsv => logs::read_csv(path, reader, sink)?,
        Format::LogJsonl => logs::read_jsonl(path, reader, sink)?,
    };
    skipped.add_n(
        "a span or row with a name (provider, model, tool, session, error) longer than 256 characters: cut to 256",
        cut,
        || path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
    );
    if spans == 0 {
        let why = skipped
            .most()
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

/// A file's lines one at a time, each at most [`MAX_RECORD_BYTES`], numbered from 1.
pub(super) struct Lines<'p, R> {
    path: &'p Path,
    reader: R,
    buf: Vec<u8>,
    n: u64,
    cap: u64,
}

impl<'p, R: BufRead> Lines<'p, R> {
    pub(super) fn new(path: &'p Path, reader: R) -> Self {
        Lines {
            path,
            reader,
            buf: Vec::new(),
            n: 0,
            cap: MAX_RECORD_BYTES,
        }
    }

    /// Reads the next line (its bytes with their `\n`); its number, `None` at the end. A line
    /// longer than the cap, or an I/O error, is a [`ReadError`].
    pub(super) fn next(&mut self) -> Result<Option<u64>, ReadError> {
        self.buf.clear();
        let at = self.n + 1;
        let fail = |m: String| ReadError::new(self.path, Some(at), m);
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(fail(e.to_string())),
            };
            if avail.is_empty() {
                break;
            }
            let (take, done) = match avail.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            if (self.buf.len() + take) as u64 > self.cap {
                return Err(fail(format!(
                    "a line of more than {} bytes (256 MiB), the most capsize reads as one line \
                     or one document",
                    self.cap
                )));
            }
            self.buf.extend_from_slice(&avail[..take]);
            self.reader.consume(take);
            if done {
                break;
            }
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        self.n = at;
        Ok(Some(at))
    }

    /// The line read last, as text without its line ending (`None`: not UTF-8).
    pub(super) fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.buf)
            .ok()
            .map(|l| l.trim_end_matches(['\n', '\r']))
    }

    /// The line read last, its bytes as they are.
    pub(super) fn raw(&self) -> &[u8] {
        &self.buf
    }

    /// What is left of the input.
    pub(super) fn into_rest(self) -> R {
        self.reader
    }
}

/// Each line of `reader` with its 1-based number (and the tally, to count what it skips); a
/// line that is not UTF-8 is counted in `skipped` and passed over. Stops at the first I/O
/// error or a line over [`MAX_RECORD_BYTES`], as a [`ReadError`].
fn lines(
    path: &Path,
    reader: impl BufRead,
    skipped: &mut Tally,
    mut each: impl FnMut(&mut Tally, u64, &str) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    let mut lines = Lines::new(path, reader);
    while let Some(n) = lines.next()? {
        match lines.text() {
            Some(line) => each(skipped, n, line)?,
            None => skipped.add("a line that is not UTF-8", || place(path, n)),
        }
    }
    Ok(())
}

/// `file:line`, for a [`Tally`].
fn place(path: &Path, line: u64) -> String {
    format!(
        "{}:{line}",
        path.file_name().unwrap_or_default().to_string_lossy()
    )
}

/// Why a time an input gives (a latency, a time to first token) cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BadTime {
    /// NaN, infinite, or text that is not a number.
    NotANumber,
    /// Below zero.
    Negative,
    /// Past what nanoseconds since the epoch hold (the year 2262).
    TooLarge,
}

/// A duration in ms as nanoseconds, or why it cannot be one.
pub(super) fn duration_ns(ms: f64) -> Result<i64, BadTime> {
    if !ms.is_finite() {
        return Err(BadTime::NotANumber);
    }
    if ms < 0.0 {
        return Err(BadTime::Negative);
    }
    let ns = ms * 1e6;
    if ns >= 9.2e18 {
        return Err(BadTime::TooLarge);
    }
    Ok(ns as i64)
}

/// The end of a call that started at `start_ns` and took `ms`, or why it has none.
pub(super) fn end_of(start_ns: i64, ms: f64) -> Result<i64, BadTime> {
    start_ns
        .checked_add(duration_ns(ms)?)
        .ok_or(BadTime::TooLarge)
}

#[cfg(test)]
mod tests;
