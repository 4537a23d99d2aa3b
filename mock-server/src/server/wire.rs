//! What goes over the wire: the request bodies the mock reads (and their token estimate), the
//! response bodies it writes in each provider's own JSON shape, and the Anthropic rate-limit
//! headers (RFC 3339 reset instants).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::model::Decision;
use crate::window::Limit;

/// The reply every served chat request gets.
pub const REPLY: &str = "This is a reply from the capsize mock provider.";

/// Whose API a request came through: it decides the shape of the error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI-compatible (`/v1/chat/completions`, tools, everything else).
    OpenAi,
    /// Anthropic-compatible (`/v1/messages`).
    Anthropic,
}

/// One message of a chat request; only its text counts.
#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<Content>,
}

/// A message's content: a string, or a list of parts whose `text` counts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    fn chars(&self) -> u64 {
        let count = |t: &str| u64::try_from(t.chars().count()).unwrap_or(u64::MAX);
        match self {
            Content::Text(t) => count(t),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.text.as_deref())
                .fold(0, |n, t| n.saturating_add(count(t))),
        }
    }
}

#[derive(Debug, Deserialize)]
struct ChatRequest {
    model: String,
    messages: Vec<Message>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

/// OpenAI's `stream_options`: whether a streamed answer ends with a usage chunk.
#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct MessagesRequest {
    model: String,
    messages: Vec<Message>,
    max_tokens: u64,
    #[serde(default)]
    system: Option<Content>,
    #[serde(default)]
    stream: Option<bool>,
}

/// A chat request as the mock sees it: the model named and the tokens it would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The `model` field, echoed back.
    pub model: String,
    /// Prompt tokens: the characters of every message (and system prompt) / 4, rounded up.
    pub prompt_tokens: u64,
    /// `max_tokens` (or OpenAI's `max_completion_tokens`), 0 if absent.
    pub max_tokens: u64,
    /// `"stream": true`: the answer comes as Server-Sent Events, token by token.
    pub stream: bool,
    /// OpenAI's `stream_options.include_usage`: the stream ends with a usage chunk.
    pub include_usage: bool,
    /// The most output tokens the answer may have: `max_tokens`, else the provider's
    /// `max_output_tokens`. An answer that reaches it was cut (see [`Prompt::stop_reason`]).
    pub limit: u64,
}

impl Prompt {
    /// The request's token cost when no `x-capsize-tokens` header says otherwise.
    pub fn cost(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.max_tokens)
    }

    /// Why an answer of `output` tokens ended, in `api`'s words: cut at its limit (OpenAI's
    /// `length`, Anthropic's `max_tokens`) or finished (`stop`, `end_turn`). One rule for whole
    /// and streamed answers.
    pub fn stop_reason(&self, api: Api, output: u64) -> &'static str {
        match (api, output >= self.limit) {
            (Api::OpenAi, true) => "length",
            (Api::OpenAi, false) => "stop",
            (Api::Anthropic, true) => "max_tokens",
            (Api::Anthropic, false) => "end_turn",
        }
    }
}

/// Checks a request's `max_tokens` (named `key`, as the request wrote it) against what the APIs
/// accept: at least 1, at most `most` (the provider's `max_output_tokens`). The error is the
/// API's own one-line message.
fn check_max_tokens(
    api: Api,
    key: &str,
    model: &str,
    max_tokens: u64,
    most: u64,
) -> Result<(), String> {
    match api {
        Api::OpenAi if max_tokens == 0 => Err(format!(
            "Invalid '{key}': integer below minimum value. Expected a value >= 1, but got 0 \
             instead."
        )),
        Api::OpenAi if max_tokens > most => Err(format!(
            "{key} is too large: {max_tokens}. This model supports at most {most} completion \
             tokens, whereas you provided {max_tokens}."
        )),
        Api::Anthropic if max_tokens == 0 => {
            Err(format!("{key}: Input should be greater than or equal to 1"))
        }
        Api::Anthropic if max_tokens > most => Err(format!(
            "{key}: {max_tokens} > {most}, which is the maximum allowed number of output \
             tokens for {}",
            super::respond::clip(model)
        )),
        _ => Ok(()),
    }
}

/// `n` characters as tokens: a quarter, rounded up.
pub fn tokens_of(chars: u64) -> u64 {
    chars.div_ceil(4)
}

fn sum_chars<'a>(contents: impl Iterator<Item = &'a Content>) -> u64 {
    contents.fold(0, |n, c| n.saturating_add(c.chars()))
}

