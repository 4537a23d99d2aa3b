//! Streamed answers: a served chat request that asked for `"stream": true` gets Server-Sent
//! Events, one per output token, paced as the model generated them: the response starts at the
//! first token, and each next token follows one time-per-token later.
//!
//! - OpenAI (`/v1/chat/completions`): `chat.completion.chunk` objects, the first with the
//!   assistant role, one `delta.content` a token, a last one with `finish_reason` (`"stop"`, or
//!   `"length"` when `max_tokens` cut the answer, as a whole answer says), a usage chunk (empty `choices`) when the
//!   request set `stream_options.include_usage`, then `data: [DONE]`.
//! - Anthropic (`/v1/messages`): `message_start` (its usage: the input tokens, one output
//!   token), `content_block_start`, one `content_block_delta` a token, `content_block_stop`,
//!   `message_delta` with `stop_reason` (`"end_turn"` or `"max_tokens"`) and the output tokens
//!   generated, `message_stop`.
//!
//! Events are made one at a time as the body is read: a long answer costs no memory. A streamed
//! request counts as in flight (`/stats`, the per-second series) until its last event is sent,
//! or until its client goes away.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::traffic::Visit;
use super::wire::{Api, Prompt};

/// The text of each streamed token.
const TOKEN: &str = "tok ";

/// A streamed answer, as data: what its events say and how they are paced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stream {
    api: Api,
    id: u64,
    created_secs: u64,
    model: String,
    prompt_tokens: u64,
    /// Output tokens generated (at least 1).
    tokens: u64,
    /// Why the answer ended ([`Prompt::stop_reason`]).
    reason: &'static str,
    include_usage: bool,
    /// Between two tokens, in real time.
    per_token: Duration,
}

impl Stream {
    /// The stream of `tokens` output tokens for the request `p`, `per_token` apart.
    pub(crate) fn new(
        api: Api,
        id: u64,
        created_secs: u64,
        p: &Prompt,
        tokens: u64,
        per_token: Duration,
    ) -> Stream {
        Stream {
            api,
            id,
            created_secs,
            model: p.model.clone(),
            prompt_tokens: p.prompt_tokens,
            tokens: tokens.max(1),
            reason: p.stop_reason(api, tokens),
            include_usage: p.include_usage,
            per_token,
        }
    }

    /// The events of token `k` (0-based): the opening events with the first, the closing
    /// ones with the last.
    fn events(&self, k: u64) -> Bytes {
        let mut out = String::new();
        let last = k + 1 == self.tokens;
        match self.api {
            Api::OpenAi => {
                if k == 0 {
                    self.chunk(
                        &mut out,
                        json!({ "role": "assistant", "content": "" }),
                        None,
                    );
                }
                self.chunk(&mut out, json!({ "content": TOKEN }), None);
                if last {
                    self.chunk(&mut out, json!({}), Some(self.reason));
                    if self.include_usage {
                        let mut usage = self.openai_base();
                        usage["choices"] = json!([]);
                        usage["usage"] = json!({
                            "prompt_tokens": self.prompt_tokens,
                            "completion_tokens": self.tokens,
                            "total_tokens": self.prompt_tokens.saturating_add(self.tokens),
                        });
                        data(&mut out, None, &usage);
                    }
                    out.push_str("data: [DONE]\n\n");
                }
            }
            Api::Anthropic => {
                if k == 0 {
                    let start = json!({ "type": "message_start", "message": {
                        "id": format!("msg_mock_{}", self.id), "type": "message",
                        "role": "assistant", "model": self.model, "content": [],
                        "stop_reason": null, "stop_sequence": null,
                        "usage": { "input_tokens": self.prompt_tokens, "output_tokens": 1 } } });
                    data(&mut out, Some("message_start"), &start);
                    let block = json!({ "type": "content_block_start", "index": 0,
                        "content_block": { "type": "text", "text": "" } });
                    data(&mut out, Some("content_block_start"), &block);
                }
                let delta = json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "text_delta", "text": TOKEN } });
                data(&mut out, Some("content_block_delta"), &delta);
                if last {
                    let stop = json!({ "type": "content_block_stop", "index": 0 });
                    data(&mut out, Some("content_block_stop"), &stop);
                    let end = json!({ "type": "message_delta",
                        "delta": { "stop_reason": self.reason, "stop_sequence": null },
                        "usage": { "output_tokens": self.tokens } });
                    data(&mut out, Some("message_delta"), &end);
                    data(
                        &mut out,
                        Some("message_stop"),
                        &json!({ "type": "message_stop" }),
                    );
                }
            }
        }
        Bytes::from(out)
    }

    fn openai_base(&self) -> Value {
        json!({
            "id": format!("chatcmpl-mock-{}", self.id),
            "object": "chat.completion.chunk",
            "created": self.created_secs,
            "model": self.model,
        })
    }

    /// One OpenAI chunk with `delta` (and `usage: null` when a usage chunk will follow).
    fn chunk(&self, out: &mut String, delta: Value, finish: Option<&str>) {
        let mut c = self.openai_base();
        c["choices"] = json!([{ "index": 0, "delta": delta, "logprobs": null,
            "finish_reason": finish }]);
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        data(out, None, &c);
    }

    /// Every event at once (for a face that cannot pace a body: wiremock).
    #[cfg(feature = "wiremock")]
    pub(crate) fn whole(&self) -> Vec<u8> {
        (0..self.tokens).flat_map(|k| self.events(k)).collect()
    }

    /// From the first token to the last.
    #[cfg(feature = "wiremock")]
    pub(crate) fn duration(&self) -> Duration {
        let gaps = u32::try_from(self.tokens - 1).unwrap_or(u32::MAX);
        self.per_token.saturating_mul(gaps)
    }

    /// The body: token `k`'s events at `first + k x per_token`. `visit` (the request's place
    /// among those in flight) is held until the last event is sent or the body is dropped.
    pub(crate) fn body(self, first: Instant, precise: bool, visit: Option<Visit>) -> SseBody {
        SseBody {
            stream: self,
            first,
            next: 0,
            precise,
            sleep: None,
            visit,
        }
    }
}

/// One event: an optional `event:` line, a `data:` line, a blank line.
fn data(out: &mut String, event: Option<&str>, v: &Value) {
    if let Some(e) = event {
        out.push_str("event: ");
        out.push_str(e);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&v.to_string());
    out.push_str("\n\n");
}

/// A streamed answer's body, paced on the precise timer.
pub(crate) struct SseBody {
    stream: Stream,
    first: Instant,
    /// The next token to send.
    next: u64,
    /// Paced on the precise timer (else tokio's).
    precise: bool,
    sleep: Option<Pin<Box<capsize_timer::Sleep>>>,
    /// The request in flight until its last event is sent (or the client goes away).
    visit: Option<Visit>,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.next >= this.stream.tokens {
            return Poll::Ready(None);
        }
        let k = u32::try_from(this.next).unwrap_or(u32::MAX);
        let at = this.first + this.stream.per_token.saturating_mul(k);
        let precise = this.precise;
        let sleep = this.sleep.get_or_insert_with(|| {
            Box::pin(match precise {
                true => capsize_timer::sleep_until(at),
                false => capsize_timer::coarse_sleep_until(at),
            })
        });
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        this.sleep = None;
        let events = this.stream.events(this.next);
        this.next += 1;
        if this.next >= this.stream.tokens {
            // The last event: the request leaves the ones in flight as it is sent.
            this.visit = None;
        }
        Poll::Ready(Some(Ok(Frame::data(events))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.stream.tokens
    }
}
