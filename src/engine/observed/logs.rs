//! Flat request logs, CSV or JSON lines: one model request a row, with a timestamp and what
//! else was logged. Column names are matched without case, spaces or underscores, so the public
//! traces' own headers are read as they are: Azure's LLM inference traces (`TIMESTAMP,
//! ContextTokens, GeneratedTokens`) and BurstGPT (`Timestamp, Model, Request tokens, Response
//! tokens, Total tokens, Log Type`, where 0 response tokens is a failed request).

use std::cell::Cell as Counter;
use std::io::{BufRead, Read};
use std::path::Path;
use std::rc::Rc;

use serde_json::Value;

use super::dates::date_time;
use super::{
    duration_ns, end_of, lines, place, BadTime, Kind, ReadError, Span, Tally, MAX_RECORD_BYTES,
};

/// A column capsize reads, and the names it goes by (normalized: lower case, no `_` or space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Time,
    Model,
    Provider,
    Input,
    Output,
    MaxTokens,
    LatencyMs,
    LatencyS,
    TtftMs,
    Status,
    Session,
}

const NAMES: [(&str, Column); 30] = [
    ("timestamp", Column::Time),
    ("time", Column::Time),
    ("ts", Column::Time),
    ("starttime", Column::Time),
    ("start", Column::Time),
    ("createdat", Column::Time),
    ("model", Column::Model),
    ("provider", Column::Provider),
    ("inputtokens", Column::Input),
    ("prompttokens", Column::Input),
    ("contexttokens", Column::Input),
    ("requesttokens", Column::Input),
    ("outputtokens", Column::Output),
    ("completiontokens", Column::Output),
    ("generatedtokens", Column::Output),
    ("responsetokens", Column::Output),
    ("maxtokens", Column::MaxTokens),
    ("latencyms", Column::LatencyMs),
    ("durationms", Column::LatencyMs),
    ("elapsedms", Column::LatencyMs),
    ("latency", Column::LatencyS),
    ("latencys", Column::LatencyS),
    ("durations", Column::LatencyS),
    ("ttftms", Column::TtftMs),
    ("status", Column::Status),
    ("statuscode", Column::Status),
    ("httpstatus", Column::Status),
    ("session", Column::Session),
    ("sessionid", Column::Session),
    ("conversationid", Column::Session),
];

/// The column names capsize knows, for an error about a log it cannot read.
const KNOWN: &str = "a timestamp (timestamp, time, ts, start_time, created_at) and any of model, \
provider, input_tokens (prompt_tokens, ContextTokens, Request tokens), output_tokens \
(completion_tokens, GeneratedTokens, Response tokens), max_tokens, latency_ms (duration_ms), \
latency_s, ttft_ms, status, session_id";

fn column(name: &str) -> Option<Column> {
    let norm: String = name
        .chars()
        .filter(|c| !matches!(c, '_' | ' ' | '-' | '\u{feff}'))
        .flat_map(char::to_lowercase)
        .collect();
    NAMES.iter().find(|(n, _)| *n == norm).map(|(_, c)| *c)
}

/// Whether `line` is a CSV log's header: it names a timestamp column.
pub(super) fn is_header(line: &str) -> bool {
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(line.as_bytes());
    let mut record = csv::StringRecord::new();
    matches!(csv.read_record(&mut record), Ok(true))
        && record.iter().any(|c| column(c) == Some(Column::Time))
}

