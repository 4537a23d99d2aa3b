//! The HTTP provider: every attempt is a real request to the mock provider, or to any server
//! with the same endpoints.
//!
//! A tool call is `POST {base}/tools/{tool}`; a model turn is `POST {base}/v1/chat/completions`.
//! Each request carries its token cost in `x-capsize-tokens` (and, for a model turn with a
//! latency of its own, `x-capsize-latency: model_turn`). The answer's status and headers become
//! the result the scheduler classifies: 2xx served; 429 rate limited, with the wait from
//! `retry-after-ms` / `retry-after`; other 5xx (and 529) a status error. Dropping an attempt
//! drops its request, which closes its connection. The client's own timeout ends an attempt
//! that has no answer in time.

#![allow(clippy::disallowed_methods)] // real time: tokio's clock by design

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, CONTENT_TYPE};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{OrphanWatch, Provider, RequestKind};
use crate::engine::recorder::{Arrival, Recorder};
use crate::engine::timescale::TimeScale;
use crate::scheduler::retry::retry_after_from_headers;
use crate::scheduler::ProviderError;

/// The body of a model turn: a minimal OpenAI-style chat request.
const CHAT_BODY: &str =
    r#"{"model":"capsize","max_tokens":1,"messages":[{"role":"user","content":"next step"}]}"#;

/// Where a run's requests go and how the client treats them.
#[derive(Debug, Clone)]
pub struct HttpTarget {
    /// The server's base URL, e.g. `http://127.0.0.1:41234`.
    pub base: String,
    /// Whether model turns ask for the workload's model-turn latency (`x-capsize-latency`).
    pub model_turn_latency: bool,
    /// The client's timeout per attempt, in model time.
    pub timeout: Duration,
}

/// The provider over HTTP, on the real clock at `scale`.
pub struct HttpProvider {
    client: reqwest::Client,
    tool_url: String,
    chat_url: String,
    model_turn_latency: bool,
    recorder: Arc<Recorder>,
    t0: Instant,
    scale: TimeScale,
    /// The client's timeout per attempt, on the runtime's clock.
    timeout: Duration,
    /// The first response header that could not be read, if any: a run that saw one reports
    /// it rather than results built on a guess.
    bad_header: RefCell<Option<String>>,
    /// Cancelled when a bad header arrives: the run stops there.
    broken: CancellationToken,
}

/// Books a request's arrival once its fate is known; one dropped in flight counts as charged
/// (the provider charges at arrival and had not refused it).
struct Booking<'a> {
    recorder: &'a Recorder,
    at: Duration,
    tokens: u64,
    booked: bool,
}

impl Booking<'_> {
    fn book(&mut self, charged: bool, rate_limited: bool) {
        self.recorder.arrival(Arrival {
            at: self.at,
            tokens: self.tokens,
            charged,
            rate_limited,
            queued: None,
        });
        self.booked = true;
    }
}

impl Drop for Booking<'_> {
    fn drop(&mut self) {
        if !self.booked {
            self.book(true, false);
        }
    }
}

impl HttpProvider {
    /// A provider sending to `target`, recording into `recorder`; the run started at `t0`.
    pub fn new(
        target: &HttpTarget,
        recorder: Arc<Recorder>,
        t0: Instant,
        scale: TimeScale,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_idle_timeout(None)
            .build()?;
        let base = target.base.trim_end_matches('/');
        Ok(HttpProvider {
            client,
            tool_url: format!("{base}/tools/call"),
            chat_url: format!("{base}/v1/chat/completions"),
            model_turn_latency: target.model_turn_latency,
            recorder,
            t0,
            scale,
            timeout: scale.to_runtime(target.timeout),
            bad_header: RefCell::new(None),
            broken: CancellationToken::new(),
        })
    }

    /// The first unreadable response header the run saw, as one line.
    pub fn bad_header(&self) -> Option<String> {
        self.bad_header.borrow().clone()
    }

    /// Resolves when a response header could not be read: results built on a guess at what
    /// the provider meant are not worth waiting for.
    pub async fn broken(&self) {
        self.broken.cancelled().await;
    }

    fn retry_after(&self, headers: &HeaderMap) -> Option<Duration> {
        let pairs = headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
        match retry_after_from_headers(pairs, None) {
            Ok(wait) => wait,
            Err(e) => {
                self.bad_header.borrow_mut().get_or_insert(e.to_string());
                self.broken.cancel();
                None
            }
        }
    }

    fn classify(&self, status: u16, headers: &HeaderMap) -> Result<(), ProviderError> {
        match status {
            200..=299 => Ok(()),
            429 => Err(ProviderError::rate_limited(self.retry_after(headers))),
            // Any other status is the policy's to retry or not (`retry_on`: 5xx for capsize,
            // 408 and 409 too for the SDKs).
            _ => Err(ProviderError::status(status).with_retry_after(self.retry_after(headers))),
        }
    }
}

/// Whether the provider charged the request: its `x-capsize-charged` header if it sends one,
/// else everything but a 429.
fn charged(status: u16, headers: &HeaderMap) -> bool {
    match headers
        .get(capsize_mock::server::CHARGED_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        Some(v) => v.eq_ignore_ascii_case("true") || v == "1",
        None => status != 429,
    }
}

impl Provider for HttpProvider {
    async fn request(
        &self,
        tokens: u64,
        kind: RequestKind,
        abandoned: &Cell<bool>,
    ) -> Result<(), ProviderError> {
        let sent = Instant::now();
        let mut booking = Booking {
            recorder: &self.recorder,
            at: self.scale.to_model(sent - self.t0),
            tokens,
            booked: false,
        };
        let mut watch = OrphanWatch {
            charged: true,
            answered: false,
            abandoned,
            recorder: &self.recorder,
        };
        let request = match kind {
            RequestKind::Tool => self.client.post(&self.tool_url).body("{}"),
            RequestKind::ModelTurn => {
                let r = self.client.post(&self.chat_url).body(CHAT_BODY);
                if self.model_turn_latency {
                    r.header("x-capsize-latency", "model_turn")
                } else {
                    r
                }
            }
        }
        .header(CONTENT_TYPE, "application/json")
        .header("x-capsize-tokens", tokens);
        let exchange = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            // Read the body so the connection can be reused.
            response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers))
        };
        let answer = tokio::time::timeout_at(sent + self.timeout, exchange).await;
        // An answer, a transport error or the client's own timeout: the attempt is over either
        // way (only a drop before this point leaves the request orphaned).
        watch.answered = true;
        match answer {
            Ok(Ok((status, headers))) => {
                let charged = charged(status, &headers);
                watch.charged = charged;
                booking.book(charged, status == 429); // (charged, rate_limited)
                self.classify(status, &headers)
            }
            Ok(Err(e)) => {
                watch.charged = false;
                booking.book(false, false); // never reached the quota
                Err(ProviderError::other(format!("transport: {e}")))
            }
            Err(_) => Err(ProviderError::timeout()),
        }
    }
}
