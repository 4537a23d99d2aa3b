//! The HTTP provider: every attempt is a real request to the mock provider, or to any server
//! with the same endpoints.
//!
//! Each endpoint of the run's routes (a provider, or the tools sent to none) is a server of its
//! own. A tool call is `POST {base}/tools/{tool}`; a model turn is `POST
//! {base}/v1/chat/completions` (with its `max_tokens`, and streamed when it asks to be: then
//! its first token is timed as the events arrive). Each request carries its token cost in `x-capsize-tokens` (and,
//! for a kind of call with a latency or error rate of its own, `x-capsize-latency: NAME`). The answer's status and headers become
//! the result the scheduler classifies: 2xx served; 429 rate limited, with the wait from
//! `retry-after-ms` / `retry-after`; other 5xx (and 529) a status error. Dropping an attempt
//! drops its request, which closes its connection. The client's own timeout ends an attempt
//! that has no answer in time. A connection that fails is counted by why (`transport.rs`).

#![allow(clippy::disallowed_methods)] // real time: tokio's clock by design

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::price::BILL_HEADER;
use capsize_mock::Bill;
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::Clients;
use super::{OrphanWatch, Provider, QueryState};
use crate::engine::recorder::{Arrival, Recorder};
use crate::engine::routes::Routes;
use crate::engine::sim::runtime::RealClock;
use crate::engine::timescale::TimeScale;
use crate::scheduler::retry::retry_after_from_headers;
use crate::scheduler::ProviderError;

/// The body of a model turn: a minimal OpenAI-style chat request, with its `max_tokens` and,
/// streamed, `stream` and `stream_options.include_usage` (so the last event says how many
/// tokens came).
fn chat_body(max_tokens: Option<u64>, stream: bool) -> String {
    let mut body = serde_json::json!({
        "model": "capsize",
        "messages": [{"role": "user", "content": "next step"}],
    });
    if let Some(m) = max_tokens {
        body["max_tokens"] = m.into();
    }
    if stream {
        body["stream"] = true.into();
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    body.to_string()
}

/// Where a run's requests go and how the client treats them.
#[derive(Debug, Clone)]
pub struct HttpTarget {
    /// Each endpoint's base URL, e.g. `http://127.0.0.1:41234`, in the routes' order.
    pub bases: Vec<String>,
    /// The client's timeout per attempt, in model time.
    pub timeout: Duration,
}

/// One route, resolved: the URL it posts to, the body it sends and the service it names.
struct Way {
    url: String,
    body: String,
    /// A streamed model turn: its answer is read event by event.
    stream: bool,
    service: Option<String>,
    endpoint: usize,
    /// A model turn's `max_tokens` (`None`: none set, or a tool call).
    max_tokens: Option<u64>,
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
    /// The client's own time per attempt, if the run models it.
    clients: Clients<RealClock>,
}

/// Books a request's arrival once its fate is known; one dropped in flight counts as charged
/// (the provider charges at arrival and had not refused it).
struct Booking<'a> {
    recorder: &'a Recorder,
    at: Duration,
    tokens: u64,
    /// Of `tokens`, the model turn's `max_tokens`.
    output: u64,
    endpoint: usize,
    booked: bool,
}

