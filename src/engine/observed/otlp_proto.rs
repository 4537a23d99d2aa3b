//! OTLP protobuf traces, decoded with the maintained `opentelemetry-proto` types: what the
//! OpenTelemetry Collector's file exporter writes with `format: proto` (each
//! `ExportTraceServiceRequest` after its length, 4 bytes big-endian), or one OTLP/HTTP protobuf
//! body saved to a file. Spans are read as the JSON form's are (`otlp.rs`).

use std::io::{BufReader, Read, Seek};
use std::path::Path;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;

use super::otlp::{build, Head, Val};
use super::{ReadError, Span, Tally, MAX_RECORD_BYTES};

/// The largest message read (a frame, or a whole file of one message).
pub const MAX_MESSAGE_BYTES: u64 = MAX_RECORD_BYTES;

/// What a file's length prefixes say, followed from one to the next without reading the
/// messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Walk {
    /// Whole frames (a prefix and as many bytes as it says).
    frames: u64,
    /// Whether the last frame ends where the file does.
    exact: bool,
    /// The first prefix, where the file has four bytes.
    first: Option<u64>,
}

/// Reads `reader` (a file of `size` bytes): length-prefixed requests, frame by frame, when the
/// prefixes follow one another to the end of the file (a frame that does not decode costs only
/// itself, counted); else the whole file as one request; else the frames up to where the file
/// was cut.
pub(super) fn read<R: Read + Seek>(
    path: &Path,
    mut reader: BufReader<R>,
    size: u64,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let io = |e: std::io::Error| ReadError::new(path, None, e.to_string());
    let walk = walk(&mut reader, size).map_err(io)?;
    if walk.frames > 0 && walk.exact {
        reader.rewind().map_err(io)?;
        let framed = framed(path, &mut reader, size, sink)?;
        // No frame decoded: one message whose bytes happen to chain as prefixes, perhaps.
        if framed.2 > 0 || size > MAX_MESSAGE_BYTES {
            return Ok((framed.0, framed.1));
        }
        reader.rewind().map_err(io)?;
        return Ok(match one(path, &mut reader, size, sink) {
            Ok(Ok(read)) => read,
            _ => (framed.0, framed.1),
        });
    }
    reader.rewind().map_err(io)?;
    let whole = one(path, &mut reader, size, sink).map_err(io)?;
    let e = match whole {
        Ok(read) => return Ok(read),
        Err(e) => e,
    };
    if walk.frames > 0 {
        // Frames, then a cut: each frame up to the cut.
        reader.rewind().map_err(io)?;
        let (spans, skipped, _) = framed(path, &mut reader, size, sink)?;
        return Ok((spans, skipped));
    }
    let why = match walk.first {
        None => "the file is shorter than one length prefix".to_string(),
        Some(n) => format!("the first length prefix says {n} bytes, past the end of the file"),
    };
    Err(ReadError::new(
        path,
        None,
        format!("not OTLP protobuf traces: neither length-prefixed requests ({why}) nor one request ({e})"),
    ))
}

/// Follows the length prefixes from the start of the file.
fn walk<R: Read + Seek>(reader: &mut BufReader<R>, size: u64) -> std::io::Result<Walk> {
    let mut walk = Walk {
        frames: 0,
        exact: false,
        first: None,
    };
    let mut pos = 0u64;
    loop {
        if pos == size {
            walk.exact = true;
            return Ok(walk);
        }
        let mut prefix = [0u8; 4];
        if read_full(reader, &mut prefix)? < 4 {
            return Ok(walk);
        }
        let len = u64::from(u32::from_be_bytes(prefix));
        walk.first.get_or_insert(len);
        if pos + 4 + len > size {
            return Ok(walk);
        }
        reader.seek_relative(len as i64)?;
        pos += 4 + len;
        walk.frames += 1;
    }
}

/// The file as one request: `Ok(Err(why))` when it does not decode as one.
fn one<R: Read>(
    path: &Path,
    reader: &mut BufReader<R>,
    size: u64,
    sink: &mut dyn FnMut(Span),
) -> std::io::Result<Result<(u64, Tally), String>> {
    if size > MAX_MESSAGE_BYTES {
        return Ok(Err(format!(
            "one message is at most {MAX_MESSAGE_BYTES} bytes (256 MiB), the file is {size}"
        )));
    }
    let mut all = Vec::with_capacity(size as usize);
    reader.take(MAX_MESSAGE_BYTES + 1).read_to_end(&mut all)?;
    Ok(match ExportTraceServiceRequest::decode(all.as_slice()) {
        Ok(request) => {
            let mut skipped = Tally::default();
            let spans = spans_of(path, 1, request, &mut skipped, sink);
            Ok((spans, skipped))
        }
        Err(e) => Err(e.to_string()),
    })
}

