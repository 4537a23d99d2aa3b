//! The recorder: turns the scheduler's call ends and the provider's arrivals into HDR
//! histograms, counters and a per-second series, in model time. It asks the scheduler for no
//! events: each call's breakdown arrives folded, once, when the call ends. Memory is fixed
//! (histograms, and a series of at most [`MAX_BINS`] bins), never growing with the calls; a
//! run with a time series ([`Recorder::with_timeseries`]) keeps a small histogram per bin too.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use capsize_mock::Bill;
use hdrhistogram::Histogram;
use tokio::time::Instant;

use crate::engine::timescale::TimeScale;
use crate::scheduler::observe::{CallEnd, EventKind, LimitChange, Observer};
use crate::scheduler::{Interrupt, Moment};

mod merge;
mod recording;
mod series;
pub mod wire;

pub use recording::{CallCounts, EndpointLoad, Generation, Recording, Spent, Syntheses};
pub use series::{CallBin, Second, Series};

/// Histogram values are microseconds of model time, up to a day, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 86_400_000_000, 3).expect("static histogram bounds are valid")
}

/// The fleet's adaptive limits as they move: their sum since `last`.
#[derive(Debug, Clone, Copy)]
struct LimitTrack<I> {
    origin: I,
    total: u64,
    /// Model µs since `origin` up to which the sum is in the series.
    last_us: u64,
}

/// The busiest 60-second window (whole seconds) of charged requests and tokens, kept online.
#[derive(Debug, Clone)]
struct Peak60 {
    ring: [(u64, u64); 60],
    second: u64,
    sum: (u64, u64),
    peak: (u64, u64),
}

impl Default for Peak60 {
    fn default() -> Self {
        Peak60 {
            ring: [(0, 0); 60],
            second: 0,
            sum: (0, 0),
            peak: (0, 0),
        }
    }
}

impl Peak60 {
    fn add(&mut self, at_s: u64, requests: u64, tokens: u64) {
        // Seconds that left the window [at_s − 59, at_s] take their counts with them.
        if at_s > self.second {
            for s in (self.second + 1)..=at_s.min(self.second + 60) {
                let old = std::mem::take(&mut self.ring[(s % 60) as usize]);
                self.sum = (self.sum.0 - old.0, self.sum.1 - old.1);
            }
            self.second = at_s;
        }
        let slot = &mut self.ring[(at_s % 60) as usize];
        *slot = (slot.0 + requests, slot.1 + tokens);
        self.sum = (self.sum.0 + requests, self.sum.1 + tokens);
        self.peak = (self.peak.0.max(self.sum.0), self.peak.1.max(self.sum.1));
    }
}

/// Zero values recorded, per histogram of [`Recording`], kept apart: most waits are zero, and a
/// zero is then an increment instead of a histogram record. They are added in when read.
#[derive(Debug, Clone, Copy, Default)]
struct Zeros {
    query: u64,
    call: u64,
    queue: u64,
    limiter: u64,
    backoff: u64,
    service: u64,
    provider_queue: u64,
    start_lateness: u64,
}

/// Records `micros` in `h`, or counts it in `zeros` if it is zero.
fn record(h: &mut Histogram<u64>, zeros: &mut u64, micros: u64) {
    if micros == 0 {
        *zeros += 1;
    } else {
        h.saturating_record(micros);
    }
}

struct State<I> {
    scale: TimeScale,
    /// Everything recorded, but the zeros of its histograms.
    rec: Recording,
    zeros: Zeros,
    peak: Peak60,
    /// Each endpoint's busiest minute, when there are several.
    peaks: Vec<Peak60>,
    /// The adaptive limits, once the run has started with some.
    limit: Option<LimitTrack<I>>,
    /// When the run started (runtime), once it has: call ends are placed in the series from it.
    origin: Option<I>,
    /// Live totals for a progress display.
    live: Live,
}

