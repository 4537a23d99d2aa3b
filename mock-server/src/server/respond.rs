//! The responder: routes a request, works out its token cost, asks the [`ProviderModel`] (fed
//! real time, scaled) and turns the decision into a [`Reply`]: status, rate-limit headers, a body
//! in the provider's own JSON shape and how long to hold the answer. Replies are data; the HTTP
//! layer (`server.rs`) reads requests and writes replies.
//!
//! Bad requests (400, 404, 405, 408, and 413 for a body over the limit) are answered
//! without reaching the model: never charged, never counted. Nothing here panics on client input.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hyper::{HeaderMap, Method};
use serde::Serialize;
use tokio::time::Instant;

use super::describe::Described;
use super::series::Decided;
use super::sse::Stream;
use super::traffic::{Traffic, TrafficLog};
use super::wire::{self, Api};
use crate::latency::Latency;
use crate::limits::{divide_duration, scale_duration};
use crate::model::{Counters, Decision, Generated, Outcome, ProviderModel, Service};
use crate::window::{Limit, Usage};

/// Header giving a request's token cost, overriding the body's estimate.
pub const TOKENS_HEADER: &str = "x-capsize-tokens";
/// Header naming a service registered in `ServerConfig::latencies` or `error_rates`.
pub const LATENCY_HEADER: &str = "x-capsize-latency";
/// Response header saying whether the request was charged against the quota (`true`/`false`).
pub const CHARGED_HEADER: &str = "x-capsize-charged";
/// How long a request the model never answers is held: longer than any client waits.
pub const NEVER: Duration = Duration::from_secs(3600);
/// A response as data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    /// HTTP status.
    pub(crate) status: u16,
    /// `content-type` of the body.
    pub(crate) content_type: &'static str,
    /// Further headers, names in lower case, in a fixed order.
    pub(crate) headers: Vec<(&'static str, String)>,
    /// The body.
    pub(crate) body: Vec<u8>,
    /// How long to hold the answer ([`NEVER`] for a request the model never answers).
    pub(crate) delay: Duration,
    /// Whether the model charged a request it will answer: if the client hangs up first, its
    /// quota is orphaned. (One it never answers is a timeout, not an orphan.)
    pub(crate) orphanable: bool,
    /// What the model decided, for the traffic series (`None`: refused before the model).
    pub(crate) decided: Option<Decided>,
    /// A streamed answer: its events, sent from `delay` on (the first token) instead of `body`.
    pub(crate) stream: Option<Stream>,
}

impl Reply {
    fn json(status: u16, body: &impl Serialize) -> Reply {
        // Our bodies always serialise; the fallback is only for the impossible case.
        let body = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
        Reply {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body,
            delay: Duration::ZERO,
            orphanable: false,
            decided: None,
            stream: None,
        }
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }
}

/// A request refused before the model: an error body in `api`'s shape, not charged.
pub(crate) fn refuse(api: Api, status: u16, message: &str) -> Reply {
    Reply::json(status, &wire::error(api, status, message)).header(CHARGED_HEADER, "false")
}

/// The 413 for a body over the limit of `max` bytes.
pub(crate) fn body_too_large(api: Api, max: usize) -> Reply {
    let message =
        format!("Request body too large: over the limit of {max} bytes (capsize mock provider).");
    refuse(api, 413, &message)
}

/// At most the first 64 characters of `s`, for quoting client input in an error.
pub(crate) fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

fn not_allowed(api: Api, allow: &str, method: &Method, path: &str) -> Reply {
    let message = format!(
        "method {} not allowed on {} (allowed: {allow})",
        clip(method.as_str()),
        clip(path)
    );
    refuse(api, 405, &message).header("allow", allow)
}

/// A header's value as (lossy) text, trimmed, if present.
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    let v = headers.get(name)?;
    Some(String::from_utf8_lossy(v.as_bytes()).trim().to_string())
}

/// Where a request goes.
pub(crate) enum Route {
    /// Answered without reading the body.
    Answer(Reply),
    /// To the model, once the body is read.
    Model(Call),
}

/// A request bound for the model: whose API, and the tool's name for `/tools/{name}`.
pub(crate) struct Call {
    pub(crate) api: Api,
    tool: Option<String>,
}

/// What a model-facing request asks for, once it has been read and found sound.
struct Ask<'a> {
    api: Api,
    tokens: u64,
    service: Service<'a>,
    kind: Kind<'a>,
}

/// The services a request can name with the `x-capsize-latency` header: a latency, an error
/// rate, or both under one name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Named {
    latencies: BTreeMap<String, Latency>,
    error_rates: BTreeMap<String, f64>,
}

impl Named {
    /// The named services of `config`.
    pub(crate) fn of(config: &super::ServerConfig) -> Self {
        Named {
            latencies: config.latencies.clone(),
            error_rates: config.error_rates.clone(),
        }
    }

