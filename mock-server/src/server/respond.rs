//! The wiremock [`Respond`] implementation: routes a request, works out its token cost, asks the
//! [`ProviderModel`] (fed real time, scaled) and turns the decision into a [`ResponseTemplate`]:
//! status, rate-limit headers, a body in the provider's own shape and a `set_delay` for latency.
//!
//! Bad requests (404, 405, 400) are answered here without reaching the model, so they are never
//! charged. Nothing here panics on client input: a panic would drop the connection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;
use wiremock::http::Method;
use wiremock::matchers::any;
use wiremock::{Mock, Request, Respond, ResponseTemplate};

use super::rotate::Rotation;
use super::wire::{self, Api};
use crate::latency::Latency;
use crate::model::{Counters, Decision, Outcome, ProviderModel};
use crate::window::{Limit, Usage};

/// Header giving a request's token cost, overriding the body's estimate.
pub const TOKENS_HEADER: &str = "x-capsize-tokens";
/// Header naming a latency override registered in `ServerConfig::latencies`.
pub const LATENCY_HEADER: &str = "x-capsize-latency";
/// Response header saying whether the request was charged against the quota (`true`/`false`).
pub const CHARGED_HEADER: &str = "x-capsize-charged";
/// How long a request the model never answers is held: longer than any client waits.
pub const NEVER: Duration = Duration::from_secs(3600);
/// How late a tokio timer fires on average: its deadline is rounded up to the next 1 ms tick,
/// and the driver's wait is rounded up to whole milliseconds again (measured here: a 100 ms
/// delay answered after 102.1 ms on loopback, of which 0.6 ms is the HTTP round trip). A delay
/// is asked for this much shorter, so answers arrive on time on average; under a time scale
/// the error would otherwise be multiplied by the scale.
pub const TIMER_LAG: Duration = Duration::from_millis(1);

/// Everything the responder (and the handle the caller keeps) shares.
pub(crate) struct Shared {
    model: Mutex<ProviderModel>,
    latencies: BTreeMap<String, Latency>,
    time_scale: f64,
    /// Real time at start; model time is the real time since, times `time_scale`.
    start: Instant,
    /// Wall-clock time since the Unix epoch at start (for `created` and Anthropic resets).
    wall_start: Duration,
    next_id: AtomicU64,
    pub(crate) rotation: Rotation,
}

impl Shared {
    pub(crate) fn new(
        model: ProviderModel,
        latencies: BTreeMap<String, Latency>,
        time_scale: f64,
        start: Instant,
        wall_start: Duration,
    ) -> Self {
        Shared {
            model: Mutex::new(model),
            latencies,
            time_scale,
            start,
            wall_start,
            next_id: AtomicU64::new(1),
            rotation: Rotation::default(),
        }
    }

    /// The model's counters.
    pub(crate) fn counters(&self) -> Counters {
        self.model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .counters()
    }
}

/// The catch-all responder mounted on the wiremock server.
#[derive(Clone)]
pub(crate) struct Responder(pub(crate) Arc<Shared>);

/// The one mock the server has: every request, whatever its method and path, reaches the
/// responder, which routes it (so unknown paths get our own 404 body, never wiremock's).
pub(crate) fn catch_all(shared: &Arc<Shared>) -> Mock {
    Mock::given(any()).respond_with(Responder(Arc::clone(shared)))
}

fn json(status: u16, body: &impl Serialize) -> ResponseTemplate {
    // Our bodies always serialise; the fallback is only for the impossible case.
    let bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    ResponseTemplate::new(status).set_body_raw(bytes, "application/json")
}

fn refuse(api: Api, status: u16, message: &str) -> ResponseTemplate {
    json(status, &wire::error(api, status, message))
}

fn not_allowed(api: Api, allow: &str, method: &Method, path: &str) -> ResponseTemplate {
    let message = format!("method {method} not allowed on {path} (allowed: {allow})");
    refuse(api, 405, &message).insert_header("allow", allow)
}

/// A header's value as (lossy) text, trimmed, if present.
fn header(req: &Request, name: &str) -> Option<String> {
    let v = req.headers.get(name)?;
    Some(String::from_utf8_lossy(v.as_bytes()).trim().to_string())
}

/// What a model-facing request asks for, once it has been read and found sound.
struct Ask<'a> {
    api: Api,
    tokens: u64,
    latency: Option<&'a Latency>,
    kind: Kind<'a>,
}

