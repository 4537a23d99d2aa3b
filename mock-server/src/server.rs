//! The mock provider over HTTP: the same [`ProviderModel`](crate::model::ProviderModel) behind a small HTTP/1.1 server.
//!
//! Every request is routed by the responder, which feeds the model real time (scaled by
//! `time_scale`) and turns each decision into a response: OpenAI-compatible
//! `POST /v1/chat/completions`, Anthropic-compatible `POST /v1/messages`, a generic
//! `POST /tools/{name}`, plus `GET /stats` (the model's counters and the clients' traffic),
//! `GET /report` (all of `/stats` and the per-second series, the busiest 60 s and the retry
//! waits, as [`Report`]), `GET /config` (the values the model is built from), `GET /healthz`
//! and `POST /reset`, which
//! do not reach the model, and `POST /v1/traces` (OTLP/HTTP traces an instrumented agent
//! exports, gzip or deflate undone within the body limit, a body that is not OTLP answered 400;
//! `traces.rs`), served only when the caller gives a trace sink. The model sits behind a
//! `std::sync::Mutex`.
//!
//! `POST /reset` (no body needed) puts the provider back to the state of a freshly started server
//! with the same config and seed: a new model (windows, counters, randomness, phases' clock),
//! model time 0 from the reset, the traffic tally and per-second series cleared. It answers 200
//! `{"reset":true,"generation":N}`, N the number of resets so far (a fresh server is generation
//! 0). Give it between runs against one long-lived mock. A request in flight when it arrives
//! finishes in the run it arrived in: its decision, its leaving the requests in flight and its
//! orphaning are that run's, never the new one's. [`MockProvider::reset`] does the same.
//!
//! A streamed answer counts as in flight until its last event is sent (or its client goes
//! away), not only until its first token.
//!
//! The server runs on a thread of its own, on a current-thread tokio runtime, so it never
//! competes with the caller's runtime; dropping the [`MockProvider`] stops it, closing every
//! connection. It is hyper's HTTP/1.1 server with bounds on everything a client sends:
//!
//! - a request head (request line and headers) over [`MAX_HEAD_BYTES`] gets 431, one that does
//!   not parse 400 (both from hyper, with an empty body), and one not complete within
//!   [`HEAD_TIMEOUT`] a closed connection;
//! - a body is read only for a model-facing route, and only up to `max_body_bytes`
//!   ([`MAX_BODY_BYTES`](crate::limits::MAX_BODY_BYTES) by default): a
//!   `Content-Length` over it is answered 413 without reading any of it, a longer chunked body
//!   413 as soon as it passes the limit (the connection is then closed: a client still sending
//!   gets a reset, and sees the 413 if it reads before it finishes writing), a body not complete
//!   within [`BODY_TIMEOUT`] 408, a body cut short (the client shut its side, or the chunked
//!   framing is broken) 400, and one whose client has gone is dropped without an answer;
//! - nothing of a request is kept once its response is built (a caller that wants a request log
//!   gives `ServerConfig::request_log`, and gets each request's record as it leaves);
//! - HTTP/1 only: hyper closes a connection that opens with the HTTP/2 preface.
//!
//! Real time is read through `tokio::time::Instant`: start the server from a runtime whose clock
//! is not paused, or model time will not advance with the wall clock.

mod describe;
mod render;
mod requests;
mod respond;
#[cfg(feature = "wiremock")]
mod responder;
mod run;
mod series;
mod spell;
mod sse;
mod traces;
mod traffic;
pub mod wire;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

pub use describe::{differences, Described};
pub use requests::{RequestLog, RequestRecord, TraceExport, TraceSink, TRACEPARENT_HEADER};
pub use respond::{CHARGED_HEADER, LATENCY_HEADER, NEVER, TOKENS_HEADER};
#[cfg(feature = "wiremock")]
pub use responder::ProviderResponder;
pub use run::Report;
pub use series::{Bin, Series, MAX_BINS};
pub use traces::TRACE_ENCODINGS;
pub use traffic::{Traffic, TrafficReport, IDEMPOTENCY_HEADER, MAX_LINKED, RETRY_COUNT_HEADER};

use crate::config::ProviderConfig;
use crate::latency::Latency;
use crate::limits::MAX_HEAD_BYTES;
use crate::model::Counters;
use respond::{body_too_large, refuse, Reply, Route, Shared};
use traffic::Visit;

