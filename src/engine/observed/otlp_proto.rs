//! OTLP protobuf traces, decoded with the maintained `opentelemetry-proto` types: what the
//! OpenTelemetry Collector's file exporter writes with `format: proto` (each
//! `ExportTraceServiceRequest` after its length, 4 bytes big-endian), or one OTLP/HTTP protobuf
//! body saved to a file. Spans are read as the JSON form's are (`otlp.rs`).

use std::io::Read;
use std::path::Path;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;

use super::otlp::{build, Head, Val};
use super::{ReadError, Span, Tally};

/// The largest message read (a frame, or a whole file of one message).
pub const MAX_MESSAGE_BYTES: u64 = 256 << 20;

/// Reads `reader` (a file of `size` bytes): length-prefixed requests when its first four bytes
/// frame one that decodes, else the whole file as one request.
pub(super) fn read(
    path: &Path,
    mut reader: impl Read,
    size: u64,
    sink: &mut dyn FnMut(Span),
) -> Result<(u64, Tally), ReadError> {
    let fail = |m: String| ReadError::new(path, None, m);
    let io = |e: std::io::Error| ReadError::new(path, None, e.to_string());
    let mut skipped = Tally::default();
    let mut prefix = [0u8; 4];
    let got = read_full(&mut reader, &mut prefix).map_err(io)?;
    let first = u64::from(u32::from_be_bytes(prefix));
    let mut spans = 0;
    if got == 4 && first > 0 && first + 4 <= size && first <= MAX_MESSAGE_BYTES {
        let mut frame = vec![0u8; first as usize];
        let n = read_full(&mut reader, &mut frame).map_err(io)?;
        if n == frame.len() {
            if let Ok(request) = ExportTraceServiceRequest::decode(frame.as_slice()) {
                let mut index = 1u64;
                spans += spans_of(path, index, request, &mut skipped, sink);
                loop {
                    let got = read_full(&mut reader, &mut prefix).map_err(io)?;
                    if got == 0 {
                        return Ok((spans, skipped));
                    }
                    index += 1;
                    let at = || message_at(path, index);
                    let len = u64::from(u32::from_be_bytes(prefix));
                    if got < 4 || len > MAX_MESSAGE_BYTES {
                        skipped.add("a truncated or oversized message (the file was cut?)", at);
                        return Ok((spans, skipped));
                    }
                    frame.resize(len as usize, 0);
                    if read_full(&mut reader, &mut frame).map_err(io)? < frame.len() {
                        skipped.add("a truncated message (the file was cut mid-message?)", at);
                        return Ok((spans, skipped));
                    }
                    match ExportTraceServiceRequest::decode(frame.as_slice()) {
                        Ok(r) => spans += spans_of(path, index, r, &mut skipped, sink),
                        Err(_) => skipped.add("a message that is not an OTLP trace request", at),
                    }
                }
            }
        }
    }
    // One message: the whole file.
    if size > MAX_MESSAGE_BYTES {
        return Err(fail(format!(
            "is neither length-prefixed OTLP messages nor one message of at most {MAX_MESSAGE_BYTES} bytes"
        )));
    }
    let mut all = Vec::with_capacity(size as usize);
    all.extend_from_slice(&prefix[..got]);
    reader.read_to_end(&mut all).map_err(io)?;
    let request = ExportTraceServiceRequest::decode(all.as_slice()).map_err(|e| {
        fail(format!(
            "not OTLP protobuf traces (neither length-prefixed requests nor one request): {e}"
        ))
    })?;
    spans += spans_of(path, 1, request, &mut skipped, sink);
    Ok((spans, skipped))
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