/// Reads a CSV log with a header row.
pub(super) fn read_csv(
    path: &Path,
    reader: impl BufRead,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let read = Rc::new(Counter::new(0u64));
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(Metered {
            inner: reader,
            read: Rc::clone(&read),
        });
    let header = csv
        .headers()
        .map_err(|e| match e.kind() {
            csv::ErrorKind::Utf8 { .. } => ReadError::new(
                path,
                Some(1),
                "not UTF-8: a request log is read as UTF-8 text (its header row is not)",
            ),
            _ => ReadError::new(path, Some(1), format!("not a CSV log: {e}")),
        })?
        .clone();
    let columns: Vec<Option<Column>> = header.iter().map(column).collect();
    if !columns.contains(&Some(Column::Time)) {
        return Err(ReadError::new(
            path,
            Some(1),
            format!("a request log needs {KNOWN}; its header has none of the timestamp's names"),
        ));
    }
    let mut skipped = Tally::default();
    for (i, (name, c)) in header.iter().zip(&columns).enumerate() {
        if c.is_some() && columns[..i].contains(c) {
            skipped.add_example(
                "a column read twice (the same name, or two names of one quantity): the last one is read",
                || place(path, 1),
                || name.to_string(),
            );
        }
        if c.is_none() {
            skipped.add_example(
                "a column capsize does not read",
                || place(path, 1),
                || name.to_string(),
            );
        }
    }
    let mut spans = 0;
    let mut record = csv::StringRecord::new();
    loop {
        // The position is where the next record starts.
        let line = csv.position().line();
        match csv.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) => {
                skipped.add("a row that is not UTF-8", || place(path, line));
                continue;
            }
            Err(e) => return Err(ReadError::new(path, Some(line), e.to_string())),
        }
        read.set(0);
        let cells = columns
            .iter()
            .zip(record.iter())
            .filter_map(|(c, v)| Some((c.as_ref().copied()?, Cell::Text(v))));
        if let Some(s) = row(cells, &mut skipped, &|| place(path, line)) {
            spans += 1;
            sink(s);
        }
    }
    Ok((spans, skipped))
}

/// A reader that fails once more than [`MAX_RECORD_BYTES`] have been read since `read` was
/// last set to 0 (after each row): a row is held whole while it is parsed.
struct Metered<R> {
    inner: R,
    read: Rc<Counter<u64>>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read.get() > MAX_RECORD_BYTES {
            return Err(std::io::Error::other(format!(
                "a row of more than {MAX_RECORD_BYTES} bytes (256 MiB), the most capsize reads as one row"
            )));
        }
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Reads a JSON-lines log: one object a line.
pub(super) fn read_jsonl(
    path: &Path,
    reader: impl BufRead,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let mut skipped = Tally::default();
    let mut spans = 0;
    let mut timed = false;
    lines(path, reader, &mut skipped, |skipped, n, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) else {
            skipped.add("a line that is not a JSON object", || place(path, n));
            return Ok(());
        };
        let cells: Vec<(Column, Cell)> = map
            .iter()
            .filter_map(|(k, v)| Some((column(k)?, Cell::Json(v))))
            .collect();
        if !timed && !cells.iter().any(|(c, _)| *c == Column::Time) {
            return Err(ReadError::new(
                path,
                Some(n),
                format!("a request log needs {KNOWN}; this line has no timestamp"),
            ));
        }
        timed = true;
        if let Some(s) = row(cells.into_iter(), skipped, &|| place(path, n)) {
            spans += 1;
            sink(s);
        }
        Ok(())
    })?;
    Ok((spans, skipped))
}

/// A value in a row: CSV text or a JSON value.
enum Cell<'a> {
    Text(&'a str),
    Json(&'a Value),
}

impl Cell<'_> {
    fn text(&self) -> Option<String> {
        match self {
            Cell::Text(s) => (!s.is_empty()).then(|| s.to_string()),
            Cell::Json(Value::String(s)) => Some(s.clone()),
            Cell::Json(Value::Number(n)) => Some(n.to_string()),
            Cell::Json(_) => None,
        }
    }
    fn number(&self) -> Option<f64> {
        self.any_number().filter(|v| v.is_finite())
    }
    /// The cell as a number, NaN and infinities included (`None`: not a number at all).
    fn any_number(&self) -> Option<f64> {
        match self {
            Cell::Text(s) => s.parse().ok(),
            Cell::Json(Value::Number(n)) => n.as_f64(),
            Cell::Json(Value::String(s)) => s.trim().parse().ok(),
            Cell::Json(_) => None,
        }
    }
    /// Whether the cell holds nothing (an empty CSV cell, JSON `null`).
    fn is_empty(&self) -> bool {
        match self {
            Cell::Text(s) => s.is_empty(),
            Cell::Json(Value::Null) => true,
            Cell::Json(Value::String(s)) => s.trim().is_empty(),
            Cell::Json(_) => false,
        }
    }
    /// A time given in units of `ms` milliseconds, in ms: `None` when the cell is empty.
    fn time(&self, ms: f64) -> Result<Option<f64>, BadTime> {
        if self.is_empty() {
            return Ok(None);
        }
        let v = self.any_number().ok_or(BadTime::NotANumber)? * ms;
        duration_ns(v).map(|_| Some(v))
    }
    fn count(&self) -> Option<u64> {
        self.number()
            .filter(|v| *v >= 0.0 && v.fract() == 0.0 && *v < 1.8e19)
            .map(|v| v as u64)
    }
}

