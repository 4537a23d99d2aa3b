//! What `capsize exec` records for `capsize calibrate`: every request the mock saw, as
//! `calls.jsonl` lines (the form `engine::observed::calls` reads), and the OTLP traces the agent
//! exported to the mock (`OTEL_EXPORTER_OTLP_ENDPOINT`), protobuf as the Collector's file
//! exporter writes it (each request after its length) and JSON one request a line. Only an
//! export that decodes as an OTLP `ExportTraceServiceRequest` is kept: any other is answered
//! 400 (as a Collector answers) and counted, with those the mock refused before (413, 415), so
//! that one bad body never spoils the file. Written as the run goes to files in a folder of
//! their own, so memory does not grow with the run; the folder goes when the [`Recorded`] is
//! dropped.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use capsize_mock::server::{RequestLog, RequestRecord, TraceExport, TraceSink};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::engine::observed::calls::CallLine;

/// The files: the calls, the protobuf traces, the JSON traces.
pub const CALLS: &str = "calls.jsonl";
/// Protobuf traces.
pub const TRACES_PROTO: &str = "traces.otlp";
/// JSON traces.
pub const TRACES_JSON: &str = "traces.jsonl";

#[derive(Debug)]
struct Files {
    /// The folder, removed with the files unless a [`Recorded`] took it over.
    dir: PathBuf,
    kept: bool,
    calls: BufWriter<File>,
    proto: Option<BufWriter<File>>,
    json: Option<BufWriter<File>>,
    counts: Counts,
    /// Why the first export refused was refused.
    first_refusal: Option<String>,
    error: Option<String>,
}

/// How much was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests the mock saw (lines of `calls.jsonl`).
    pub calls: u64,
    /// OTLP export requests the agent sent that were kept.
    pub trace_requests: u64,
    /// Export requests refused: not OTLP (400), too large (413), in an encoding the mock does
    /// not read (415), cut short.
    pub trace_refused: u64,
    /// Requests that carried a W3C `traceparent`: the agent is instrumented.
    pub traced_calls: u64,
}

/// The recording as it is made; hands the mock its request log and trace sink.
#[derive(Debug, Clone)]
pub struct Recorder {
    dir: PathBuf,
    files: Arc<Mutex<Files>>,
}

impl Recorder {
    /// A recording in a fresh folder under the system's temporary folder.
    pub fn start() -> std::io::Result<Recorder> {
        let dir = std::env::temp_dir().join(format!("capsize-exec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let calls = BufWriter::new(File::create(dir.join(CALLS))?);
        Ok(Recorder {
            dir: dir.clone(),
            files: Arc::new(Mutex::new(Files {
                dir: dir.clone(),
                kept: false,
                calls,
                proto: None,
                json: None,
                counts: Counts::default(),
                first_refusal: None,
                error: None,
            })),
        })
    }

    fn with(&self, f: impl FnOnce(&mut Files) -> std::io::Result<()>) {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if files.error.is_none() {
            if let Err(e) = f(&mut files) {
                files.error = Some(e.to_string());
            }
        }
    }

    /// The mock's request log: each request a line, its provider named `provider`.
    pub fn request_log(&self, provider: &str) -> RequestLog {
        let me = self.clone();
        let provider = provider.to_string();
        RequestLog(Arc::new(move |r: RequestRecord| {
            let line = CallLine::of(&provider, &r);
            me.with(|f| {
                serde_json::to_writer(&mut f.calls, &line)?;
                f.calls.write_all(b"\n")?;
                f.counts.calls += 1;
                f.counts.traced_calls += u64::from(r.traceparent.is_some());
                Ok(())
            });
        }))
    }

    /// The mock's trace sink: protobuf bodies framed by their length, JSON bodies a line each;
    /// a body that is not an OTLP export refused (and counted), and every refusal counted.
    pub fn trace_sink(&self) -> TraceSink {
        let me = self.clone();
        TraceSink(Arc::new(move |export: TraceExport<'_>| {
            let (bytes, json) = match export {
                TraceExport::Body { bytes, json } => (bytes, json),
                TraceExport::Refused { status, why } => {
                    me.refused(format!("{status}: {why}"));
                    return Ok(());
                }
            };
            if let Err(why) = check_export(bytes, json) {
                me.refused(format!("400: {why}"));
                return Err(format!("Trace body {why} (capsize exec)."));
            }
            // An empty protobuf request holds no spans: there is nothing to frame.
            if bytes.is_empty() {
                return Ok(());
            }
            me.keep(bytes, json);
            Ok(())
        }))
    }

    /// Counts an export refused, keeping why if it is the first.
    fn refused(&self, why: String) {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        files.counts.trace_refused += 1;
        files.first_refusal.get_or_insert(why);
    }

    /// Writes an export that decoded: a protobuf body after its length, a JSON body on a line.
    fn keep(&self, body: &[u8], json: bool) {
        let dir = self.dir.clone();
        self.with(|f| {
            if json {
                let w = match &mut f.json {
                    Some(w) => w,
                    None => f
                        .json
                        .insert(BufWriter::new(File::create(dir.join(TRACES_JSON))?)),
                };
                // One request a line: a body's own line breaks are whitespace in JSON.
                let flat: Vec<u8> = body
                    .iter()
                    .map(|b| if matches!(b, b'\n' | b'\r') { b' ' } else { *b })
                    .collect();
                w.write_all(&flat)?;
                w.write_all(b"\n")?;
            } else {
                let w = match &mut f.proto {
                    Some(w) => w,
                    None => f
                        .proto
                        .insert(BufWriter::new(File::create(dir.join(TRACES_PROTO))?)),
                };
                let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
                w.write_all(&len.to_be_bytes())?;
                w.write_all(body)?;
            }
            f.counts.trace_requests += 1;
            Ok(())
        });
    }

    /// Ends the recording: every file flushed. An error met on the way is returned now.
    pub fn finish(self) -> Result<Recorded, String> {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        let flush = |w: &mut BufWriter<File>| w.flush().map_err(|e| e.to_string());
        flush(&mut files.calls)?;
        if let Some(w) = &mut files.proto {
            flush(w)?;
        }
        if let Some(w) = &mut files.json {
            flush(w)?;
        }
        if let Some(e) = files.error.take() {
            return Err(e);
        }
        files.kept = true;
        let mut written = vec![CALLS];
        if files.proto.is_some() {
            written.push(TRACES_PROTO);
        }
        if files.json.is_some() {
            written.push(TRACES_JSON);
        }
        Ok(Recorded {
            dir: self.dir.clone(),
            files: written,
            counts: files.counts,
            first_refusal: files.first_refusal.take(),
        })
    }
}

/// A finished recording: its files, in a folder removed when this is dropped.
#[derive(Debug)]
pub struct Recorded {
    dir: PathBuf,
    /// The files' names, in the folder.
    pub files: Vec<&'static str>,
    /// How much was recorded.
    pub counts: Counts,
    /// Why the first trace export refused was refused (`STATUS: why`), if one was.
    pub first_refusal: Option<String>,
}

/// Whether `body` decodes as an OTLP `ExportTraceServiceRequest`, in protobuf or (`json`) in
/// OTLP JSON as calibrate reads it; `Err` says why not.
fn check_export(body: &[u8], json: bool) -> Result<(), String> {
    if json {
        return crate::engine::observed::otlp::check_request(body);
    }
    ExportTraceServiceRequest::decode(body)
        .map(drop)
        .map_err(|e| format!("is not an OTLP protobuf ExportTraceServiceRequest: {e}"))
}

impl Recorded {
    /// Where file `name` is.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
