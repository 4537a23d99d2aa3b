//! `POST /v1/traces`: the OTLP/HTTP traces an instrumented agent exports, for the caller's
//! [`TraceSink`]. A body is read within the server's body limit; a `Content-Encoding` of `gzip`
//! or `deflate` (what `OTEL_EXPORTER_OTLP_COMPRESSION` makes the SDKs send) is undone, the
//! inflated bytes held to the same limit as they come, so a compressed bomb costs no more than
//! a plain body; any other encoding is answered 415. The sink then takes the export, or says
//! why it is not OTLP (answered 400, as a Collector answers), and hears of every export refused
//! before it (413, 415, 400), so that it can count them.

use std::io::Read;

use hyper::body::Incoming;
use hyper::HeaderMap;

use super::requests::{TraceExport, TraceSink};
use super::respond::{body_too_large, refuse, Reply};
use super::wire::Api;
use super::{read_body, BodyError};

/// The encodings a trace body may come in, as a `415`'s `accept-encoding` names them.
pub const TRACE_ENCODINGS: &str = "gzip, deflate";

/// How a body was encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// As it is (no `Content-Encoding`, or `identity`).
    Plain,
    /// `gzip` (or `x-gzip`): one or more gzip members.
    Gzip,
    /// `deflate`: a zlib stream, as HTTP means it.
    Deflate,
}

/// The body's encoding from its `Content-Encoding` headers; `Err` is the 415 message.
pub(crate) fn encoding(headers: &HeaderMap) -> Result<Encoding, String> {
    let mut codings = Vec::new();
    for value in headers.get_all(hyper::header::CONTENT_ENCODING) {
        let text = String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase();
        codings.extend(
            text.split(',')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty() && c != "identity"),
        );
    }
    match codings.as_slice() {
        [] => Ok(Encoding::Plain),
        [one] if one == "gzip" || one == "x-gzip" => Ok(Encoding::Gzip),
        [one] if one == "deflate" => Ok(Encoding::Deflate),
        [one] => Err(format!(
            "Content-Encoding '{}' is not supported: send {TRACE_ENCODINGS} or identity (capsize mock provider).",
            super::respond::clip(one)
        )),
        many => Err(format!(
            "Content-Encoding '{}': one encoding at most ({TRACE_ENCODINGS} or identity) (capsize mock provider).",
            super::respond::clip(&many.join(", "))
        )),
    }
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undo {
    /// It inflates past the limit.
    TooLarge,
    /// It is not in the encoding it names: the message.
    Bad(String),
}

/// `body` as it was before `encoding`, at most `max` bytes of it: inflating stops at the
/// first byte past the limit.
pub(crate) fn decode(body: &[u8], encoding: Encoding, max: usize) -> Result<Vec<u8>, Undo> {
    let inflate = |reader: &mut dyn Read, name: &str| {
        let mut out = Vec::new();
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        reader.take(limit).read_to_end(&mut out).map_err(|e| {
            Undo::Bad(format!(
                "Trace body is not valid {name}: {e} (capsize mock provider)."
            ))
        })?;
        if out.len() > max {
            return Err(Undo::TooLarge);
        }
        Ok(out)
    };
    match encoding {
        Encoding::Plain => Ok(body.to_vec()),
        Encoding::Gzip => inflate(&mut flate2::read::MultiGzDecoder::new(body), "gzip"),
        Encoding::Deflate => inflate(&mut flate2::read::ZlibDecoder::new(body), "deflate (zlib)"),
    }
}

/// The 413 for a body that inflates past the limit of `max` bytes.
fn inflates_too_far(max: usize) -> Reply {
    let message = format!(
        "Request body too large: inflates past the limit of {max} bytes (capsize mock provider)."
    );
    refuse(Api::OpenAi, 413, &message)
}

/// An export accepted: an empty `ExportTraceServiceResponse` in the body's own form.
fn accepted(json: bool) -> Reply {
    let mut ok = Reply::json(200, &serde_json::json!({}));
    if !json {
        ok.content_type = "application/x-protobuf";
        ok.body = Vec::new();
    }
    ok
}