/// Why a row's latency cannot be used, as counted (the row is not read).
fn latency_reason(bad: BadTime) -> &'static str {
    match bad {
        BadTime::NotANumber => "a row whose latency is not a number (NaN, inf or text): not read",
        BadTime::Negative => "a row whose latency is negative: not read",
        BadTime::TooLarge => {
            "a row whose latency is too large (it would end past the year 2262): not read"
        }
    }
}

/// One row as a model request, or `None` (counted) when it has no usable time.
fn row<'a>(
    cells: impl Iterator<Item = (Column, Cell<'a>)>,
    skipped: &mut Tally,
    at: &dyn Fn() -> String,
) -> Option<Span> {
    let mut s = Span::new(
        Kind::Model {
            provider: String::new(),
            model: String::new(),
        },
        0,
    );
    let mut start = Err(String::new());
    let (mut provider, mut model) = (String::new(), String::new());
    let (mut latency_ms, mut ttft_ms) = (Ok(None), Ok(None));
    for (c, v) in cells {
        match c {
            Column::Time => start = timestamp(&v).ok_or_else(|| v.text().unwrap_or_default()),
            Column::Model => model = v.text().unwrap_or_default(),
            Column::Provider => provider = v.text().unwrap_or_default(),
            Column::Input => s.input_tokens = v.count(),
            Column::Output => s.output_tokens = v.count(),
            Column::MaxTokens => s.max_tokens = v.count(),
            Column::LatencyMs => latency_ms = v.time(1.0),
            Column::LatencyS => latency_ms = v.time(1e3),
            Column::TtftMs => ttft_ms = v.time(1.0),
            Column::Status => s.status = v.count().and_then(|x| u16::try_from(x).ok()),
            Column::Session => s.session = v.text(),
        }
    }
    let start = match start {
        Ok(start) => start,
        Err(text) => {
            skipped.add_example("a row whose timestamp cannot be read", at, || text);
            return None;
        }
    };
    s.start_ns = start;
    // A log row is one request as it was served.
    s.attempt = true;
    s.end_ns = match latency_ms.and_then(|l| l.map(|ms| end_of(start, ms)).transpose()) {
        Ok(end) => end,
        Err(bad) => {
            skipped.add(latency_reason(bad), at);
            return None;
        }
    };
    match ttft_ms.and_then(|t| t.map(duration_ns).transpose()) {
        Ok(first) => s.first_chunk_ns = first,
        Err(_) => skipped.add(
            "a time to first token that is negative, not a number or too large: the row is read without it",
            at,
        ),
    }
    // BurstGPT's convention: a request answered with no tokens failed.
    if s.status.is_none() && s.output_tokens == Some(0) {
        s.error = Some("no response tokens".into());
    }
    if let Some(st) = s.status.filter(|st| *st >= 400) {
        s.error = Some(format!("HTTP {st}"));
    }
    s.kind = Kind::Model { provider, model };
    Some(s)
}