/// Reads the frames one by one: spans handed over, what was skipped, frames decoded.
fn framed<R: Read + Seek>(
    path: &Path,
    reader: &mut BufReader<R>,
    size: u64,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally, u64), ReadError> {
    let io = |e: std::io::Error| ReadError::new(path, None, e.to_string());
    let (mut spans, mut decoded, mut skipped) = (0u64, 0u64, Tally::default());
    let (mut pos, mut index) = (0u64, 0u64);
    let mut frame = Vec::new();
    let mut prefix = [0u8; 4];
    loop {
        let got = read_full(reader, &mut prefix).map_err(io)?;
        if got == 0 {
            break;
        }
        index += 1;
        let at = || message_at(path, index);
        let len = u64::from(u32::from_be_bytes(prefix));
        if got < 4 || pos + 4 + len > size {
            skipped.add("a message cut short (the file ends inside it)", at);
            break;
        }
        pos += 4 + len;
        if len > MAX_MESSAGE_BYTES {
            skipped.add("a message of more than 256 MiB: not read", at);
            reader.seek_relative(len as i64).map_err(io)?;
            continue;
        }
        if len == 0 {
            skipped.add("an empty message (a length prefix of 0)", at);
            continue;
        }
        frame.resize(len as usize, 0);
        if read_full(reader, &mut frame).map_err(io)? < frame.len() {
            skipped.add("a message cut short (the file ends inside it)", at);
            break;
        }
        match ExportTraceServiceRequest::decode(frame.as_slice()) {
            Ok(r) => {
                decoded += 1;
                spans += spans_of(path, index, r, &mut skipped, sink);
            }
            Err(e) => skipped.add_example(
                "a message that is not an OTLP trace request (the decoder's error as the example)",
                at,
                || decode_error(&e),
            ),
        }
    }
    Ok((spans, skipped, decoded))
}

/// The decoder's error without its field path (`Span.attributes: KeyValue.value: …`): what
/// was wrong ("invalid string value: data is not UTF-8 encoded").
fn decode_error(e: &prost::DecodeError) -> String {
    let text = e.to_string();
    let parts: Vec<&str> = text
        .split(": ")
        .filter(|p| *p != "failed to decode Protobuf message")
        .filter(|p| p.contains(' ') || !p.contains('.'))
        .collect();
    parts.join(": ")
}

/// `file message N`, for a [`Tally`].
fn message_at(path: &Path, index: u64) -> String {
    format!(
        "{} message {index}",
        path.file_name().unwrap_or_default().to_string_lossy()
    )
}

/// Reads until `buf` is full or the input ends; how many bytes were read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn spans_of(
    path: &Path,
    index: u64,
    request: ExportTraceServiceRequest,
    skipped: &mut Tally,
    sink: &mut dyn FnMut(Span),
) -> u64 {
    let at = || message_at(path, index);
    let mut count = 0;
    for span in request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
    {
        let failed = span
            .status
            .as_ref()
            .filter(|st| st.code == 2)
            .map(|st| st.message.as_str());
        let head = Head {
            trace: <[u8; 16]>::try_from(span.trace_id.as_slice())
                .ok()
                .map(u128::from_be_bytes),
            id: <[u8; 8]>::try_from(span.span_id.as_slice())
                .ok()
                .map(u64::from_be_bytes),
            parent: <[u8; 8]>::try_from(span.parent_span_id.as_slice())
                .map(u64::from_be_bytes)
                .unwrap_or(0),
            start: i64::try_from(span.start_time_unix_nano).ok(),
            end: i64::try_from(span.end_time_unix_nano).ok(),
            failed,
        };
        let attrs = span.attributes.iter().map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Any::StringValue(s)) => Val::Str(s),
                Some(Any::IntValue(i)) => Val::Int(*i),
                Some(Any::DoubleValue(d)) => Val::Double(*d),
                Some(Any::BoolValue(b)) => Val::Bool(*b),
                _ => Val::Other,
            };
            (kv.key.as_str(), v)
        });
        if let Some(s) = build(head, attrs, skipped, &at) {
            count += 1;
            sink(s);
        }
    }
    count
}
