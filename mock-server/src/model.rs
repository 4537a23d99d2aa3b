//! The provider model: a rate-limited LLM API as a clockless state machine.
//!
//! Each request is told its arrival time (a `Duration` since the model started) and its token
//! cost, and gets a [`Decision`]: served after a latency, refused with a 429 (and when to retry),
//! failed with a 5xx/529, never answered, or refused with a 429 "Request too large" without
//! Retry-After when no wait could ever make it fit (as the APIs answer it). The order of checks: size (a request larger than the limits can ever admit), then
//! capacity (`max_in_flight` with a rejecting `overload`), then quota (charged at arrival, as
//! real providers do, even if the caller later gives up), then the request's fate (error,
//! timeout or service), then its place among the `max_in_flight` servers (queueing adds to its
//! latency).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::{ClockFrom, Overload, ProviderConfig, RetryAfter};
use crate::headers::go_duration;
use crate::latency::Latency;
use crate::limits::duration_from_ms;
use crate::phases::{self, Outage};
use crate::price::Bill;
use crate::split::{Split, SplitLimits};
use crate::window::{Limit, Usage, Window};

/// How a request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served.
    Served,
    /// 429: over quota (or over capacity with `overload = "429"`).
    RateLimited,
    /// A 500, 503 or 529.
    Error(u16),
    /// Never answered: the client's timeout ends it.
    Timeout,
    /// Larger than this limit can ever admit (a request costing more tokens than `tpm`), under
    /// every window kind: a 429 "Request too large", as the APIs answer it, but without a
    /// Retry-After, since no wait helps (a client that retries it spends its retries). Not
    /// charged; counted as [`Counters::rate_limited`].
    TooLarge(Limit),
}

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// How it ends.
    pub outcome: Outcome,
    /// Time from arrival to the answer; `None` for a request never answered.
    pub latency: Option<Duration>,
    /// Whether the request was charged against the quota (everything not refused).
    pub charged: bool,
    /// Time it waited for one of the `max_in_flight` servers (part of `latency`).
    pub queued: Duration,
    /// The wait a 429 (or a capacity 503) asks for, if the provider sends one.
    pub retry_after: Option<Duration>,
    /// Request quota after this request, if requests are limited.
    pub requests: Option<Usage>,
    /// Token quota after this request, if tokens are limited.
    pub tokens: Option<Usage>,
    /// Input-token quota (`itpm`) after this request, if input tokens are limited.
    pub input_tokens: Option<Usage>,
    /// Output-token quota (`otpm`) after this request, if output tokens are limited.
    pub output_tokens: Option<Usage>,
    /// The limit that refused a 429 whose limit the usage alone cannot tell (input or output
    /// tokens); `None` for the others (requests, tokens, capacity).
    pub limited_by: Option<Limit>,
    /// A generated answer (a model call to a generating provider, served): its output tokens
    /// and when its first token is ready, from arrival (queueing included).
    pub generated: Option<Generated>,
    /// What this request was billed, if it was (a provider with a `price`; see
    /// [`crate::price`]). Boxed: most providers bill nothing, and a decision is moved often.
    pub bill: Option<Box<Bill>>,
}

/// What a generating provider made of a model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generated {
    /// Output tokens: the provider's draw, capped at the request's `max_tokens` and at the
    /// provider's `max_output_tokens`.
    pub output_tokens: u64,
    /// From arrival to the first token (the answer's `latency` is to the last).
    pub first_token: Duration,
}

impl Decision {
    /// The HTTP status (a timeout has none; 504 stands for it).
    pub fn status(&self) -> u16 {
        match self.outcome {
            Outcome::Served => 200,
            Outcome::RateLimited => 429,
            Outcome::Error(s) => s,
            Outcome::Timeout => 504,
            Outcome::TooLarge(_) => 429,
        }
    }

    /// Retry-After and OpenAI-style rate-limit headers, names in lower case, in a fixed order.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = Vec::new();
        if let Some(d) = self.retry_after {
            h.push(("retry-after", d.as_secs_f64().ceil().to_string()));
            h.push(("retry-after-ms", d.as_millis().to_string()));
        }
        let dims = [
            (
                self.requests,
                [
                    "x-ratelimit-limit-requests",
                    "x-ratelimit-remaining-requests",
                    "x-ratelimit-reset-requests",
                ],
            ),
            (
                self.tokens,
                [
                    "x-ratelimit-limit-tokens",
                    "x-ratelimit-remaining-tokens",
                    "x-ratelimit-reset-tokens",
                ],
            ),
        ];
        for (usage, [limit, remaining, reset]) in dims {
            if let Some(u) = usage {
                h.push((limit, format!("{}", u.limit.floor())));
                h.push((remaining, format!("{}", u.remaining.floor())));
                h.push((reset, go_duration(u.reset)));
            }
        }
        h
    }
}

