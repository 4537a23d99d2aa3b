//! The responder: routes a request, works out its token cost, asks the current run's
//! [`ProviderModel`](crate::ProviderModel) (fed real time since the run began, scaled) and turns
//! the decision into a [`Reply`] (`render.rs`): status, rate-limit headers, a body in the
//! provider's own JSON shape and how long to hold the answer. Replies are data; the HTTP layer
//! (`server.rs`) reads requests and writes replies.
//!
//! Bad requests (400, 404, 405, 408, and 413 for a body over the limit) are answered
//! without reaching the model: never charged, never counted. Nothing here panics on client input.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::{HeaderMap, Method};
use serde::Serialize;
use tokio::time::Instant;

use super::describe::Described;
use super::render::{render, scaled};
use super::requests::{RequestLog, Seen, TraceSink};
use super::run::{Run, Runs};
use super::series::Decided;
use super::sse::Stream;
use super::traffic::Traffic;
use super::wire::{self, Api};
use super::ServerConfig;
use crate::latency::Latency;
use crate::limits::scale_duration;
use crate::model::{Counters, Service};

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
    /// What the model billed it, if anything: wasted if the client hangs up first.
    pub(crate) billed: Option<Box<crate::price::Bill>>,
    /// A streamed answer: its events, sent from `delay` on (the first token) instead of `body`.
    pub(crate) stream: Option<Stream>,
    /// What the model decided, for the request log (only when one is kept).
    pub(crate) seen: Option<Box<Seen>>,
}

impl Reply {
    pub(super) fn json(status: u16, body: &impl Serialize) -> Reply {
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
            billed: None,
            stream: None,
            seen: None,
        }
    }

    pub(super) fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
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
    /// OTLP traces for the trace sink, once read.
    Traces,
}

/// A request bound for the model: whose API, and the tool's name for `/tools/{name}`.
pub(crate) struct Call {
    pub(crate) api: Api,
    tool: Option<String>,
}

/// What a model-facing request asks for, once it has been read and found sound.
pub(super) struct Ask<'a> {
    pub(super) api: Api,
    pub(super) tokens: u64,
    pub(super) service: Service<'a>,
    pub(super) kind: Kind<'a>,
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

/// A chat request (its prompt) or a tool call (its name).
pub(super) enum Kind<'a> {
    Chat(wire::Prompt),
    Tool(&'a str),
}

/// Everything the server's tasks (and the handle the caller keeps) share.
pub(crate) struct Shared {
    /// The current run (model, model time, traffic), which `POST /reset` replaces.
    runs: Runs,
    /// What `GET /config` answers.
    described: Described,
    named: Named,
    time_scale: f64,
    /// Real time at start (model time is counted from the current run's start).
    pub(crate) start: Instant,
    /// Wall-clock time since the Unix epoch at start (for `created` and Anthropic resets).
    pub(crate) wall_start: Duration,
    next_id: AtomicU64,
    /// The largest request body read.
    pub(crate) max_body_bytes: usize,
    /// Where each model-facing request's record goes, if anywhere.
    pub(crate) request_log: Option<RequestLog>,
    /// Where OTLP traces posted to `/v1/traces` go, if anywhere.
    pub(crate) trace_sink: Option<TraceSink>,
}

/// `POST /reset`'s answer: the provider starts afresh, this many resets since it started.
#[derive(Debug, Serialize)]
struct Reset {
    reset: bool,
    generation: u64,
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

    /// What serves `config` (whose time scale `check` found to be `time_scale`), its model
    /// time 0 at `start`, when the wall clock read `wall_start`.
    pub(crate) fn new(
        config: ServerConfig,
        time_scale: f64,
        start: Instant,
        wall_start: Duration,
    ) -> Self {
        Shared {
            described: config.described(),
            named: Named::of(&config),
            runs: Runs::new(config.provider, config.seed, start),
            time_scale,
            start,
            wall_start,
            next_id: AtomicU64::new(1),
            max_body_bytes: config.max_body_bytes,
            request_log: config.request_log,
            trace_sink: config.trace_sink,
        }
    }

    /// The current run.
    pub(crate) fn run(&self) -> Arc<Run> {
        self.runs.current()
    }

    /// Starts the provider afresh, as if the server had just started with the same config and
    /// seed: a new model at model time 0 from now, the traffic and series cleared. Returns the
    /// number of resets so far. Requests in flight finish in the run they arrived in.
    #[allow(clippy::disallowed_methods)] // real time: model time 0 is now
    pub(crate) fn reset(&self) -> u64 {
        self.runs.reset(Instant::now())
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
            "/stats" if get => {
                let run = self.run();
                answer(Reply::json(
                    200,
                    &Stats {
                        counters: run.counters(),
                        traffic: run.traffic.now(),
                        phases: run.phase_counters(),
                    },
                ))
            }
            "/stats" => answer(not_allowed(Api::OpenAi, "GET", method, path)),
            "/report" if get => answer(Reply::json(200, &self.run().report())),
            "/report" => answer(not_allowed(Api::OpenAi, "GET", method, path)),
            "/config" if get => answer(Reply::json(200, &self.described)),
            "/config" => answer(not_allowed(Api::OpenAi, "GET", method, path)),
            "/reset" if post => {
                let generation = self.reset();
                answer(Reply::json(
                    200,
                    &Reset {
                        reset: true,
                        generation,
                    },
                ))
            }
            "/reset" => answer(not_allowed(Api::OpenAi, "POST", method, path)),
            "/v1/traces" if self.trace_sink.is_some() && post => Route::Traces,
            "/v1/traces" if self.trace_sink.is_some() => {
                answer(not_allowed(Api::OpenAi, "POST", method, path))
            }
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
                let most = self.runs.provider().max_output_tokens;
                let prompt = wire::parse_prompt(call.api, body, most)?;
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

    /// The answer of `run`'s model to a model-facing request whose body has been read (at most
    /// the server's body limit). Nothing of the body is kept in the reply.
    pub(crate) fn model_call(
        &self,
        run: &Run,
        call: &Call,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Reply {
        let ask = match self.read(call, headers, body) {
            Ok(ask) => ask,
            Err(message) => return refuse(call.api, 400, &message),
        };
        let (decision, real) = {
            let mut model = run.model();
            // Read under the lock, so the model is told times in the order it sees requests.
            let now = scale_duration(run.start.elapsed(), self.time_scale);
            let real = self.start.elapsed();
            (model.on_request_with(now, ask.tokens, ask.service), real)
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let real_decision = scaled(&decision, self.time_scale);
        let wall_now = self.wall_start.saturating_add(real);
        let mut reply = render(&ask, &real_decision, id, wall_now);
        if self.request_log.is_some() {
            let (model, input_tokens, max_tokens, tool) = match &ask.kind {
                Kind::Chat(p) => (
                    Some(p.model.clone()),
                    Some(p.prompt_tokens),
                    (p.max_tokens > 0).then_some(p.max_tokens),
                    None,
                ),
                Kind::Tool(name) => (None, None, None, Some(name.to_string())),
            };
            reply.seen = Some(Box::new(Seen {
                tool,
                model,
                status: real_decision.status(),
                first_token: real_decision.generated.map(|g| g.first_token),
                input_tokens,
                max_tokens,
                output_tokens: real_decision.generated.map(|g| g.output_tokens),
                tokens: ask.tokens,
                rpm_limit: real_decision.requests.map(|u| u.limit),
                tpm_limit: real_decision.tokens.map(|u| u.limit),
            }));
        }
        reply
    }
}