/// Reads a request body of `api` for a provider whose `max_output_tokens` is `most`; the
/// error is serde's one-line reason, or the API's own for a `max_tokens` of 0 or above `most`.
pub fn parse_prompt(api: Api, body: &[u8], most: u64) -> Result<Prompt, String> {
    let clean = |e: serde_json::Error| format!("invalid request body: {e}");
    Ok(match api {
        Api::OpenAi => {
            let r: ChatRequest = serde_json::from_slice(body).map_err(clean)?;
            let chars = sum_chars(r.messages.iter().filter_map(|m| m.content.as_ref()));
            let asked = match (r.max_tokens, r.max_completion_tokens) {
                (Some(n), _) => Some(("max_tokens", n)),
                (None, Some(n)) => Some(("max_completion_tokens", n)),
                (None, None) => None,
            };
            if let Some((key, n)) = asked {
                check_max_tokens(api, key, &r.model, n, most)?;
            }
            Prompt {
                model: r.model,
                prompt_tokens: tokens_of(chars),
                max_tokens: asked.map_or(0, |(_, n)| n),
                stream: r.stream.unwrap_or(false),
                include_usage: r
                    .stream_options
                    .and_then(|o| o.include_usage)
                    .unwrap_or(false),
                limit: asked.map_or(most, |(_, n)| n),
            }
        }
        Api::Anthropic => {
            let r: MessagesRequest = serde_json::from_slice(body).map_err(clean)?;
            check_max_tokens(api, "max_tokens", &r.model, r.max_tokens, most)?;
            let contents = r.messages.iter().filter_map(|m| m.content.as_ref());
            let chars = sum_chars(contents.chain(r.system.as_ref()));
            Prompt {
                model: r.model,
                prompt_tokens: tokens_of(chars),
                max_tokens: r.max_tokens,
                stream: r.stream.unwrap_or(false),
                include_usage: false,
                limit: r.max_tokens,
            }
        }
    })
}

/// The body of a served chat request. Its usage reports the prompt estimate, and the output
/// tokens a generating provider drew (`generated`), else `max_tokens` (what the quota was
/// charged); its finish reason is [`Prompt::stop_reason`]'s.
pub fn served(api: Api, id: u64, created_secs: u64, p: &Prompt, generated: Option<u64>) -> Value {
    let output = generated.unwrap_or(p.max_tokens);
    let reason = p.stop_reason(api, output);
    match api {
        Api::OpenAi => json!({
            "id": format!("chatcmpl-mock-{id}"),
            "object": "chat.completion",
            "created": created_secs,
            "model": p.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": REPLY, "refusal": null },
                "logprobs": null,
                "finish_reason": reason,
            }],
            "usage": {
                "prompt_tokens": p.prompt_tokens,
                "completion_tokens": output,
                "total_tokens": p.prompt_tokens.saturating_add(output),
            },
        }),
        Api::Anthropic => json!({
            "id": format!("msg_mock_{id}"),
            "type": "message",
            "role": "assistant",
            "model": p.model,
            "content": [{ "type": "text", "text": REPLY }],
            "stop_reason": reason,
            "stop_sequence": null,
            "usage": { "input_tokens": p.prompt_tokens, "output_tokens": output },
        }),
    }
}

/// The body of a served tool call.
pub fn tool_result(name: &str, id: u64) -> Value {
    json!({ "id": format!("tool-mock-{id}"), "tool": name, "ok": true, "result": "mock tool result" })
}

/// A 429 body in `api`'s shape for a refusal by `limit`: OpenAI names the limit in `type`
/// (`requests` or `tokens`, as its API does), Anthropic's is a `rate_limit_error`.
pub fn rate_limited(api: Api, limit: Limit, message: &str) -> Value {
    match api {
        Api::OpenAi => {
            let kind = match limit {
                Limit::Requests => "requests",
                // OpenAI has no split token limits: a mock that has them names tokens.
                Limit::Tokens | Limit::InputTokens | Limit::OutputTokens => "tokens",
            };
            json!({ "error": { "message": message, "type": kind, "param": null, "code": "rate_limit_exceeded" } })
        }
        Api::Anthropic => error(api, 429, message),
    }
}

