//! From a decision to a reply: the status, the rate-limit headers of each API, a body in the
//! provider's own JSON shape (or a stream of events), and how long to hold the answer. Every
//! duration of a decision is model time; [`scaled`] turns them into real time first.

use std::time::Duration;

use super::respond::{Ask, Kind, Reply, CHARGED_HEADER, NEVER};
use super::series::Decided;
use super::sse::Stream;
use super::wire::{self, Api};
use crate::limits::divide_duration;
use crate::model::{Decision, Generated, Outcome};
use crate::window::{Limit, Usage};

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
pub(super) fn render(ask: &Ask, d: &Decision, id: u64, wall_now: Duration) -> Reply {
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
    // What it was billed: a client books what it used by it.
    if let Some(b) = &d.bill {
        reply = reply.header(crate::price::BILL_HEADER, b.header());
    }
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
    reply.billed = d.bill.clone();
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
pub(super) fn scaled(d: &Decision, scale: f64) -> Decision {
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