/// A timestamp as nanoseconds since the epoch: a number (seconds, ms, µs or ns, told apart by
/// size; small numbers are seconds from the trace's start, as BurstGPT writes them) or a date
/// and time (`2023-11-16 18:15:46.6805900`, ISO 8601 with `T`, `Z` or an offset).
fn timestamp(v: &Cell) -> Option<i64> {
    if let Some(x) = v.number() {
        let ns = if x >= 1e17 {
            x
        } else if x >= 1e14 {
            x * 1e3
        } else if x >= 1e11 {
            x * 1e6
        } else {
            x * 1e9
        };
        return (0.0..9.2e18).contains(&ns).then_some(ns as i64);
    }
    date_time(&v.text()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(text: &str) -> Result<(Vec<Span>, Tally), ReadError> {
        let mut spans = Vec::new();
        let (n, t) = read_csv(Path::new("t.csv"), text.as_bytes(), &mut |s| spans.push(s))?;
        assert_eq!(n as usize, spans.len());
        Ok((spans, t))
    }

    #[test]
    fn a_latency_that_cannot_be_a_time_skips_its_row_with_a_reason_of_its_kind() {
        let (spans, t) = csv(
            "timestamp,model,latency_ms\n1700000000,gpt,-5\n1700000001,gpt,NaN\n1700000002,gpt,inf\n\
             1700000003,gpt,9e15\n1700000004,gpt,fast\n1700000005,gpt,500\n1700000006,gpt,\n",
        )
        .unwrap();
        let reasons: Vec<_> = t.iter().collect();
        assert_eq!(
            reasons,
            [
                ("a row whose latency is negative: not read", 1, "t.csv:2"),
                (
                    "a row whose latency is not a number (NaN, inf or text): not read",
                    3,
                    "t.csv:3"
                ),
                (
                    "a row whose latency is too large (it would end past the year 2262): not read",
                    1,
                    "t.csv:5"
                ),
            ]
        );
        // The good row and the row without a latency are read.
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].duration_ms(), Some(500.0));
        assert_eq!(spans[1].end_ns, None);
    }

    #[test]
    fn a_latency_that_would_end_past_the_last_nanosecond_is_too_large_not_wrapped() {
        // 9.2e18 ns is past i64::MAX from a start in 2262: the sum once wrapped.
        let (spans, t) =
            csv("timestamp,latency_ms\n9000000000000000000,3e11\n9000000000000000000,1\n").unwrap();
        assert_eq!(t.total(), 1);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].end_ns, Some(9_000_000_000_001_000_000));
    }

    #[test]
    fn an_unread_column_is_one_reason_with_its_name_as_the_example() {
        let mut text = String::from("timestamp");
        for i in 0..500 {
            text.push_str(&format!(",extra{i}"));
        }
        text.push_str("\n1700000000\n");
        let (_, t) = csv(&text).unwrap();
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [(
                "a column capsize does not read",
                500,
                "t.csv:1 (\"extra0\")"
            )]
        );
    }

    #[test]
    fn a_column_read_twice_is_said_and_the_last_one_read() {
        let (spans, t) = csv("timestamp,latency_ms,duration_ms\n1700000000,5,7\n").unwrap();
        assert_eq!(spans[0].duration_ms(), Some(7.0));
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [(
                "a column read twice (the same name, or two names of one quantity): the last one is read",
                1,
                "t.csv:1 (\"duration_ms\")"
            )]
        );
    }

    #[test]
    fn a_header_that_is_not_utf8_is_named_as_such() {
        let e = read_csv(
            Path::new("t.csv"),
            &b"timestamp,mod\xe9l\n1,2\n"[..],
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv:1: not UTF-8: a request log is read as UTF-8 text (its header row is not)"
        );
        // A row that is not is skipped, and said.
        let (spans, t) = csv_bytes(b"timestamp,model\n1700000000,gpt\xe9\n1700000001,gpt\n");
        assert_eq!(spans.len(), 1);
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [("a row that is not UTF-8", 1, "t.csv:2")]
        );
    }

    fn csv_bytes(bytes: &[u8]) -> (Vec<Span>, Tally) {
        let mut spans = Vec::new();
        let (_, t) = read_csv(Path::new("t.csv"), bytes, &mut |s| spans.push(s)).unwrap();
        (spans, t)
    }

    #[test]
    fn column_names_are_matched_as_the_public_traces_write_them() {
        assert_eq!(column("TIMESTAMP"), Some(Column::Time));
        assert_eq!(column("ContextTokens"), Some(Column::Input));
        assert_eq!(column("Response tokens"), Some(Column::Output));
        assert_eq!(column("Log Type"), None);
        assert_eq!(column("Total tokens"), None);
    }
}