/// How long a client may take to send a request head before its connection is closed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to send a request body before it is answered 408.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server waits before accepting again after `accept` failed (out of descriptors,
/// say), so that it neither spins nor stops serving.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// What the server serves.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The provider.
    pub provider: ProviderConfig,
    /// Seed of the model's randomness.
    pub seed: u64,
    /// The model runs this many times faster than real time (1 = real time). Model durations
    /// (latency, Retry-After, rate-limit resets) are divided by it on the wire.
    pub time_scale: f64,
    /// Named latencies a request selects with the `x-capsize-latency: NAME` header.
    pub latencies: BTreeMap<String, Latency>,
    /// Named error rates, selected by the same header: a request naming one fails at that
    /// rate instead of the provider's `error_rate` (a tool class of its own). A name may have
    /// a latency, an error rate, or both.
    pub error_rates: BTreeMap<String, f64>,
    /// The largest request body read ([`MAX_BODY_BYTES`](crate::limits::MAX_BODY_BYTES) by
    /// default); a larger one is a 413.
    pub max_body_bytes: usize,
    /// Where each model-facing request's [`RequestRecord`] goes when it leaves (`None`: no
    /// request log).
    pub request_log: Option<RequestLog>,
    /// Where OTLP traces an agent posts to `POST /v1/traces` go (`None`: the route is unknown).
    pub trace_sink: Option<TraceSink>,
}

impl ServerConfig {
    /// Checks what the model's own validation does not: the time scale and the body limit.
    /// Returns the time scale.
    pub(crate) fn check(&self) -> Result<f64, ServerError> {
        let scale = self.time_scale;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(ServerError::TimeScale(scale));
        }
        if !crate::limits::BODY_LIMIT_RANGE.contains(&self.max_body_bytes) {
            return Err(ServerError::BodyLimit(self.max_body_bytes));
        }
        Ok(scale)
    }
}

/// Why the server did not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// `time_scale` is not a positive finite number.
    #[error("time_scale must be a positive finite number, got {0}")]
    TimeScale(f64),
    /// `max_body_bytes` is outside [`BODY_LIMIT_RANGE`](crate::limits::BODY_LIMIT_RANGE).
    #[error("max_body_bytes must be from 1024 to 1073741824, got {0}")]
    BodyLimit(usize),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server's thread or runtime could not be started.
    #[error("cannot start the server: {0}")]
    Start(std::io::Error),
}

/// A running mock provider; it serves until dropped.
pub struct MockProvider {
    shared: Arc<Shared>,
    address: SocketAddr,
    /// Dropping it stops the server: its accept loop ends, and its runtime with every connection.
    _stop: watch::Sender<()>,
}

impl std::fmt::Debug for MockProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockProvider")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Wall-clock time since the Unix epoch, read once at start: the base of the `created` field and
/// of Anthropic's RFC 3339 reset instants. The only wall-clock read of the crate.
#[allow(clippy::disallowed_types, clippy::disallowed_methods)]
fn wall_clock() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

impl MockProvider {
    /// Binds `addr` (port 0 = any free port) and serves on a thread of its own until dropped.
    /// When this returns, the server is accepting connections.
    pub async fn start(
        config: ServerConfig,
        addr: SocketAddr,
    ) -> Result<MockProvider, ServerError> {
        Self::start_on(config, addr, false).await
    }

    /// As [`MockProvider::start`], but serves on the caller's tokio runtime (which must have
    /// I/O and time enabled) instead of a thread of its own. A client on a current-thread
    /// runtime then exchanges with the mock without a wake-up of another thread: on an idle
    /// virtual machine each such wake-up finds cold caches and costs about 0.1 ms.
    pub async fn start_local(
        config: ServerConfig,
        addr: SocketAddr,
    ) -> Result<MockProvider, ServerError> {
        Self::start_on(config, addr, true).await
    }