/// Reads, decodes and hands one export to `sink`; the answer.
pub(crate) async fn export(
    sink: &TraceSink,
    headers: &HeaderMap,
    body: Incoming,
    max: usize,
) -> Reply {
    let json = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let refused = |reply: Reply, why: &str| {
        // What the sink answers to a refusal is of no use: the export is refused either way.
        let _ = (sink.0)(TraceExport::Refused {
            status: reply.status,
            why,
        });
        reply
    };
    let bytes = match read_body(body, max).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => {
            return refused(body_too_large(Api::OpenAi, max), "over the body limit")
        }
        Err(_) => {
            let message = "Trace body cut short or too slow.";
            return refused(refuse(Api::OpenAi, 400, message), message);
        }
    };
    // Read before it is refused, so that the client gets the answer rather than a reset.
    let encoding = match encoding(headers) {
        Ok(e) => e,
        Err(message) => {
            let reply =
                refuse(Api::OpenAi, 415, &message).header("accept-encoding", TRACE_ENCODINGS);
            return refused(reply, &message);
        }
    };
    let plain = match decode(&bytes, encoding, max) {
        Ok(plain) => plain,
        Err(Undo::TooLarge) => {
            return refused(inflates_too_far(max), "inflates past the body limit")
        }
        Err(Undo::Bad(message)) => return refused(refuse(Api::OpenAi, 400, &message), &message),
    };
    match (sink.0)(TraceExport::Body {
        bytes: &plain,
        json,
    }) {
        Ok(()) => accepted(json),
        // The sink has counted it: only the answer is left.
        Err(message) => refuse(Api::OpenAi, 400, &message),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(hyper::header::CONTENT_ENCODING, v.parse().unwrap());
        }
        h
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(bytes).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn the_encoding_is_read_from_every_header() {
        assert_eq!(encoding(&headers(&[])), Ok(Encoding::Plain));
        assert_eq!(encoding(&headers(&["identity"])), Ok(Encoding::Plain));
        assert_eq!(encoding(&headers(&[" GZIP "])), Ok(Encoding::Gzip));
        assert_eq!(
            encoding(&headers(&["identity, x-gzip"])),
            Ok(Encoding::Gzip)
        );
        assert_eq!(encoding(&headers(&["deflate"])), Ok(Encoding::Deflate));
        assert_eq!(
            encoding(&headers(&["br"])),
            Err("Content-Encoding 'br' is not supported: send gzip, deflate or identity (capsize mock provider).".into())
        );
        assert_eq!(
            encoding(&headers(&["gzip", "gzip"])),
            Err("Content-Encoding 'gzip, gzip': one encoding at most (gzip, deflate or identity) (capsize mock provider).".into())
        );
    }

    #[test]
    fn a_body_is_inflated_within_the_limit_and_no_further() {
        let body = b"abc".repeat(1000);
        assert_eq!(decode(&gzip(&body), Encoding::Gzip, 3000), Ok(body.clone()));
        // Two members are one body.
        let two = [gzip(b"ab"), gzip(b"cd")].concat();
        assert_eq!(decode(&two, Encoding::Gzip, 10), Ok(b"abcd".to_vec()));
        assert_eq!(
            decode(&gzip(&body), Encoding::Gzip, 2999),
            Err(Undo::TooLarge)
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&body).unwrap();
        assert_eq!(
            decode(&z.finish().unwrap(), Encoding::Deflate, 3000),
            Ok(body)
        );
        assert!(matches!(
            decode(b"\xff\xff garbage", Encoding::Gzip, 3000),
            Err(Undo::Bad(m)) if m.starts_with("Trace body is not valid gzip: ")
        ));
    }

    #[test]
    fn a_bomb_is_inflated_only_to_the_limit() {
        // 64 MiB of zeros, about 64 KiB compressed: stopped one byte past 1 MiB.
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            w.write_all(&zeros).unwrap();
        }
        let bomb = w.finish().unwrap();
        assert!(bomb.len() < 1 << 17, "{}", bomb.len());
        assert_eq!(decode(&bomb, Encoding::Gzip, 1 << 20), Err(Undo::TooLarge));
    }
}
