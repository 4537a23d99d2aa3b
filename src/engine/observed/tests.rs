//! The readers on hostile files: detection, inputs given twice, the caps on one line and one
//! document, protobuf frame by frame.

use std::path::PathBuf;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span as PbSpan};
use prost::Message;

use super::*;

/// A fresh folder for one test, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d =
            std::env::temp_dir().join(format!("capsize-observed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn put(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One export request of `n` chat spans of trace `trace`.
fn request(trace: u8, n: u8) -> ExportTraceServiceRequest {
    let attr = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    };
    let spans = (1..=n)
        .map(|i| PbSpan {
            trace_id: vec![trace; 16],
            span_id: vec![i; 8],
            start_time_unix_nano: 1_700_000_000_000_000_000,
            end_time_unix_nano: 1_700_000_000_500_000_000,
            attributes: vec![attr("gen_ai.operation.name", "chat")],
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// A reason, its count, where first seen.
type Reason = (String, u64, String);

fn read_all(path: &Path) -> Result<(u64, Vec<Reason>), ReadError> {
    let r = read(path, &mut |_| {})?;
    let reasons = r
        .skipped
        .iter()
        .map(|(w, n, at)| (w.to_string(), n, at.to_string()))
        .collect();
    Ok((r.spans, reasons))
}

#[test]
fn a_bad_first_frame_costs_only_itself() {
    let d = Dir::new("frame1");
    let mut bytes = frame(b"\x00\x00garbage that is no message");
    bytes.extend(frame(&request(1, 3).encode_to_vec()));
    bytes.extend(frame(&request(2, 2).encode_to_vec()));
    let p = d.put("t.otlp", &bytes);
    assert_eq!(detect(&p), Ok(Format::OtlpProto));
    let (spans, reasons) = read_all(&p).unwrap();
    assert_eq!(spans, 5);
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0]
            .0
            .starts_with("a message that is not an OTLP trace request"),
        "{reasons:?}"
    );
    assert_eq!(reasons[0].1, 1);
    assert!(
        reasons[0].2.starts_with("t.otlp message 1 (\""),
        "{reasons:?}"
    );
}

#[test]
fn a_string_that_is_not_utf8_in_a_frame_is_named_by_the_decoder() {
    let d = Dir::new("utf8");
    let mut body = request(1, 1).encode_to_vec();
    // "chat" → "ch\xffat" keeps the length: a string that is not UTF-8.
    let at = body.windows(4).position(|w| w == b"chat").unwrap();
    body[at + 2] = 0xff;
    let mut bytes = frame(&body);
    bytes.extend(frame(&request(2, 1).encode_to_vec()));
    let p = d.put("t.otlp", &bytes);
    let (spans, reasons) = read_all(&p).unwrap();
    assert_eq!(spans, 1);
    assert_eq!(
        reasons[0].2,
        "t.otlp message 1 (\"invalid string value: data is not UTF-8 encoded\")"
    );
}

#[test]
fn empty_frames_are_said_to_be_empty() {
    let d = Dir::new("empty");
    let p = d.put("t.otlp", &[0u8; 20]);
    let e = read_all(&p).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: no model or tool call could be read as OTLP protobuf traces: 5 skipped, an empty \
             message (a length prefix of 0) (first at t.otlp message 1)",
            p.display()
        )
    );
}

#[test]
fn one_message_and_a_cut_framed_file_are_read_as_they_are() {
    let d = Dir::new("one");
    let p = d.put("one.pb", &request(1, 4).encode_to_vec());
    assert_eq!(read_all(&p).unwrap(), (4, vec![]));
    let mut bytes = frame(&request(1, 2).encode_to_vec());
    let second = frame(&request(2, 2).encode_to_vec());
    bytes.extend(&second[..second.len() - 3]);
    let p = d.put("cut.otlp", &bytes);
    let (spans, reasons) = read_all(&p).unwrap();
    assert_eq!(spans, 2);
    assert_eq!(
        reasons,
        [(
            "a message cut short (the file ends inside it)".to_string(),
            1,
            "cut.otlp message 2".to_string()
        )]
    );
    // Neither framed nor one message: both said.
    let p = d.put("junk.bin", b"\x7f\x01\x02\x03\x04 not protobuf at all");
    let e = read_all(&p).unwrap_err().to_string();
    assert!(
        e.contains("neither length-prefixed requests (the first length prefix says"),
        "{e}"
    );
    assert!(e.contains("nor one request ("), "{e}");
}

