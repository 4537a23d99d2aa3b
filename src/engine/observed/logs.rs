//! Flat request logs, CSV or JSON lines: one model request a row, with a timestamp and what
//! else was logged. Column names are matched without case, spaces or underscores, so the public
//! traces' own headers are read as they are: Azure's LLM inference traces (`TIMESTAMP,
//! ContextTokens, GeneratedTokens`) and BurstGPT (`Timestamp, Model, Request tokens, Response
//! tokens, Total tokens, Log Type`, where 0 response tokens is a failed request).

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

use super::{lines, place, Kind, ReadError, Span, Tally};

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

/// Reads a CSV log with a header row.
pub(super) fn read_csv(
    path: &Path,
    reader: impl BufRead,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(reader);
    let header = csv
        .headers()
        .map_err(|e| ReadError::new(path, Some(1), format!("not a CSV log: {e}")))?
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
    for (name, c) in header.iter().zip(&columns) {
        if c.is_none() {
            skipped.add(format!("column \"{name}\" is not read"), || place(path, 1));
        }
    }
    let mut spans = 0;
    let mut record = csv::StringRecord::new();
    loop {
        let line = csv.position().line() + 1;
        match csv.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) => {
                skipped.add("a row that is not UTF-8", || place(path, line));
                continue;
            }
            Err(e) => return Err(ReadError::new(path, Some(line), e.to_string())),
        }
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
        let v = match self {
            Cell::Text(s) => s.parse().ok()?,
            Cell::Json(Value::Number(n)) => n.as_f64()?,
            Cell::Json(Value::String(s)) => s.trim().parse().ok()?,
            Cell::Json(_) => return None,
        };
        v.is_finite().then_some(v)
    }
    fn count(&self) -> Option<u64> {
        self.number()
            .filter(|v| *v >= 0.0 && v.fract() == 0.0)
            .map(|v| v as u64)
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
    let mut start = None;
    let (mut provider, mut model) = (String::new(), String::new());
    let mut latency_ms = None;
    for (c, v) in cells {
        match c {
            Column::Time => start = timestamp(&v),
            Column::Model => model = v.text().unwrap_or_default(),
            Column::Provider => provider = v.text().unwrap_or_default(),
            Column::Input => s.input_tokens = v.count(),
            Column::Output => s.output_tokens = v.count(),
            Column::MaxTokens => s.max_tokens = v.count(),
            Column::LatencyMs => latency_ms = v.number().filter(|x| *x >= 0.0),
            Column::LatencyS => latency_ms = v.number().filter(|x| *x >= 0.0).map(|x| x * 1e3),
            Column::TtftMs => {
                s.first_chunk_ns = v.number().filter(|x| *x >= 0.0).map(|x| (x * 1e6) as i64)
            }
            Column::Status => s.status = v.count().and_then(|x| u16::try_from(x).ok()),
            Column::Session => s.session = v.text(),
        }
    }
    let Some(start) = start else {
        skipped.add("a row whose timestamp cannot be read", at);
        return None;
    };
    s.start_ns = start;
    // A log row is one request as it was served.
    s.attempt = true;
    s.end_ns = latency_ms.map(|ms| start + (ms * 1e6) as i64);
    // BurstGPT's convention: a request answered with no tokens failed.
    if s.status.is_none() && s.output_tokens == Some(0) {
        s.error = Some("no response tokens".into());
    }
    if s.status.is_some_and(|st| st >= 400) {
        s.error = Some(format!("HTTP {}", s.status.unwrap_or_default()));
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

/// `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|±HH:MM]` as nanoseconds since the epoch (UTC).
pub fn date_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac_ns = 0i64;
    if let Some(f) = rest.strip_prefix('.') {
        let digits: String = f.chars().take_while(char::is_ascii_digit).collect();
        rest = &f[digits.len()..];
        let padded: String = digits.chars().chain("000000000".chars()).take(9).collect();
        frac_ns = padded.parse().ok()?;
    }
    let offset_s = match rest {
        "" | "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (o[1..3].parse::<i64>().ok()? * 3600 + o[4..6].parse::<i64>().ok()? * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_as_the_azure_trace_and_iso_write_them() {
        assert_eq!(date_time("1970-01-01 00:00:00"), Some(0));
        assert_eq!(
            date_time("2023-11-16 18:15:46.6805900"),
            Some(1_700_158_546_680_590_000)
        );
        assert_eq!(
            date_time("2023-11-16T19:15:46+01:00"),
            Some(1_700_158_546_000_000_000)
        );
        assert_eq!(date_time("2023-13-01 00:00:00"), None);
        assert_eq!(date_time("yesterday"), None);
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