    #[allow(clippy::disallowed_methods)] // a real-time server: tokio's clock and tasks
    async fn start_on(
        config: ServerConfig,
        addr: SocketAddr,
        here: bool,
    ) -> Result<MockProvider, ServerError> {
        let scale = config.check()?;
        let bind_err = |source| ServerError::Bind { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind_err)?;
        let address = listener.local_addr().map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let shared = Arc::new(Shared::new(
            config,
            scale,
            tokio::time::Instant::now(),
            wall_clock(),
        ));
        let (stop, stopped) = watch::channel(());
        if here {
            let listener = TcpListener::from_std(listener).map_err(ServerError::Start)?;
            tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped));
            return Ok(MockProvider {
                shared,
                address,
                _stop: stop,
            });
        }
        let (ready, is_ready) = oneshot::channel();
        let serving = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("capsize-mock".into())
            .spawn(move || serve_on_own_runtime(listener, serving, stopped, ready))
            .map_err(ServerError::Start)?;
        match is_ready.await {
            Ok(Ok(())) => Ok(MockProvider {
                shared,
                address,
                _stop: stop,
            }),
            Ok(Err(e)) => Err(ServerError::Start(e)),
            Err(_) => Err(ServerError::Start(std::io::Error::other(
                "the server thread ended before it was ready",
            ))),
        }
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its base URI, e.g. `http://127.0.0.1:41234`.
    pub fn uri(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The model's counters so far (since the last reset).
    pub fn counters(&self) -> Counters {
        self.shared.run().counters()
    }

    /// The model's counters in each of its phases (see [`crate::phases`]).
    pub fn phase_counters(&self) -> Vec<Counters> {
        self.shared.run().phase_counters()
    }

    /// What the clients did so far: requests in flight, retries they announced, orphans.
    pub fn traffic(&self) -> Traffic {
        self.shared.run().traffic.now()
    }

    /// [`MockProvider::traffic`], with the per-second series, the busiest 60 s and the wait
    /// before each retry linked to its previous attempt (what `capsize exec` reports).
    pub fn traffic_report(&self) -> TrafficReport {
        self.shared.run().traffic.report()
    }

    /// Everything the current run has seen, as `GET /report` serves it.
    pub fn report(&self) -> Report {
        self.shared.run().report()
    }

    /// Starts the provider afresh, as `POST /reset` does (see the module docs): returns the
    /// number of resets so far.
    pub fn reset(&self) -> u64 {
        self.shared.reset()
    }
}

/// The server thread: a current-thread runtime running the accept loop until `stop` fires (or
/// its sender is dropped); then the runtime is dropped, and every connection with it.
fn serve_on_own_runtime(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stop: watch::Receiver<()>,
    ready: oneshot::Sender<std::io::Result<()>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        match TcpListener::from_std(listener) {
            Ok(listener) => {
                let _ = ready.send(Ok(()));
                accept_loop(listener, shared, stop).await;
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        }
    });
}

#[allow(clippy::disallowed_methods)] // a real-time server: tokio's clock and tasks
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<()>) {
    loop {
        let stream = tokio::select! {
            biased;
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // An answer goes out at once, not held back by Nagle's algorithm for the
                    // client's acknowledgement (tens of µs on loopback, times a time scale).
                    let _ = stream.set_nodelay(true);
                    stream
                }
                Err(_) => {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let shared = Arc::clone(&shared);
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(Arc::clone(&shared), req));
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_header_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            // An error here is the client's (a malformed head, a closed connection): hyper has
            // already answered what it could, and there is no one left to tell. A stopped
            // server closes the connection (on a runtime of its own, the runtime's end does).
            tokio::select! {
                _ = connection => {}
                _ = stop.changed() => {}
            }
        });
    }
}

/// Why a body was not read.
enum BodyError {
    /// Over the body limit.
    TooLarge,
    /// Not complete within [`BODY_TIMEOUT`].
    Slow,
    /// Cut short, or not HTTP: the connection is gone or broken.
    Broken,
}

/// Reads a body of at most `max` bytes, refusing a longer declared length without reading any
/// of it, and a longer chunked body as soon as it passes the limit.
#[allow(clippy::disallowed_methods)] // a real-time server: tokio's clock and tasks
async fn read_body(body: Incoming, max: usize) -> Result<Bytes, BodyError> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX);
    if body.size_hint().lower() > limit {
        return Err(BodyError::TooLarge);
    }
    let read = Limited::new(body, max).collect();
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(BodyError::TooLarge),
        Ok(Err(_)) => Err(BodyError::Broken),
        Err(_) => Err(BodyError::Slow),
    }
}