/// An error body in `api`'s shape for HTTP `status`.
pub fn error(api: Api, status: u16, message: &str) -> Value {
    match api {
        Api::OpenAi => {
            let (kind, code) = match status {
                429 => ("rate_limit_exceeded", json!("rate_limit_exceeded")),
                404 => ("invalid_request_error", json!("unknown_url")),
                405 => ("invalid_request_error", json!("method_not_allowed")),
                413 => ("invalid_request_error", json!("request_too_large")),
                400..=499 => ("invalid_request_error", Value::Null),
                503 => ("service_unavailable", Value::Null),
                529 => ("overloaded", Value::Null),
                504 => ("timeout", Value::Null),
                _ => ("server_error", Value::Null),
            };
            json!({ "error": { "message": message, "type": kind, "param": null, "code": code } })
        }
        Api::Anthropic => {
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                404 => "not_found_error",
                413 => "request_too_large",
                400..=499 => "invalid_request_error",
                504 => "timeout_error",
                _ => "api_error",
            };
            json!({ "type": "error", "error": { "type": kind, "message": message } })
        }
    }
}

/// Anthropic's `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
/// remaining,reset}` headers for the limits `d` has; `now` is the wall-clock time since the
/// Unix epoch, each reset is `now` plus the (real) reset delay.
pub fn anthropic_headers(d: &Decision, now: Duration) -> Vec<(&'static str, String)> {
    let mut h = Vec::new();
    let dims = [
        (
            d.requests,
            [
                "anthropic-ratelimit-requests-limit",
                "anthropic-ratelimit-requests-remaining",
                "anthropic-ratelimit-requests-reset",
            ],
        ),
        (
            d.tokens,
            [
                "anthropic-ratelimit-tokens-limit",
                "anthropic-ratelimit-tokens-remaining",
                "anthropic-ratelimit-tokens-reset",
            ],
        ),
        (
            d.input_tokens,
            [
                "anthropic-ratelimit-input-tokens-limit",
                "anthropic-ratelimit-input-tokens-remaining",
                "anthropic-ratelimit-input-tokens-reset",
            ],
        ),
        (
            d.output_tokens,
            [
                "anthropic-ratelimit-output-tokens-limit",
                "anthropic-ratelimit-output-tokens-remaining",
                "anthropic-ratelimit-output-tokens-reset",
            ],
        ),
    ];
    for (usage, [limit, remaining, reset]) in dims {
        if let Some(u) = usage {
            h.push((limit, format!("{}", u.limit.floor())));
            h.push((remaining, format!("{}", u.remaining.max(0.0).floor())));
            h.push((reset, rfc3339(now.saturating_add(u.reset))));
        }
    }
    h
}

/// A time since the Unix epoch as RFC 3339 in UTC, whole seconds rounded up: `2025-01-31T12:00:05Z`.
pub fn rfc3339(since_epoch: Duration) -> String {
    let secs = since_epoch
        .as_secs()
        .saturating_add(u64::from(since_epoch.subsec_nanos() > 0));
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // At most u64::MAX / 86,400 days: well within i64.
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(i64::MAX / 2));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) of the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // A day in 1..=31 and a month in 1..=12: the casts cannot truncate.
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339(Duration::ZERO), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(Duration::from_millis(1_735_689_599_001)),
            "2025-01-01T00:00:00Z"
        );
        assert_eq!(
            rfc3339(Duration::from_secs(4_102_444_800)),
            "2100-01-01T00:00:00Z"
        );
    }

    #[test]
    fn prompt_tokens_round_up_and_count_parts_and_system() {
        let body = br#"{"model":"m","max_tokens":10,"system":"abcde",
            "messages":[{"role":"user","content":[{"type":"text","text":"abc"}]}]}"#;
        let p = parse_prompt(Api::Anthropic, body, 100).unwrap();
        assert_eq!((p.prompt_tokens, p.max_tokens, p.cost()), (2, 10, 12));
        let body = br#"{"model":"m","messages":[{"role":"user","content":"abcd"},
            {"role":"assistant","content":null}],"max_completion_tokens":3}"#;
        let p = parse_prompt(Api::OpenAi, body, 100).unwrap();
        assert_eq!((p.prompt_tokens, p.max_tokens), (1, 3));
    }

    #[test]
    fn missing_fields_are_named() {
        let e = parse_prompt(Api::OpenAi, br#"{"model":"m"}"#, 100).unwrap_err();
        assert!(e.contains("messages"), "{e}");
        let e = parse_prompt(Api::Anthropic, br#"{"model":"m","messages":[]}"#, 100).unwrap_err();
        assert!(e.contains("max_tokens"), "{e}");
    }
}