#[test]
fn text_with_a_stray_latin1_byte_is_text_not_protobuf() {
    let d = Dir::new("latin1");
    let p = d.put(
        "l.csv",
        b"timestamp,model,latency_ms\n1700000000,gpt\xe9,500\n1700000001,gpt,500\n",
    );
    assert_eq!(detect(&p), Ok(Format::LogCsv));
    let (spans, reasons) = read_all(&p).unwrap();
    assert_eq!(spans, 1);
    assert_eq!(
        reasons,
        [(
            "a row that is not UTF-8".to_string(),
            1,
            "l.csv:2".to_string()
        )]
    );
    // A header that is not UTF-8 is named as such.
    let p = d.put("h.csv", b"timestamp,mod\xe9l\n1700000000,gpt\n");
    assert_eq!(detect(&p), Ok(Format::LogCsv));
    let e = read_all(&p).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "h.csv:1: not UTF-8: a request log is read as UTF-8 text (its header row is not)"
        ),
        "{e}"
    );
    // A header naming a timestamp is a CSV log, an ESC in a row notwithstanding.
    let p = d.put("esc.csv", b"timestamp,model\n1700000000,g\x1bpt\n");
    assert_eq!(detect(&p), Ok(Format::LogCsv));
}

#[test]
fn a_cut_document_is_truncated_and_one_too_large_is_refused_naming_the_cap() {
    let d = Dir::new("doc");
    let doc = "{\n  \"resourceSpans\": [{\"scopeSpans\": [{\"spans\": [{\"traceId\": \"0000000000000000000000000000000a\", \"name\": \"some";
    let p = d.put("cut.json", doc.as_bytes());
    let e = read_all(&p).unwrap_err().to_string();
    assert!(
        e.ends_with("truncated: the file ends inside its JSON document"),
        "{e}"
    );
    let mut lines = Lines::new(&p, &b"short\nthis line is longer than ten\n"[..]);
    lines.cap = 10;
    assert_eq!(lines.next(), Ok(Some(1)));
    assert_eq!(lines.text(), Some("short"));
    let e = lines.next().unwrap_err();
    assert_eq!(e.at, Some(2));
    assert!(e.message.starts_with("a line of more than 10 bytes"), "{e}");
}

#[test]
fn an_input_given_twice_is_found_by_inode_or_by_bytes() {
    let d = Dir::new("twice");
    let a = d.put("a.jsonl", b"{\"resourceSpans\": []}\n");
    let b = d.put("b.jsonl", b"{\"resourceSpans\": []}\n");
    let c = d.put("c.jsonl", b"{\"resourceSpans\": [ ]}\n");
    let dotted = d.0.join(".").join("a.jsonl");
    let e = repeated(&[a.clone(), dotted.clone()]).unwrap_err();
    assert_eq!(e.path, dotted);
    assert!(e.message.starts_with("the same file as "), "{e}");
    let e = repeated(&[a.clone(), c.clone(), b.clone()]).unwrap_err();
    assert_eq!(e.path, b);
    assert!(e.message.starts_with("the same bytes as "), "{e}");
    assert_eq!(repeated(&[a, c, d.0.join("missing")]), Ok(()));
}

#[test]
fn a_message_quoting_the_input_is_one_short_line() {
    let e = ReadError::new(
        Path::new("f"),
        None,
        format!("bad \"{}\"\nnext", "x".repeat(1000)),
    );
    assert_eq!(e.message.chars().count(), MAX_MESSAGE_CHARS + 1);
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn calls_of_another_version_or_with_a_latency_that_is_no_time_are_skipped_by_kind() {
    let d = Dir::new("calls");
    let line = |v: u32, latency: &str| {
        format!(
            "{{\"capsize_call\":{v},\"unix_ns\":1700000000000000000,\"provider\":\"llm\",\"route\":\"model\",\"status\":200,\"latency_ms\":{latency}}}\n"
        )
    };
    let text = [
        line(2, "5"),
        line(1, "-5"),
        line(1, "1e300"),
        line(1, "500"),
    ]
    .concat();
    let p = d.put("calls.jsonl", text.as_bytes());
    assert_eq!(detect(&p), Ok(Format::Calls));
    let (spans, reasons) = read_all(&p).unwrap();
    assert_eq!(spans, 1);
    let reasons: Vec<(&str, u64, &str)> = reasons
        .iter()
        .map(|(w, n, at)| (w.as_str(), *n, at.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("a call whose latency_ms is negative: not read", 1, "calls.jsonl:2"),
            ("a call whose latency_ms is too large (it would end past the year 2262): not read", 1, "calls.jsonl:3"),
            ("a line of another version of exec's calls (capsize_call is not 1): this capsize reads version 1", 1, "calls.jsonl:1 (\"2\")"),
        ]
    );
}

#[test]
fn a_name_past_256_characters_is_cut_and_counted() {
    let d = Dir::new("long");
    let long = "\u{e9}".repeat(300);
    let p = d.put(
        "l.csv",
        format!("timestamp,model\n1700000000,{long}\n1700000001,gpt\n").as_bytes(),
    );
    let mut models = Vec::new();
    let r = read(&p, &mut |s| {
        if let Kind::Model { model, .. } = s.kind {
            models.push(model.chars().count());
        }
    })
    .unwrap();
    assert_eq!(models, [256, 3]);
    assert_eq!(r.skipped.most().map(|(_, n, _)| n), Some(1));
}
