//! The HTTP provider: every attempt is a real request to the mock provider, or to any server
//! with the same endpoints.
//!
//! Each endpoint of the run's routes (a provider, or the tools sent to none) is a server of its
//! own. A tool call is `POST {base}/tools/{tool}`; a model turn is `POST
//! {base}/v1/chat/completions`. Each request carries its token cost in `x-capsize-tokens` (and,
//! for a kind of call with a latency or error rate of its own, `x-capsize-latency: NAME`). The answer's status and headers become
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

use super::{OrphanWatch, Provider};
use crate::engine::recorder::{Arrival, Recorder};
use crate::engine::routes::Routes;
use crate::engine::timescale::TimeScale;
use crate::scheduler::retry::retry_after_from_headers;
use crate::scheduler::ProviderError;

/// The body of a model turn: a minimal OpenAI-style chat request.
const CHAT_BODY: &str = r#"{"model":"capsize","messages":[{"role":"user","content":"next step"}]}"#;

/// Where a run's requests go and how the client treats them.
#[derive(Debug, Clone)]
pub struct HttpTarget {
    /// Each endpoint's base URL, e.g. `http://127.0.0.1:41234`, in the routes' order.
    pub bases: Vec<String>,
    /// The client's timeout per attempt, in model time.
    pub timeout: Duration,
}

/// One route, resolved: the URL it posts to and the service it names.
struct Way {
    url: String,
    service: Option<String>,
    model_turn: bool,
    endpoint: usize,
    /// A model turn to a generating provider: its answer's `usage` says how many tokens it
    /// generated.
    generates: bool,
}

/// The provider over HTTP, on the real clock at `scale`.
pub struct HttpProvider {
    client: reqwest::Client,
    ways: Vec<Way>,
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
    endpoint: usize,
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
            endpoint: self.endpoint,
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
    /// A provider sending `routes` to `target`, recording into `recorder`; the run started at
    /// `t0`.
    pub fn new(
        routes: &Routes,
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
        let ways = routes
            .routes
            .iter()
            .map(|r| {
                let base = target.bases[r.endpoint].trim_end_matches('/');
                let url = match r.model_turn {
                    true => format!("{base}/v1/chat/completions"),
                    false => format!("{base}/tools/{}", r.tool),
                };
                Way {
                    url,
                    service: r.service.clone(),
                    model_turn: r.model_turn,
                    endpoint: r.endpoint,
                    generates: r.model_turn
                        && routes.endpoints[r.endpoint].config.generation.is_some(),
                }
            })
            .collect();
        Ok(HttpProvider {
            client,
            ways,
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

/// The output tokens an OpenAI-shaped answer reports in `usage.completion_tokens`, if it does.
fn output_tokens(body: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("usage")?.get("completion_tokens")?.as_u64()
}

impl Provider for HttpProvider {
    async fn request(
        &self,
        tokens: u64,
        route: u16,
        abandoned: &Cell<bool>,
    ) -> Result<(), ProviderError> {
        let sent = Instant::now();
        let way = &self.ways[usize::from(route)];
        let mut booking = Booking {
            recorder: &self.recorder,
            at: self.scale.to_model(sent - self.t0),
            tokens,
            endpoint: way.endpoint,
            booked: false,
        };
        let mut watch = OrphanWatch {
            charged: true,
            answered: false,
            abandoned,
            recorder: &self.recorder,
        };
        let body = if way.model_turn { CHAT_BODY } else { "{}" };
        let mut request = self.client.post(&way.url).body(body);
        if let Some(service) = &way.service {
            request = request.header("x-capsize-latency", service);
        }
        let request = request
            .header(CONTENT_TYPE, "application/json")
            .header("x-capsize-tokens", tokens);
        let exchange = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            // Read the body so the connection can be reused.
            let body = response.bytes().await?;
            let generated = match way.generates && status == 200 {
                true => output_tokens(&body),
                false => None,
            };
            Ok::<_, reqwest::Error>((status, headers, generated))
        };
        // The client's timeout on the precise timer: tokio's would end it about 1 ms late,
        // times the time scale.
        let answer = tokio::select! {
            biased;
            answer = exchange => Ok(answer),
            () = capsize_timer::sleep_until(sent + self.timeout) => Err(()),
        };
        // An answer, a transport error or the client's own timeout: the attempt is over either
        // way (only a drop before this point leaves the request orphaned).
        watch.answered = true;
        match answer {
            Ok(Ok((status, headers, generated))) => {
                if let Some(n) = generated {
                    // Not streamed: the first token is not seen, only the whole answer.
                    self.recorder.generated(Instant::now() - sent, None, n);
                }
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