/// What one kind of request asks of the provider beyond its tokens: the service time and the
/// error rate of that kind of call (a model turn slower than a tool call; a flaky tool), where
/// they are not the provider's own. The default is the provider's own for both.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Service<'a> {
    /// The service time's distribution instead of the provider's.
    pub latency: Option<&'a Latency>,
    /// The share of accepted requests that fail instead of the provider's `error_rate`
    /// (split over the statuses as the provider's `error_mix` says).
    pub error_rate: Option<f64>,
    /// A model call (not a tool call): a generating provider generates its answer (see
    /// [`crate::config::Generation`]) instead of drawing `latency`.
    pub model_call: bool,
    /// A model call's `max_tokens`: the most output tokens it may get (`None`: the provider's
    /// `max_output_tokens`).
    pub max_tokens: Option<u64>,
}

impl<'a> Service<'a> {
    /// The provider's own service, with the latency drawn from `latency` where it is given.
    pub fn latency(latency: Option<&'a Latency>) -> Self {
        Service {
            latency,
            ..Service::default()
        }
    }
}

/// What the model has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Requests received.
    pub received: u64,
    /// Requests served (200).
    pub served: u64,
    /// Requests refused with 429: over quota, and larger than the limits can ever admit
    /// ([`Outcome::TooLarge`]).
    pub rate_limited: u64,
    /// Requests failed with 500/503/529 (including capacity 503s).
    /// So `received = served + rate_limited + errored + timed_out` always holds.
    pub errored: u64,
    /// Requests never answered.
    pub timed_out: u64,
    /// Tokens charged against the quota (saturating at `u64::MAX`).
    pub tokens_charged: u64,
    /// What was billed (see [`crate::price`]); written only when something was.
    #[serde(
        default,
        skip_serializing_if = "Bill::is_empty",
        deserialize_with = "crate::price::lenient_bill"
    )]
    pub billed: Bill,
}

impl Counters {
    /// Both counts added: what two providers saw together.
    pub fn plus(self, o: Counters) -> Counters {
        Counters {
            received: self.received + o.received,
            served: self.served + o.served,
            rate_limited: self.rate_limited + o.rate_limited,
            errored: self.errored + o.errored,
            timed_out: self.timed_out + o.timed_out,
            tokens_charged: self.tokens_charged.saturating_add(o.tokens_charged),
            billed: self.billed.plus(o.billed),
        }
    }

    /// What was counted since `before` (an earlier reading of the same counters).
    pub fn since(self, before: Counters) -> Counters {
        Counters {
            received: self.received.saturating_sub(before.received),
            served: self.served.saturating_sub(before.served),
            rate_limited: self.rate_limited.saturating_sub(before.rate_limited),
            errored: self.errored.saturating_sub(before.errored),
            timed_out: self.timed_out.saturating_sub(before.timed_out),
            tokens_charged: self.tokens_charged.saturating_sub(before.tokens_charged),
            billed: self.billed.since(before.billed),
        }
    }
}

/// A rate-limited LLM API with no clock.
#[derive(Debug, Clone)]
pub struct ProviderModel {
    config: ProviderConfig,
    window: Window,
    /// `itpm` and `otpm`.
    split: SplitLimits,
    rng: Xoshiro256PlusPlus,
    /// `max_in_flight` and when each server used so far is next free; a server not in the heap
    /// has never been used (it is free), so the heap only grows as requests arrive.
    servers: Option<(usize, BinaryHeap<Reverse<Duration>>)>,
    counters: Counters,
    /// The phase in force at the last request (`None`: the provider's own table).
    phase: Option<usize>,
    /// What each phase saw.
    phase_counters: Vec<Counters>,
    /// Whether decisions carry the limits' usage (see [`ProviderModel::without_usage`]).
    usage: bool,
    /// When the first request came, for a clock from it (`clock_from = "first_request"`).
    origin: Option<Duration>,
}