    /// The service named `name`, if it is one.
    fn get(&self, name: &str) -> Option<Service<'_>> {
        let latency = self.latencies.get(name);
        let error_rate = self.error_rates.get(name).copied();
        (latency.is_some() || error_rate.is_some()).then_some(Service {
            latency,
            error_rate,
            ..Service::default()
        })
    }

    /// Every name, in order, once.
    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .latencies
            .keys()
            .chain(self.error_rates.keys())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

enum Kind<'a> {
    Chat(wire::Prompt),
    Tool(&'a str),
}

/// Everything the server's tasks (and the handle the caller keeps) share.
pub(crate) struct Shared {
    model: Mutex<ProviderModel>,
    /// What `GET /config` answers.
    described: Described,
    named: Named,
    time_scale: f64,
    /// Real time at start; model time is the real time since, times `time_scale`.
    start: Instant,
    /// Wall-clock time since the Unix epoch at start (for `created` and Anthropic resets).
    wall_start: Duration,
    next_id: AtomicU64,
    /// What the clients did.
    pub(crate) traffic: TrafficLog,
    /// The largest request body read.
    pub(crate) max_body_bytes: usize,
}

/// `GET /stats`: the model's counters and the server's view of the clients, in one object.
#[derive(Debug, Serialize)]
struct Stats {
    #[serde(flatten)]
    counters: Counters,
    #[serde(flatten)]
    traffic: Traffic,
    /// Each phase's counters (none without phases).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    phases: Vec<Counters>,
}

impl Shared {
    /// Whether answers are timed on the precise timer: at a time scale above 1, tokio's
    /// millisecond of lateness is multiplied into the model's figures; at 1 it is not worth
    /// the CPU the precise timer spends.
    pub(crate) fn precise(&self) -> bool {
        self.time_scale > 1.0
    }

    pub(crate) fn new(
        model: ProviderModel,
        described: Described,
        named: Named,
        time_scale: f64,
        start: Instant,
        wall_start: Duration,
        max_body_bytes: usize,
    ) -> Self {
        Shared {
            model: Mutex::new(model),
            described,
            named,
            time_scale,
            start,
            wall_start,
            next_id: AtomicU64::new(1),
            traffic: TrafficLog::new(start),
            max_body_bytes,
        }
    }

    /// The model's counters.
    pub(crate) fn counters(&self) -> Counters {
        self.model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .counters()
    }

    /// Each phase's counters.
    pub(crate) fn phase_counters(&self) -> Vec<Counters> {
        self.model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .phase_counters()
            .to_vec()
    }

    /// Routes a request by method and path. Unknown paths get our own 404 body.
    pub(crate) fn route(&self, method: &Method, path: &str) -> Route {
        let post = *method == Method::POST;
        let get = *method == Method::GET;
        let model = |api, tool: Option<&str>| {
            Route::Model(Call {
                api,
                tool: tool.map(str::to_string),
            })
        };
        let answer = Route::Answer;
        match path {
            "/healthz" if get => answer(Reply {
                content_type: "text/plain",
                body: b"ok".to_vec(),
                ..Reply::json(200, &())
            }),
            "/healthz" => answer(not_allowed(Api::OpenAi, "GET", method, path)),
            "/stats" if get => answer(Reply::json(
                200,
                &Stats {
                    counters: self.counters(),
                    traffic: self.traffic.now(),
                    phases: self.phase_counters(),
                },
            )),
            "/stats" => answer(not_allowed(Api::OpenAi, "GET", method, path)),
            "/config" if get => answer(Reply::json(200, &self.described)),
            "/config" => answer(not_allowed(Api::OpenAi, "GET", method, path)),
            "/v1/chat/completions" if post => model(Api::OpenAi, None),
            "/v1/chat/completions" => answer(not_allowed(Api::OpenAi, "POST", method, path)),
            "/v1/messages" if post => model(Api::Anthropic, None),
            "/v1/messages" => answer(not_allowed(Api::Anthropic, "POST", method, path)),
            _ => match path.strip_prefix("/tools/") {
                Some(name) if !name.is_empty() && !name.contains('/') => {
                    if post {
                        model(Api::OpenAi, Some(name))
                    } else {
                        answer(not_allowed(Api::OpenAi, "POST", method, path))
                    }
                }
                _ => answer(refuse(
                    Api::OpenAi,
                    404,
                    &format!("unknown path {}", clip(path)),
                )),
            },
        }
    }