/// Totals so far, for a live progress display.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Live {
    /// Requests the provider received.
    pub requests: u64,
    /// Of those, refused with 429.
    pub rate_limited: u64,
    /// Calls ended (whatever their end, "not run" aside).
    pub calls_ended: u64,
    /// Queries ended (finished or abandoned).
    pub queries_ended: u64,
}

impl<I: Moment> State<I> {
    /// The limits' sum held up to `at` (runtime), in the series.
    fn hold_limit(&mut self, at: I) -> Option<&mut LimitTrack<I>> {
        let track = self.limit.as_mut()?;
        let since = at.saturating_duration_since(track.origin);
        let to = micros(self.scale.to_model(since)).max(track.last_us);
        self.rec.series.hold(track.total, track.last_us, to);
        track.last_us = to;
        Some(track)
    }

    /// A query started `late` (runtime) after its intended start.
    fn started(&mut self, late: Duration) {
        let v = model_micros(self.scale, late);
        record(
            &mut self.rec.start_lateness,
            &mut self.zeros.start_lateness,
            v,
        );
    }
}

/// Collects a run's measurements. Shared by the scheduler (as its observer), the provider and
/// the workload. `I` is the run's clock's instant.
pub struct Recorder<I = Instant> {
    state: Mutex<State<I>>,
    /// Whether the time series is kept (then each call's end reads its limiter's balance).
    timeseries: bool,
    model_turns: bool,
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// Runtime duration `d` in model µs; a zero (most waits) costs one comparison.
#[inline]
fn model_micros(scale: TimeScale, d: Duration) -> u64 {
    if d.is_zero() {
        0
    } else {
        micros(scale.to_model(d))
    }
}

impl<I: Moment> Recorder<I> {
    /// A recorder for a run whose runtime clock relates to model time by `scale`, sending to
    /// `endpoints` providers (each gets counts of its own when there are several).
    pub fn new(scale: TimeScale, endpoints: usize) -> Self {
        let several = if endpoints > 1 { endpoints } else { 0 };
        let h = histogram();
        Recorder {
            state: Mutex::new(State {
                scale,
                zeros: Zeros::default(),
                rec: Recording {
                    query: h.clone(),
                    call: h.clone(),
                    queue: h.clone(),
                    limiter: h.clone(),
                    backoff: h.clone(),
                    service: h.clone(),
                    provider_queue: h.clone(),
                    client: None,
                    start_lateness: h,
                    calls: CallCounts::default(),
                    queries_completed: 0,
                    queries_failed: 0,
                    queries_abandoned: 0,
                    orphaned_requests: 0,
                    syntheses: Syntheses {
                        left_min: u64::MAX,
                        ..Syntheses::default()
                    },
                    series: Series::new(false),
                    charged_requests: 0,
                    peak_requests_60s: 0,
                    peak_tokens_60s: 0,
                    endpoints: vec![EndpointLoad::default(); several],
                    endpoint_series: vec![Series::new(false); several],
                    model_turns: None,
                    generation: None,
                    limits_until_us: None,
                    used: vec![Bill::default(); endpoints],
                    used_by_failed: Spent::default(),
                    transport_errors: Default::default(),
                },
                peak: Peak60::default(),
                peaks: vec![Peak60::default(); several],
                limit: None,
                origin: None,
                live: Live::default(),
            }),
            timeseries: false,
            model_turns: false,
        }
    }

    /// The same recorder, keeping what the calls did per bin of its series too when
    /// `timeseries` (see [`CallBin`]; `capsize run --timeseries` writes it).
    pub fn with_timeseries(mut self, timeseries: bool) -> Self {
        self.lock().rec.series = Series::new(timeseries);
        self.timeseries = timeseries;
        self
    }

    /// Also keep each answered model turn's time ([`Recording::model_turns`]).
    pub fn with_model_turns(mut self, on: bool) -> Self {
        self.lock().rec.model_turns = on.then(histogram);
        self.model_turns = on;
        self
    }