/// The provider in force: `phase`'s, or `config`'s own.
fn in_force(config: &ProviderConfig, phase: Option<usize>) -> &ProviderConfig {
    phase.map_or(config, |i| &config.phases[i].config)
}

/// `max_in_flight` servers, keeping `kept`'s busy ones: with fewer servers than are busy, those
/// that free up first are let go, so the next request waits for the n-th latest to free.
fn servers(
    max_in_flight: Option<u32>,
    kept: Option<(usize, BinaryHeap<Reverse<Duration>>)>,
) -> Option<(usize, BinaryHeap<Reverse<Duration>>)> {
    // At least one server (0 only comes from a configuration built by hand).
    let n = usize::try_from(max_in_flight?.max(1)).unwrap_or(usize::MAX);
    let mut heap = kept.map(|(_, h)| h).unwrap_or_default();
    while heap.len() > n {
        heap.pop();
    }
    Some((n, heap))
}

impl ProviderModel {
    /// A model of `config`, its randomness seeded by `seed`, at time 0 with nothing used.
    pub fn new(config: ProviderConfig, seed: u64) -> Self {
        ProviderModel {
            window: Window::new(config.window, config.rpm, config.tpm),
            split: SplitLimits::new(config.window, config.itpm, config.otpm),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            servers: servers(config.max_in_flight, None),
            counters: Counters::default(),
            phase: None,
            phase_counters: vec![Counters::default(); config.phases.len()],
            config,
            usage: true,
            origin: None,
        }
    }