    /// Reads a request bound for the model; `Err` is the 400 message to answer instead.
    fn read<'a>(
        &'a self,
        call: &'a Call,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Ask<'a>, String> {
        let service = match header(headers, LATENCY_HEADER) {
            None => Service::default(),
            Some(name) => self.named.get(&name).ok_or_else(|| {
                let known = self.named.names();
                let known = if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                };
                format!(
                    "unknown {LATENCY_HEADER} '{}' (known: {known})",
                    clip(&name)
                )
            })?,
        };
        let from_header = match header(headers, TOKENS_HEADER) {
            None => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                format!(
                    "{TOKENS_HEADER} must be an integer in [0, {}], got '{}'",
                    u64::MAX,
                    clip(&v)
                )
            })?),
        };
        let mut service = service;
        let (kind, estimate) = match call.tool.as_deref() {
            Some(name) => (
                Kind::Tool(name),
                wire::tokens_of(u64::try_from(body.len()).unwrap_or(u64::MAX)),
            ),
            None => {
                let prompt = wire::parse_prompt(call.api, body)?;
                let cost = prompt.cost();
                // A chat request is a model call: a generating provider generates its answer,
                // at most `max_tokens` of it (0: the request set none).
                service.model_call = true;
                service.max_tokens = (prompt.max_tokens > 0).then_some(prompt.max_tokens);
                (Kind::Chat(prompt), cost)
            }
        };
        Ok(Ask {
            api: call.api,
            tokens: from_header.unwrap_or(estimate),
            service,
            kind,
        })
    }

    /// The answer to a model-facing request whose body has been read (at most
    /// the server's body limit). Nothing of the body is kept in the reply.
    pub(crate) fn model_call(&self, call: &Call, headers: &HeaderMap, body: &[u8]) -> Reply {
        let ask = match self.read(call, headers, body) {
            Ok(ask) => ask,
            Err(message) => return refuse(call.api, 400, &message),
        };
        let (decision, real) = {
            let mut model = self.model.lock().unwrap_or_else(PoisonError::into_inner);
            // Read under the lock, so the model is told times in the order it sees requests.
            let real = self.start.elapsed();
            let now = scale_duration(real, self.time_scale);
            (model.on_request_with(now, ask.tokens, ask.service), real)
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let real_decision = scaled(&decision, self.time_scale);
        let wall_now = self.wall_start.saturating_add(real);
        render(&ask, &real_decision, id, wall_now)
    }
}

/// A limit as the APIs' messages name it.
fn limit_name(limit: Limit) -> &'static str {
    match limit {
        Limit::Requests => "requests per min (RPM)",
        Limit::Tokens => "tokens per min (TPM)",
        Limit::InputTokens => "input tokens per min (ITPM)",
        Limit::OutputTokens => "output tokens per min (OTPM)",
    }
}

/// The message of a 429 for a request the limits can never admit.
fn too_large_message(ask: &Ask, limit: Limit, d: &Decision) -> String {
    let per_minute = |u: Option<Usage>| u.map_or("?".to_string(), |u| u.limit.to_string());
    let tokens = |usage: Option<Usage>, what: &str| {
        format!(
            "Request too large on {}: it asks for more {what} than the limit of {} a minute, \
             so it can never be served; they must be reduced (capsize mock provider).",
            limit_name(limit),
            per_minute(usage)
        )
    };
    match limit {
        Limit::Tokens => format!(
            "Request too large on tokens per min (TPM): it costs {} tokens, more than the limit \
             of {} tokens per minute, so it can never be served; the input or output tokens \
             must be reduced (capsize mock provider).",
            ask.tokens,
            per_minute(d.tokens)
        ),
        Limit::InputTokens => tokens(d.input_tokens, "input tokens"),
        Limit::OutputTokens => tokens(d.output_tokens, "output tokens (max_tokens)"),
        Limit::Requests => format!(
            "Request too large on requests per min (RPM): a limit of {} requests per minute \
             admits no request, so it can never be served (capsize mock provider).",
            per_minute(d.requests)
        ),
    }
}

