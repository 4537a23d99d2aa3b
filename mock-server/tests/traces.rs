//! `POST /v1/traces` with a trace sink: a gzip or deflate body handed to the sink inflated, an
//! encoding the server does not read answered 415, a body that is not in its encoding 400, one
//! that inflates past the body limit 413 (a bomb costs no more than a plain body), a body the
//! sink refuses 400 with the sink's reason; every refusal before the sink is told to it.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use capsize_mock::server::{TraceExport, TraceSink};
use capsize_mock::{MockProvider, RawProvider, ServerConfig};

/// What the sink was handed: `Body(text, json)` or `Refused(status, why)`.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Body(String, bool),
    Refused(u16, String),
}

/// A server whose sink keeps what it is handed, refusing a body that starts with `bad`; its
/// body limit is `max` bytes.
async fn start(max: usize) -> (MockProvider, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let sink = TraceSink(Arc::new(move |e: TraceExport<'_>| {
        let mut kept = kept.lock().unwrap();
        match e {
            TraceExport::Body { bytes, .. } if bytes.starts_with(b"bad") => {
                return Err("not OTLP, says the sink".into())
            }
            TraceExport::Body { bytes, json } => kept.push(Seen::Body(
                String::from_utf8_lossy(bytes).into_owned(),
                json,
            )),
            TraceExport::Refused { status, why } => kept.push(Seen::Refused(status, why.into())),
        }
        Ok(())
    }));
    let raw: RawProvider = toml::from_str("latency = { dist = \"constant\", ms = 0 }").unwrap();
    let config = ServerConfig {
        provider: raw.build(std::path::Path::new(".")).unwrap(),
        seed: 1,
        time_scale: 1.0,
        latencies: Default::default(),
        error_rates: Default::default(),
        max_body_bytes: max,
        request_log: None,
        trace_sink: Some(sink),
    };
    let m = MockProvider::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (m, seen)
}

/// POSTs `body` to /v1/traces as protobuf with `content-encoding: encoding` (none if empty):
/// the status, `accept-encoding` and the body.
async fn post(m: &MockProvider, body: Vec<u8>, encoding: &str) -> (u16, String, String) {
    let mut r = common::client()
        .post(format!("{}/v1/traces", m.uri()))
        .header("content-type", "application/x-protobuf")
        .body(body);
    if !encoding.is_empty() {
        r = r.header("content-encoding", encoding);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let accept = r
        .headers()
        .get("accept-encoding")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, accept, r.text().await.unwrap())
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    w.write_all(bytes).unwrap();
    w.finish().unwrap()
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    w.write_all(bytes).unwrap();
    w.finish().unwrap()
}

#[tokio::test]
async fn encoded_bodies_are_inflated_for_the_sink_within_the_limit() {
    let (m, seen) = start(4096).await;
    let body = b"spans ".repeat(500); // 3,000 bytes
    assert_eq!(post(&m, gzip(&body), "gzip").await.0, 200);
    assert_eq!(post(&m, zlib(&body), "deflate").await.0, 200);
    assert_eq!(post(&m, body.clone(), "identity").await.0, 200);
    // A bomb: 64 MiB of zeros in about 64 KiB, over the 4 KiB limit only once inflated.
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    for _ in 0..64 {
        w.write_all(&vec![0u8; 1 << 20]).unwrap();
    }
    let bomb = w.finish().unwrap();
    // Its first 4,000 bytes fit the limit, and inflate past it: 413, having inflated 4 KiB.
    let (status, _, text) = post(&m, bomb[..4000].to_vec(), "gzip").await;
    assert_eq!(status, 413);
    assert!(
        text.contains("inflates past the limit of 4096 bytes"),
        "{text}"
    );
    let (status, _, text) = post(&m, b"\x1f\x8b\x08 not gzip".to_vec(), "gzip").await;
    assert_eq!(status, 400, "{text}");
    let (status, accept, text) = post(&m, gzip(&body), "br").await;
    assert_eq!((status, accept.as_str()), (415, "gzip, deflate"), "{text}");
    assert!(
        text.contains("Content-Encoding 'br' is not supported: send gzip, deflate or identity"),
        "{text}"
    );
    let (status, _, text) = post(&m, gzip(b"bad body"), "gzip").await;
    assert_eq!(status, 400);
    assert!(text.contains("not OTLP, says the sink"), "{text}");
    assert_eq!(post(&m, vec![1; 5000], "").await.0, 413);
    let seen = seen.lock().unwrap().clone();
    let body = String::from_utf8(body).unwrap();
    assert_eq!(
        seen,
        [
            Seen::Body(body.clone(), false),
            Seen::Body(body.clone(), false),
            Seen::Body(body, false),
            Seen::Refused(413, "inflates past the body limit".into()),
            Seen::Refused(
                400,
                "Trace body is not valid gzip: invalid gzip header (capsize mock provider)."
                    .into()
            ),
            Seen::Refused(
                415,
                "Content-Encoding 'br' is not supported: send gzip, deflate or identity (capsize mock provider)."
                    .into()
            ),
            Seen::Refused(413, "over the body limit".into()),
        ]
    );
}