    /// The same model, its decisions carrying no usage of the limits (`requests`, `tokens`,
    /// `input_tokens` and `output_tokens` are `None`): for a caller that sends no rate-limit
    /// headers, such as capsize's in-process provider, which then pays nothing for them.
    /// Everything else decided is the same.
    pub fn without_usage(mut self) -> Self {
        self.usage = false;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    fn refuse(
        &mut self,
        now: Duration,
        outcome: Outcome,
        retry_after: Option<Duration>,
    ) -> Decision {
        // Read even when not reported: reading brings the windows to `now`, and a token
        // bucket brought there in two steps rounds otherwise than in one.
        let (mut requests, mut tokens) = self.window.usage(now);
        let (mut input_tokens, mut output_tokens) = self.split.usage(now);
        if !self.usage {
            (requests, tokens, input_tokens, output_tokens) = (None, None, None, None);
        }
        match outcome {
            Outcome::RateLimited | Outcome::TooLarge(_) => self.counters.rate_limited += 1,
            Outcome::Timeout => self.counters.timed_out += 1,
            _ => self.counters.errored += 1,
        }
        Decision {
            outcome,
            // Refused at once, or (an outage with no answer) never.
            latency: (outcome != Outcome::Timeout).then_some(Duration::ZERO),
            charged: false,
            queued: Duration::ZERO,
            retry_after,
            requests,
            tokens,
            input_tokens,
            output_tokens,
            limited_by: match outcome {
                Outcome::TooLarge(limit) => Some(limit),
                _ => None,
            },
            generated: None,
            bill: None,
        }
    }

    /// [`ProviderModel::refuse`] with a 429 from `limit`, which asks to wait `fits_in` (per
    /// the provider's `retry_after`).
    fn limited(
        &mut self,
        now: Duration,
        limit: Option<Limit>,
        fits_in: Duration,
        retry_after: RetryAfter,
    ) -> Decision {
        let retry_after = match retry_after {
            RetryAfter::Auto => Some(fits_in),
            RetryAfter::Fixed(d) => Some(d),
            RetryAfter::None => None,
        };
        let mut d = self.refuse(now, Outcome::RateLimited, retry_after);
        d.limited_by = limit;
        d
    }

    /// Decides the fate of a request of `tokens` arriving at `now`.
    pub fn on_request(&mut self, now: Duration, tokens: u64) -> Decision {
        self.on_request_with(now, tokens, Service::default())
    }

    /// Each phase's counters, in the phases' order (requests counted in the phase in force
    /// at their arrival).
    pub fn phase_counters(&self) -> &[Counters] {
        &self.phase_counters
    }

    /// As [`ProviderModel::on_request`], served as `service` says: its latency and error rate
    /// instead of the provider's own where it gives them (a model turn, say, slower than a
    /// tool call). The draws are the same either way, so a seed gives the same stream.
    pub fn on_request_with(&mut self, now: Duration, tokens: u64, asked: Service<'_>) -> Decision {
        let now = match self.config.clock_from {
            ClockFrom::Start => now,
            ClockFrom::FirstRequest => now.saturating_sub(*self.origin.get_or_insert(now)),
        };
        // Answers completed by now settle their output tokens first (none to settle without
        // split limits).
        if !self.split.is_unlimited() {
            self.split.settle_until(now);
        }
        if self.config.phases.is_empty() {
            return self.decide(now, tokens, asked, None);
        }
        let (phase, began) = phases::at(&self.config.phases, now);
        if phase != self.phase {
            self.enter(began, phase);
        }
        let before = self.counters;
        let decision = self.decide(now, tokens, asked, phase);
        if let Some(i) = phase {
            self.phase_counters[i] = self.phase_counters[i].plus(self.counters.since(before));
        }
        decision
    }

    /// Puts the limits and the capacity of `phase` (or the provider's own) in force from
    /// `began`, the instant it began (the window refills at the old rates until then, not
    /// until the request that found it): what the window has counted stays counted.
    fn enter(&mut self, began: Duration, phase: Option<usize>) {
        self.phase = phase;
        let cfg = in_force(&self.config, phase);
        self.window.set_limits(began, cfg.rpm, cfg.tpm);
        self.split.set_limits(began, cfg.itpm, cfg.otpm);
        self.servers = servers(cfg.max_in_flight, self.servers.take());
    }

    fn decide(
        &mut self,
        now: Duration,
        tokens: u64,
        asked: Service<'_>,
        phase: Option<usize>,
    ) -> Decision {
        self.counters.received += 1;
        let (outage, own_latency, own_error_rate) = match phase {
            Some(i) => {
                let p = &self.config.phases[i];
                (p.outage, p.sets_latency, p.sets_error_rate)
            }
            None => (None, false, false),
        };
        match outage {
            Some(Outage::Unavailable) => return self.refuse(now, Outcome::Error(503), None),
            Some(Outage::NoAnswer) => return self.refuse(now, Outcome::Timeout, None),
            None => {}
        }
        let (overload, retry_after) = {
            let cfg = in_force(&self.config, phase);
            (cfg.overload, cfg.retry_after)
        };
        // A model call's output is charged as its max_tokens until it completes; the rest of
        // its tokens are its prompt.
        let cost = Split {
            input: tokens.saturating_sub(asked.max_tokens.unwrap_or(0)),
            output: asked.max_tokens.unwrap_or(0).min(tokens),
        };
        // Without limits (in force now) there is no quota to ask, charge or report: every
        // step below on it would be a no-op. The same for the split limits alone.
        let split_limited = !self.split.is_unlimited();
        let limited = split_limited || !self.window.is_unlimited();
        if limited {
            let admits = match split_limited {
                true => self.window.admits(tokens).and(self.split.admits(cost)),
                false => self.window.admits(tokens),
            };
            if let Err(limit) = admits {
                // No wait can help: a 429 without Retry-After, before capacity and quota.
                return self.refuse(now, Outcome::TooLarge(limit), None);
            }
        }
        // When the earliest server is free, if every one has been used (else one is free now).
        let busy_until = match &self.servers {
            Some((n, heap)) if heap.len() >= *n => heap.peek().map(|r| r.0),
            _ => None,
        };
        if let Some(free_at) = busy_until.filter(|&f| f > now) {
            match overload {
                Overload::Queue => {}
                Overload::Reject429 => {
                    return self.refuse(now, Outcome::RateLimited, Some(free_at - now))
                }
                Overload::Reject503 => {
                    return self.refuse(now, Outcome::Error(503), Some(free_at - now))
                }
            }
        }
        let ticket = if limited {
            // Every limit is asked before any is charged; the one that refuses longest answers.
            let split = match split_limited {
                true => self.split.fit(now, cost),
                false => Ok(()),
            };
            let refused = match (self.window.fit(now, tokens), split) {
                (Ok(()), Ok(())) => None,
                // Only float noise reaches this past `admits`; it is still never going to fit.
                (Err(None), _) => return self.refuse(now, Outcome::TooLarge(Limit::Tokens), None),
                (_, Err((l, None))) => return self.refuse(now, Outcome::TooLarge(l), None),
                (Err(Some(w)), Err((l, Some(v)))) if v > w => Some((Some(l), v)),
                (Err(Some(w)), _) => Some((None, w)),
                (Ok(()), Err((l, Some(v)))) => Some((Some(l), v)),
            };
            if let Some((limit, fits_in)) = refused {
                return self.limited(now, limit, fits_in, retry_after);
            }
            self.window.commit(now, tokens);
            // Output tokens to settle only where they are limited.
            split_limited.then(|| self.split.commit(now, cost))
        } else {
            None
        };
        self.counters.tokens_charged = self.counters.tokens_charged.saturating_add(tokens);
        // Always two draws, in this order, so a seed gives the same stream whatever the outcome.
        let fate: f64 = self.rng.random();
        let cfg = in_force(&self.config, phase);
        let dist = match asked.latency {
            Some(own) if !own_latency => own,
            _ => &cfg.latency,
        };
        let generation = cfg.generation.as_ref().filter(|_| asked.model_call);
        let (service, made) = match generation {
            // Drawn in [0, one year] (`Latency::sample` clamps), and converted without panicking.
            None => (duration_from_ms(dist.sample(&mut self.rng)), None),
            // Three draws, in this order, whatever the outcome.
            Some(g) => {
                let drawn = g.output_tokens.sample(&mut self.rng);
                let ttft = g.ttft.sample(&mut self.rng);
                let tpot = g.tpot.sample(&mut self.rng);
                // At most max_tokens, and never more than the provider's output limit.
                let most = cfg.max_output_tokens.max(1);
                let cap = asked.max_tokens.map_or(most, |m| m.clamp(1, most));
                let n = drawn.min(cap);
                let last = duration_from_ms(ttft + tpot * (n - 1) as f64);
                (last, Some((n, duration_from_ms(ttft))))
            }
        };
        let start = match &mut self.servers {
            Some((n, heap)) => {
                let free = if heap.len() >= *n {
                    heap.pop().map_or(now, |r| r.0).max(now)
                } else {
                    now
                };
                heap.push(Reverse(free.saturating_add(service)));
                free
            }
            None => now,
        };
        let latency = (start - now).saturating_add(service);
        let error_rate = match asked.error_rate {
            Some(own) if !own_error_rate => own,
            _ => cfg.error_rate,
        };
        let outcome = if fate < error_rate {
            let u = fate / error_rate;
            Outcome::Error(if u < cfg.error_split[0] {
                500
            } else if u < cfg.error_split[1] {
                503
            } else {
                529
            })
        } else if fate < error_rate + cfg.timeout_rate {
            Outcome::Timeout
        } else {
            Outcome::Served
        };
        match outcome {
            Outcome::Served => self.counters.served += 1,
            Outcome::Timeout => self.counters.timed_out += 1,
            _ => self.counters.errored += 1,
        }
        // An answer is billed: served, or (`bill_errors`) failed by the model.
        let bill = match &cfg.price {
            Some(p)
                if outcome == Outcome::Served || p.bill_errors && outcome != Outcome::Timeout =>
            {
                // Its prompt, and its output: what it generated, else its max_tokens.
                let b = p.bill(cost.input, made.map_or(cost.output, |(n, _)| n));
                self.counters.billed = self.counters.billed.plus(b);
                Some(Box::new(b))
            }
            _ => None,
        };
        if let (Outcome::Served, Some((n, _)), Some(ticket)) = (outcome, made, ticket) {
            // The output is charged as max_tokens until the last token, then as what it was.
            self.split
                .settle_at(now.saturating_add(latency), ticket, cost.output, n);
        }
        // The windows are at `now` already (asked and charged at it): reading them is only
        // for the caller, and skipped when it wants no usage.
        let ((requests, tokens), (input_tokens, output_tokens)) = match (limited, self.usage) {
            (true, true) => (self.window.usage(now), self.split.usage(now)),
            _ => ((None, None), (None, None)),
        };
        Decision {
            outcome,
            latency: (outcome != Outcome::Timeout).then_some(latency),
            charged: true,
            queued: start - now,
            retry_after: None,
            requests,
            tokens,
            input_tokens,
            output_tokens,
            limited_by: None,
            generated: made
                .filter(|_| outcome == Outcome::Served)
                .map(|(output_tokens, first)| Generated {
                    output_tokens,
                    first_token: (start - now).saturating_add(first),
                }),
            bill,
        }
    }
}