/// The reply for a decision whose durations are already real time.
fn render(ask: &Ask, d: &Decision, id: u64, wall_now: Duration) -> Reply {
    let status = d.status();
    let body = match (d.outcome, &ask.kind) {
        (Outcome::Served, Kind::Chat(p)) => wire::served(
            ask.api,
            id,
            wall_now.as_secs(),
            p,
            d.generated.map(|g| g.output_tokens),
        ),
        (Outcome::Served, Kind::Tool(name)) => wire::tool_result(name, id),
        (Outcome::RateLimited, _) => {
            let wait = d
                .retry_after
                .map(|r| format!(" Please try again in {}.", crate::headers::go_duration(r)))
                .unwrap_or_default();
            let limit = d.limited_by.unwrap_or_else(|| refused_by(d, ask.tokens));
            let message = format!(
                "Rate limit reached on {} (capsize mock provider).{wait}",
                limit_name(limit)
            );
            wire::rate_limited(ask.api, limit, &message)
        }
        (Outcome::TooLarge(limit), _) => {
            wire::rate_limited(ask.api, limit, &too_large_message(ask, limit, d))
        }
        (Outcome::Error(503), _) => wire::error(
            ask.api,
            status,
            "The provider is unavailable (capsize mock).",
        ),
        (Outcome::Error(529), _) => wire::error(
            ask.api,
            status,
            "The provider is overloaded (capsize mock).",
        ),
        (Outcome::Error(_), _) => {
            wire::error(ask.api, status, "Internal server error (capsize mock).")
        }
        (Outcome::Timeout, _) => wire::error(ask.api, status, "Never answered."),
    };
    // Whether the quota was charged: a client books orphaned quota by it.
    let mut reply = Reply::json(status, &body)
        .header("x-request-id", format!("req_mock_{id}"))
        .header(CHARGED_HEADER, if d.charged { "true" } else { "false" });
    // Each API's own headers: OpenAI's x-ratelimit-* and retry-after-ms; Anthropic's
    // anthropic-ratelimit-* and a retry-after in whole seconds only.
    match ask.api {
        Api::OpenAi => reply.headers.extend(d.headers()),
        Api::Anthropic => {
            let retry_after = d.headers().into_iter().filter(|(k, _)| *k == "retry-after");
            reply.headers.extend(retry_after);
            reply.headers.extend(wire::anthropic_headers(d, wall_now));
            if let Some(retry) = should_retry(d.outcome) {
                reply.headers.push(("x-should-retry", retry.to_string()));
            }
        }
    }
    reply.delay = d.latency.unwrap_or(NEVER);
    // A streamed answer starts at its first token; its last token is its latency. (Not a
    // generating provider: every token at once, after the latency.)
    if let (Outcome::Served, Kind::Chat(p)) = (d.outcome, &ask.kind) {
        if p.stream {
            let (tokens, first) = match d.generated {
                Some(g) => (g.output_tokens, g.first_token),
                None => (p.max_tokens.max(1), reply.delay),
            };
            let rest = reply.delay.saturating_sub(first);
            let per_token = match tokens {
                0 | 1 => Duration::ZERO,
                n => rest / u32::try_from(n - 1).unwrap_or(u32::MAX),
            };
            let stream = Stream::new(ask.api, id, wall_now.as_secs(), p, tokens, per_token);
            reply.content_type = "text/event-stream";
            reply.body = Vec::new();
            reply.delay = first;
            reply.stream = Some(stream);
        }
    }
    reply.orphanable = d.charged && d.latency.is_some();
    reply.decided = Some(Decided {
        status,
        charged: d.charged,
        tokens: if d.charged { ask.tokens } else { 0 },
    });
    reply
}

/// The `x-should-retry` an Anthropic-shaped answer carries, as that API sends it: `true` on a
/// 429 a wait will cure and on a 500, 503 or 529; `false` on a request too large for the limit,
/// which no wait cures. The anthropic SDK obeys it before the status: it stops at `false`
/// (capsize's client models still retry it, as openai's SDK does). OpenAI's API sends none.
fn should_retry(outcome: Outcome) -> Option<bool> {
    match outcome {
        Outcome::RateLimited | Outcome::Error(_) => Some(true),
        Outcome::TooLarge(_) => Some(false),
        Outcome::Served | Outcome::Timeout => None,
    }
}

/// The limit a 429 for a request of `cost` tokens names: tokens if fewer are left than it
/// costs while a request is left, else requests (a 429 for capacity, `overload = "429"`, finds
/// both left, and names requests).
fn refused_by(d: &Decision, cost: u64) -> Limit {
    let requests_spent = d.requests.is_some_and(|u| u.remaining < 1.0);
    let tokens_short = d.tokens.is_some_and(|u| u.remaining < cost as f64);
    if tokens_short && !requests_spent {
        Limit::Tokens
    } else {
        Limit::Requests
    }
}

/// `x` rounded up to a whole millisecond.
fn ceil_ms(x: Duration) -> Duration {
    let ms = x.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// `d` with every duration divided by `scale`: from model time to real time. Retry-After is
/// rounded up to a whole millisecond, so a client that waits exactly `retry-after-ms` is
/// never early.
fn scaled(d: &Decision, scale: f64) -> Decision {
    let real = |x: Duration| divide_duration(x, scale);
    let usage = |u: Option<Usage>| {
        u.map(|u| Usage {
            reset: real(u.reset),
            ..u
        })
    };
    Decision {
        latency: d.latency.map(real),
        queued: real(d.queued),
        retry_after: d.retry_after.map(|r| ceil_ms(real(r))),
        requests: usage(d.requests),
        tokens: usage(d.tokens),
        input_tokens: usage(d.input_tokens),
        output_tokens: usage(d.output_tokens),
        generated: d.generated.map(|g| Generated {
            first_token: real(g.first_token),
            ..g
        }),
        ..d.clone()
    }
}