    /// Keep the client's own time per attempt from now on ([`Recording::client`]).
    pub fn keep_client_time(&self) {
        self.lock().rec.client.get_or_insert_with(histogram);
    }

    /// An attempt cost the client `spent` (runtime) of its own time.
    pub fn client_time(&self, spent: Duration) {
        let mut s = self.lock();
        let v = model_micros(s.scale, spent);
        if let Some(h) = s.rec.client.as_mut() {
            h.saturating_record(v);
        }
    }

    /// Whether model turns are timed.
    pub fn times_model_turns(&self) -> bool {
        self.model_turns
    }

    /// A model turn was answered `latency` (runtime) after its submission.
    pub fn model_turn_done(&self, latency: Duration) {
        let mut s = self.lock();
        let v = model_micros(s.scale, latency).max(1);
        if let Some(h) = s.rec.model_turns.as_mut() {
            h.saturating_record(v);
        }
    }

    /// The run started at `origin` (runtime): call ends are placed in the series from it.
    pub fn begin(&self, origin: I) {
        self.lock().origin = Some(origin);
    }

    /// Totals so far, for a live progress display.
    pub fn live(&self) -> Live {
        let s = self.lock();
        Live {
            queries_ended: s.rec.queries_completed + s.rec.queries_abandoned,
            ..s.live
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<I>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A query that started `late` (runtime) after its intended start finished `latency`
    /// (runtime) after that intended start. Only queries whose calls all succeeded (or were "not
    /// run") enter the latency histogram; failed ones are counted.
    /// `used`: what the answers it used were billed.
    pub fn query_done(&self, late: Duration, latency: Duration, failed: bool, used: Spent) {
        let mut guard = self.lock();
        let s = &mut *guard;
        s.started(late);
        if failed {
            s.rec.queries_failed += 1;
            s.rec.used_by_failed = s.rec.used_by_failed.plus(used);
        } else {
            let v = model_micros(s.scale, latency);
            record(&mut s.rec.query, &mut s.zeros.query, v);
        }
        s.rec.queries_completed += 1;
    }

    /// Queries ended so far (finished or abandoned).
    pub fn queries_ended(&self) -> u64 {
        let s = self.lock();
        s.rec.queries_completed + s.rec.queries_abandoned
    }

    /// A query that started `late` (runtime) after its intended start was abandoned by its
    /// caller, having used answers billed `used`.
    pub fn query_abandoned(&self, late: Duration, used: Spent) {
        let mut s = self.lock();
        s.started(late);
        s.rec.queries_abandoned += 1;
        s.rec.used_by_failed = s.rec.used_by_failed.plus(used);
    }

    /// A query used an answer of `endpoint`'s billed `bill`.
    pub fn used(&self, endpoint: usize, bill: &Bill) {
        let mut s = self.lock();
        if let Some(u) = s.rec.used.get_mut(endpoint) {
            *u = u.plus(*bill);
        }
    }

    /// An attempt's connection failed, for this reason.
    pub fn transport_error(&self, class: crate::engine::provider::transport::TransportClass) {
        self.lock().rec.transport_errors.add(class);
    }

    /// The provider charged a request whose answer was thrown away.
    pub fn orphaned(&self) {
        self.lock().rec.orphaned_requests += 1;
    }

    /// An orchestrator started its synthesis turn with `left` tokens in its budget; `refused`
    /// if the budget turned it down.
    pub fn synthesis(&self, left: u64, refused: bool) {
        let s = &mut self.lock().rec.syntheses;
        s.attempted += 1;
        s.refused += u64::from(refused);
        s.left_sum += left;
        s.left_min = s.left_min.min(left);
    }

    /// The run started at `origin` with adaptive concurrency limits adding up to `total`:
    /// from now on their moves ([`Observer::on_limit`]) are kept in the series.
    pub fn limits_from(&self, origin: I, total: usize) {
        self.lock().limit = Some(LimitTrack {
            origin,
            total: total as u64,
            last_us: 0,
        });
    }

    /// The run ended at `at`: the limits' last values are held up to it.
    pub fn limits_until(&self, at: I) {
        self.lock().hold_limit(at);
    }

    /// The provider received a request.
    pub fn arrival(&self, arrival: Arrival) {
        let Arrival {
            at,
            tokens,
            output,
            charged,
            rate_limited,
            queued,
            endpoint,
        } = arrival;
        let mut guard = self.lock();
        let s = &mut *guard;
        let at_s = at.as_secs();
        s.live.requests += 1;
        s.live.rate_limited += u64::from(rate_limited);
        let one = Second {
            requests: 1,
            charged: u64::from(charged),
            tokens: if charged { tokens } else { 0 },
            output: if charged { output.min(tokens) } else { 0 },
            rate_limited: u64::from(rate_limited),
            limit_us: 0,
        };
        s.rec.series.add(at_s, one);
        if let Some(series) = s.rec.endpoint_series.get_mut(endpoint) {
            series.add(at_s, one);
        }
        if charged {
            s.rec.charged_requests += 1;
            s.peak.add(at_s, 1, tokens);
            (s.rec.peak_requests_60s, s.rec.peak_tokens_60s) = s.peak.peak;
            if let (Some(peak), Some(load)) =
                (s.peaks.get_mut(endpoint), s.rec.endpoints.get_mut(endpoint))
            {
                peak.add(at_s, 1, tokens);
                load.charged_requests += 1;
                (load.peak_requests_60s, load.peak_tokens_60s) = peak.peak;
            }
            if let Some(q) = queued {
                record(
                    &mut s.rec.provider_queue,
                    &mut s.zeros.provider_queue,
                    micros(q),
                );
            }
        }
    }

    /// A generating provider's answer to a model call: it came `latency` (runtime) after the
    /// request was sent, its first token `first_token` after it where that was seen, with
    /// `output_tokens` tokens.
    pub fn generated(&self, latency: Duration, first_token: Option<Duration>, output_tokens: u64) {
        let mut s = self.lock();
        let scale = s.scale;
        let model = |d: Duration| micros(scale.to_model(d));
        let g = s.rec.generation.get_or_insert_with(|| Generation {
            calls: 0,
            output_tokens: 0,
            end_to_end: histogram(),
            first_token: histogram(),
            per_token: histogram(),
        });
        g.calls += 1;
        g.output_tokens = g.output_tokens.saturating_add(output_tokens);
        g.end_to_end.saturating_record(model(latency));
        if let Some(first) = first_token {
            g.first_token.saturating_record(model(first));
            if output_tokens > 1 {
                let rest = model(latency.saturating_sub(first));
                g.per_token.saturating_record(rest / (output_tokens - 1));
            }
        }
    }

    /// Everything recorded so far.
    pub fn finish(&self) -> Recording {
        let s = self.lock();
        let mut rec = s.rec.clone();
        rec.limits_until_us = s.limit.map(|t| t.last_us);
        let z = s.zeros;
        for (h, zeros) in [
            (&mut rec.query, z.query),
            (&mut rec.call, z.call),
            (&mut rec.queue, z.queue),
            (&mut rec.limiter, z.limiter),
            (&mut rec.backoff, z.backoff),
            (&mut rec.service, z.service),
            (&mut rec.provider_queue, z.provider_queue),
            (&mut rec.start_lateness, z.start_lateness),
        ] {
            if zeros > 0 {
                h.saturating_record_n(0, zeros);
            }
        }
        rec
    }
}

/// A request as the provider received it, for [`Recorder::arrival`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrived, in model time since the run began.
    pub at: Duration,
    /// Its token cost.
    pub tokens: u64,
    /// Of `tokens`, the output charged at admission: a model turn's `max_tokens` (0 if it set
    /// none, or for a tool call).
    pub output: u64,
    /// Whether the provider charged it against the quota (a 429 is not charged).
    pub charged: bool,
    /// Whether it was refused with a 429.
    pub rate_limited: bool,
    /// How long a charged request waited at the provider for a free server, where the
    /// provider tells (the in-process model does; over HTTP it is not known).
    pub queued: Option<Duration>,
    /// The endpoint it went to (an index into the run's routes' endpoints).
    pub endpoint: usize,
}

impl<I: Moment> Observer<I> for Recorder<I> {
    fn wants_events(&self) -> bool {
        false
    }