impl Booking<'_> {
    fn book(&mut self, charged: bool, rate_limited: bool) {
        self.recorder.arrival(Arrival {
            at: self.at,
            tokens: self.tokens,
            output: self.output,
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
                    body: match r.model_turn {
                        true => chat_body(r.max_tokens, r.stream),
                        false => "{}".into(),
                    },
                    stream: r.model_turn && r.stream,
                    service: r.service.clone(),
                    endpoint: r.endpoint,
                    max_tokens: r.max_tokens.filter(|_| r.model_turn),
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
            clients: Clients::none(),
        })
    }

    /// The same provider, with `clients`' own time spent on each attempt.
    pub fn with_clients(mut self, clients: Clients<RealClock>) -> Self {
        self.clients = clients;
        self
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

    /// Books an answer `query` used, by the bill its `x-capsize-bill` header carries (none:
    /// the provider bills nothing, or does not say); an unreadable one stops the run.
    fn book_used(&self, headers: &HeaderMap, endpoint: usize, query: &QueryState) {
        let Some(value) = headers.get(BILL_HEADER) else {
            return;
        };
        match value
            .to_str()
            .map_err(|e| e.to_string())
            .and_then(Bill::parse_header)
        {
            Ok(bill) => {
                if query.use_answer(&bill) {
                    self.recorder.used(endpoint, &bill);
                }
            }
            Err(e) => {
                self.bad_header
                    .borrow_mut()
                    .get_or_insert(format!("{BILL_HEADER}: {e}"));
                self.broken.cancel();
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

/// What a streamed answer showed: when its first token came, and the tokens its usage chunk
/// reports.
#[derive(Default)]
struct Streamed {
    first_token: Option<Instant>,
    output_tokens: Option<u64>,
    /// A line not yet ended.
    partial: Vec<u8>,
}

impl Streamed {
    /// Reads `chunk` of an OpenAI event stream that arrived at `at`.
    fn read(&mut self, chunk: &[u8], at: Instant) {
        self.partial.extend_from_slice(chunk);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data: ") else {
                continue;
            };
            let Ok(event) = serde_json::from_slice::<serde_json::Value>(data) else {
                continue; // `[DONE]`, or not JSON: nothing to count
            };
            let text = event["choices"][0]["delta"]["content"].as_str();
            if self.first_token.is_none() && text.is_some_and(|t| !t.is_empty()) {
                self.first_token = Some(at);
            }
            if let Some(n) = event["usage"]["completion_tokens"].as_u64() {
                self.output_tokens = Some(n);
            }
        }
    }
}

impl Provider for HttpProvider {
    async fn request(
        &self,
        tokens: u64,
        route: u16,
        query: &QueryState,
    ) -> Result<(), ProviderError> {
        let client = self.clients.of(query, route);
        let spent = match client {
            Some(c) => c.send().await,
            None => Duration::ZERO,
        };
        let sent = Instant::now();
        let way = &self.ways[usize::from(route)];
        let mut booking = Booking {
            recorder: &self.recorder,
            at: self.scale.to_model(sent - self.t0),
            tokens,
            output: way.max_tokens.unwrap_or(0),
            endpoint: way.endpoint,
            booked: false,
        };
        let mut watch = OrphanWatch {
            charged: true,
            answered: false,
            abandoned: &query.abandoned,
            recorder: &self.recorder,
        };
        let mut request = self.client.post(&way.url).body(way.body.clone());
        if let Some(service) = &way.service {
            request = request.header("x-capsize-latency", service);
        }
        let request = request
            .header(CONTENT_TYPE, "application/json")
            .header("x-capsize-tokens", tokens);
        let exchange = async {
            let mut response = request.send().await?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let read = way.generates && status == 200;
            // Read the body (so the connection can be reused), a streamed one as it comes.
            let generated = if way.stream && read {
                let mut streamed = Streamed::default();
                while let Some(chunk) = response.chunk().await? {
                    streamed.read(&chunk, Instant::now());
                }
                streamed
                    .output_tokens
                    .map(|n| (n, streamed.first_token.map(|t| t - sent)))
            } else {
                let body = response.bytes().await?;
                read.then(|| output_tokens(&body))
                    .flatten()
                    .map(|n| (n, None))
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
        let answered = matches!(answer, Ok(Ok(_)));
        let result = match answer {
            Ok(Ok((status, headers, generated))) => {
                if let Some((n, first)) = generated {
                    // Not streamed, the first token is not seen, only the whole answer.
                    self.recorder.generated(Instant::now() - sent, first, n);
                }
                let charged = charged(status, &headers);
                watch.charged = charged;
                booking.book(charged, status == 429); // (charged, rate_limited)
                let result = self.classify(status, &headers);
                if result.is_ok() {
                    self.book_used(&headers, way.endpoint, query);
                }
                result
            }
            Ok(Err(e)) => {
                watch.charged = false;
                booking.book(false, false); // never reached the quota
                self.recorder
                    .transport_error(super::transport::classify(&e));
                Err(ProviderError::other(format!("transport: {e}")))
            }
            Err(_) => Err(ProviderError::timeout()),
        };
        if let Some(c) = client {
            c.done(spent, answered).await;
        }
        result
    }
}