/// One request: route it, read its body if it goes to the model, decide, drop the body, hold
/// the answer for its delay, answer.
#[allow(clippy::disallowed_methods)] // a real-time server: tokio's clock and tasks
async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Answer>, Infallible> {
    let (parts, body) = req.into_parts();
    // A model request is in flight from here until its answer is handed over, or until the
    // connection closes and hyper drops this future (an orphan, if it was charged).
    let mut visit = None;
    let reply = match shared.route(&parts.method, parts.uri.path()) {
        Route::Answer(reply) => reply,
        Route::Traces => match &shared.trace_sink {
            Some(sink) => traces::export(sink, &parts.headers, body, shared.max_body_bytes).await,
            None => refuse(wire::Api::OpenAi, 404, "unknown path /v1/traces"),
        },
        Route::Model(call) => match read_body(body, shared.max_body_bytes).await {
            // The body is dropped here, before the answer's delay.
            // The run it arrives in decides it and counts it, even if a reset comes meanwhile.
            Ok(bytes) => {
                let run = shared.run();
                let v = visit.insert(run.traffic.enter(&parts.headers));
                if let Some(log) = &shared.request_log {
                    let arrived = shared.wall_start.saturating_add(shared.start.elapsed());
                    v.pending = Some(Box::new(requests::Pending::start(
                        log,
                        arrived,
                        &parts.headers,
                    )));
                }
                let mut reply = shared.model_call(&run, &call, &parts.headers, &bytes);
                if let (Some(p), Some(seen)) = (v.pending.as_mut(), reply.seen.take()) {
                    p.seen = *seen;
                }
                v.charged = reply.orphanable;
                v.billed = reply.billed.take();
                if let Some(d) = reply.decided {
                    run.traffic.decided(d);
                }
                reply
            }
            Err(BodyError::TooLarge) => body_too_large(call.api, shared.max_body_bytes),
            Err(BodyError::Slow) => refuse(
                call.api,
                408,
                &format!(
                    "Request body not received within {} s (capsize mock provider).",
                    BODY_TIMEOUT.as_secs()
                ),
            ),
            // hyper cannot write an answer to a connection that is gone; this one is for a
            // client that only half-closed.
            Err(BodyError::Broken) => refuse(
                call.api,
                400,
                "Request body cut short (capsize mock provider).",
            ),
        },
    };
    drop(parts);
    if !reply.delay.is_zero() {
        // Within tens of µs of the delay: tokio's timer ends about 1 ms late, and a time
        // scale multiplies that into the model's figures.
        match shared.precise() {
            true => capsize_timer::sleep(reply.delay).await,
            false => capsize_timer::coarse_sleep(reply.delay).await,
        }
    }
    if let Some(v) = &mut visit {
        v.answered = true;
    }
    // A streamed answer stays in flight until its last event; a whole one leaves now.
    Ok(response(reply, shared.precise(), visit))
}

/// A response body: whole, or a stream of events paced by the model.
enum Answer {
    Whole(Full<Bytes>),
    Streamed(sse::SseBody),
}

impl Body for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Answer::Whole(b) => std::pin::Pin::new(b).poll_frame(cx),
            Answer::Streamed(b) => std::pin::Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Whole(b) => b.is_end_stream(),
            Answer::Streamed(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Answer::Whole(b) => b.size_hint(),
            Answer::Streamed(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// The HTTP response for a reply: a streamed one from now on, holding `visit` (the request in
/// flight) until its last event. A header that is not valid in HTTP is left out (none of ours
/// is; this only keeps a future mistake from being a panic).
#[allow(clippy::disallowed_methods)] // a real-time server: the stream starts now
fn response(reply: Reply, precise: bool, visit: Option<Visit>) -> Response<Answer> {
    use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
    let body = match reply.stream {
        Some(s) => Answer::Streamed(s.body(tokio::time::Instant::now(), precise, visit)),
        None => Answer::Whole(Full::new(Bytes::from(reply.body))),
    };
    let mut r = Response::new(body);
    *r.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers: &mut HeaderMap = r.headers_mut();
    if let Ok(value) = HeaderValue::from_bytes(reply.content_type.as_bytes()) {
        headers.insert(CONTENT_TYPE, value);
    }
    for (name, value) in reply.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(name, value);
        }
    }
    r
}