    fn wants_balances(&self) -> bool {
        self.timeseries
    }

    fn on_limit(&self, change: &LimitChange<I>) {
        let mut s = self.lock();
        if let Some(track) = s.hold_limit(change.at) {
            track.total = (track.total + change.to as u64).saturating_sub(change.from as u64);
        }
    }

    fn on_call_end(&self, end: &CallEnd<'_, I>) {
        let mut guard = self.lock();
        let s = &mut *guard;
        let c = &mut s.rec.calls;
        let b = &end.breakdown;
        match end.end {
            Some(EventKind::NotRun { .. }) => {
                c.not_run += 1;
                return;
            }
            Some(EventKind::Completed { .. }) => c.completed += 1,
            Some(EventKind::Failed { .. }) => c.failed += 1,
            Some(EventKind::Cancelled { cause, .. }) => {
                c.cancelled += 1;
                c.budget_exhausted += u64::from(matches!(cause, Interrupt::BudgetExhausted(_)));
            }
            // A call whose future was dropped before it ended: counted, never ended.
            _ => {}
        }
        c.calls += 1;
        s.live.calls_ended += 1;
        c.attempts += u64::from(b.attempts);
        c.timed_out += u64::from(end.timed_out);
        c.rate_limited += u64::from(end.rate_limited);
        c.retries += u64::from(end.retries);
        if let Some(EventKind::Completed { .. }) = end.end {
            let scale = s.scale;
            let model = |d: Duration| model_micros(scale, d);
            let (r, z) = (&mut s.rec, &mut s.zeros);
            record(&mut r.call, &mut z.call, model(end.at - end.queued_at));
            record(&mut r.queue, &mut z.queue, model(b.queue));
            record(&mut r.limiter, &mut z.limiter, model(b.limiter));
            record(&mut r.backoff, &mut z.backoff, model(b.backoff));
            record(&mut r.service, &mut z.service, model(b.service));
        }
        if s.rec.series.calls.is_some() {
            s.call_in_series(end);
        }
    }
}

impl<I: Moment> State<I> {
    /// Folds a call that ended into the series' call bins: its wait for a permit, the time it
    /// held one, how it ended and (if it succeeded) its latency, in the bins they fall in.
    fn call_in_series(&mut self, end: &CallEnd<'_, I>) {
        let Some(origin) = self.origin else {
            return;
        };
        let scale = self.scale;
        let at = |i: I| micros(scale.to_model(i.saturating_duration_since(origin)));
        let (queued, ended) = (at(end.queued_at), at(end.at));
        // The permit is waited for first, from submission, and held until the call ends.
        let admitted = at(end.queued_at + end.breakdown.queue).clamp(queued, ended);
        let series = &mut self.rec.series;
        series.queued(queued, admitted);
        series.in_flight(admitted, ended);
        let latency = micros(scale.to_model(end.at - end.queued_at));
        if let Some(bin) = series.calls_at(ended / 1_000_000) {
            if let Some(balance) = end.limiter_balance {
                bin.balance(ended, balance);
            }
            match end.end {
                Some(EventKind::Completed { .. }) => {
                    bin.completed += 1;
                    bin.latency(latency);
                }
                Some(EventKind::Failed { .. }) => bin.failed += 1,
                Some(EventKind::Cancelled { .. }) => bin.cancelled += 1,
                _ => {}
            }
        }
    }
}