enum Kind<'a> {
    Chat(wire::Prompt),
    Tool(&'a str),
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.0.rotation.on_request(&self.0);
        let path = req.url.path();
        let method = &req.method;
        let post = *method == Method::POST;
        let get = *method == Method::GET;
        match path {
            "/healthz" if get => ResponseTemplate::new(200).set_body_string("ok"),
            "/healthz" => not_allowed(Api::OpenAi, "GET", method, path),
            "/stats" if get => json(200, &self.0.counters()),
            "/stats" => not_allowed(Api::OpenAi, "GET", method, path),
            "/v1/chat/completions" if post => self.model_call(req, Api::OpenAi, None),
            "/v1/chat/completions" => not_allowed(Api::OpenAi, "POST", method, path),
            "/v1/messages" if post => self.model_call(req, Api::Anthropic, None),
            "/v1/messages" => not_allowed(Api::Anthropic, "POST", method, path),
            _ => match path.strip_prefix("/tools/") {
                Some(name) if !name.is_empty() && !name.contains('/') => {
                    if post {
                        self.model_call(req, Api::OpenAi, Some(name))
                    } else {
                        not_allowed(Api::OpenAi, "POST", method, path)
                    }
                }
                _ => refuse(Api::OpenAi, 404, &format!("unknown path {path}")),
            },
        }
    }
}

impl Responder {
    /// Reads a request bound for the model; `Err` is the 400 to answer instead.
    fn read<'a>(
        &'a self,
        req: &Request,
        api: Api,
        tool: Option<&'a str>,
    ) -> Result<Ask<'a>, String> {
        let latency = match header(req, LATENCY_HEADER) {
            None => None,
            Some(name) => Some(self.0.latencies.get(&name).ok_or_else(|| {
                let known: Vec<&str> = self.0.latencies.keys().map(String::as_str).collect();
                let known = if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                };
                format!("unknown {LATENCY_HEADER} '{name}' (known: {known})")
            })?),
        };
        let from_header = match header(req, TOKENS_HEADER) {
            None => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                format!("{TOKENS_HEADER} must be a non-negative integer, got '{v}'")
            })?),
        };
        let (kind, estimate) = match tool {
            Some(name) => (Kind::Tool(name), wire::tokens_of(req.body.len() as u64)),
            None => {
                let prompt = wire::parse_prompt(api, &req.body)?;
                let cost = prompt.cost();
                (Kind::Chat(prompt), cost)
            }
        };
        Ok(Ask {
            api,
            tokens: from_header.unwrap_or(estimate),
            latency,
            kind,
        })
    }

    fn model_call(&self, req: &Request, api: Api, tool: Option<&str>) -> ResponseTemplate {
        let ask = match self.read(req, api, tool) {
            Ok(ask) => ask,
            Err(message) => return refuse(api, 400, &message),
        };
        let shared = &self.0;
        let real = shared.start.elapsed();
        let now = real.mul_f64(shared.time_scale);
        let decision = shared
            .model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_request_with(now, ask.tokens, ask.latency);
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let real_decision = scaled(&decision, shared.time_scale);
        let wall_now = shared.wall_start + real;
        self.render(&ask, &real_decision, id, wall_now)
    }

    /// The response for a decision whose durations are already real time.
    fn render(&self, ask: &Ask, d: &Decision, id: u64, wall_now: Duration) -> ResponseTemplate {
        let status = d.status();
        let body = match (d.outcome, &ask.kind) {
            (Outcome::Served, Kind::Chat(p)) => wire::served(ask.api, id, wall_now.as_secs(), p),
            (Outcome::Served, Kind::Tool(name)) => wire::tool_result(name, id),
            (Outcome::RateLimited, _) => {
                let wait = d
                    .retry_after
                    .map(|r| format!(" Please try again in {}.", crate::headers::go_duration(r)))
                    .unwrap_or_default();
                let message = format!("Rate limit reached (capsize mock provider).{wait}");
                wire::error(ask.api, status, &message)
            }
            (Outcome::TooLarge(limit), _) => {
                wire::error(ask.api, status, &too_large_message(ask, limit, d))
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
        let mut t = json(status, &body)
            .insert_header("x-request-id", format!("req_mock_{id}"))
            .insert_header(CHARGED_HEADER, if d.charged { "true" } else { "false" });
        for (name, value) in d.headers() {
            t = t.insert_header(name, value);
        }
        for (name, value) in wire::anthropic_headers(d.requests, d.tokens, wall_now) {
            t = t.insert_header(name, value);
        }
        let delay = match d.latency {
            None => NEVER,
            Some(l) => l,
        };
        let delay = delay.saturating_sub(TIMER_LAG);
        if delay.is_zero() {
            t
        } else {
            t.set_delay(delay)
        }
    }
}

/// The message of a 413 for a request the limits can never admit.
fn too_large_message(ask: &Ask, limit: Limit, d: &Decision) -> String {
    let per_minute = |u: Option<Usage>| u.map_or("?".to_string(), |u| u.limit.to_string());
    match limit {
        Limit::Tokens => format!(
            "Request too large: it costs {} tokens, more than the limit of {} tokens per minute, \
             so it can never be served (capsize mock provider).",
            ask.tokens,
            per_minute(d.tokens)
        ),
        Limit::Requests => format!(
            "Request too large: a limit of {} requests per minute admits no request, so it can \
             never be served (capsize mock provider).",
            per_minute(d.requests)
        ),
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
    let real = |x: Duration| x.div_f64(scale);
    let usage = |u: Option<crate::window::Usage>| {
        u.map(|u| crate::window::Usage {
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
        ..d.clone()
    }
}
