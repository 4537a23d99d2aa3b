//! The virtual provider: the clockless [`ProviderModel`]s of a run's endpoints (one per
//! provider, and one for tools sent to none) fed the run's virtual clock, turning each decision
//! into a wait until the answer's absolute instant and a result the scheduler can classify.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::{Bill, Counters, Decision, Latency, Outcome, ProviderModel, Service};

use super::client::Clients;
use super::{OrphanWatch, Provider, QueryState};
use crate::engine::recorder::{Arrival, Recorder};
use crate::engine::routes::Routes;
use crate::engine::timescale::TimeScale;
use crate::scheduler::{Clock, FailureKind, ProviderError};

/// One route, resolved: the endpoint's model it asks, and the service it asks for.
struct Way {
    endpoint: usize,
    latency: Option<Latency>,
    error_rate: Option<f64>,
    /// A model turn: a generating provider generates its answer.
    model_turn: bool,
    /// The model turn's `max_tokens`, capping a generated answer.
    max_tokens: Option<u64>,
    /// A streamed model turn: the client sees its first token.
    stream: bool,
}

/// The provider models in-process, on `clock` at `scale`.
pub struct VirtualProvider<C: Clock> {
    models: RefCell<Vec<ProviderModel>>,
    ways: Vec<Way>,
    recorder: Arc<Recorder<C::Instant>>,
    clock: C,
    t0: C::Instant,
    scale: TimeScale,
    /// The client's timeout per attempt, on the runtime's clock.
    timeout: Duration,
    /// The client's own time per attempt, if the run models it.
    clients: Clients<C>,
}

impl<C: Clock> VirtualProvider<C> {
    /// The models of `routes`' endpoints, recording into `recorder`, whose run starts now on
    /// `clock`; the client gives up on an attempt after `timeout` (model time), and spends
    /// `clients`' time on each.
    pub fn new(
        routes: &Routes,
        recorder: Arc<Recorder<C::Instant>>,
        clock: C,
        scale: TimeScale,
        (timeout, clients): (Duration, Clients<C>),
    ) -> Self {
        let models = routes
            .endpoints
            .iter()
            // No rate-limit headers here: the model need not report its usage.
            .map(|e| ProviderModel::new(e.config.clone(), e.seed).without_usage())
            .collect();
        let ways = routes
            .routes
            .iter()
            .map(|r| {
                let e = &routes.endpoints[r.endpoint];
                let named = |name: &String| {
                    (
                        e.latencies.get(name).cloned(),
                        e.error_rates.get(name).copied(),
                    )
                };
                let (latency, error_rate) = r.service.as_ref().map(named).unwrap_or_default();
                Way {
                    endpoint: r.endpoint,
                    latency,
                    error_rate,
                    model_turn: r.model_turn,
                    max_tokens: r.max_tokens,
                    stream: r.stream,
                }
            })
            .collect();
        VirtualProvider {
            models: RefCell::new(models),
            ways,
            recorder,
            t0: clock.now(),
            clock,
            scale,
            timeout: scale.to_runtime(timeout),
            clients,
        }
    }

    /// Each endpoint's counters, in the routes' order.
    pub fn counters(&self) -> Vec<Counters> {
        self.models
            .borrow()
            .iter()
            .map(ProviderModel::counters)
            .collect()
    }

    /// Each endpoint's counters per phase of its provider, in the routes' order.
    pub fn phase_counters(&self) -> Vec<Vec<Counters>> {
        self.models
            .borrow()
            .iter()
            .map(|m| m.phase_counters().to_vec())
            .collect()
    }

    fn error(&self, d: &Decision) -> ProviderError {
        let scaled = d.retry_after.map(|r| self.scale.to_runtime(r));
        match d.outcome {
            Outcome::RateLimited => ProviderError::rate_limited(scaled),
            Outcome::Error(code) => ProviderError::status(code).with_retry_after(scaled),
            Outcome::Timeout => ProviderError::timeout(),
            // A 429 without Retry-After that no wait cures: a policy retries it (as a 429)
            // until its retries run out, as the SDKs do against the APIs.
            Outcome::TooLarge(_) => ProviderError::rate_limited(None),
            Outcome::Served => ProviderError::other("served is not an error"),
        }
    }
}

/// What a request's wait ends in, decided when it arrives: all the answer keeps across the wait
/// (not the whole [`Decision`], which would make every call's future larger to move).
struct Answer {
    /// Whether the provider charged it.
    charged: bool,
    /// From arrival to the answer (or to the client's timeout), on the runtime's clock.
    wait: Duration,
    result: Result<(), ProviderError>,
    /// A generated answer's first token as the client sees it (streamed only), and its output
    /// tokens.
    generated: Option<(Option<Duration>, u64)>,
    /// What the answer was billed, if the client receives it (a priced provider's).
    bill: Option<Box<Bill>>,
}

impl<C: Clock> VirtualProvider<C> {
    /// Asks route `route`'s model about a request of `tokens` arriving at `arrived`, and records
    /// the arrival.
    fn answer(&self, arrived: C::Instant, tokens: u64, route: u16) -> Answer {
        let now = self.scale.to_model(arrived - self.t0);
        let way = &self.ways[usize::from(route)];
        let service = Service {
            latency: way.latency.as_ref(),
            error_rate: way.error_rate,
            model_call: way.model_turn,
            max_tokens: way.max_tokens,
        };
        let decision = self.models.borrow_mut()[way.endpoint].on_request_with(now, tokens, service);
        self.recorder.arrival(Arrival {
            at: now,
            tokens,
            output: way.max_tokens.unwrap_or(0),
            charged: decision.charged,
            rate_limited: matches!(
                decision.outcome,
                Outcome::RateLimited | Outcome::TooLarge(_)
            ),
            queued: Some(decision.queued),
            endpoint: way.endpoint,
        });
        let answer_in = decision.latency.map(|l| self.scale.to_runtime(l));
        let (wait, result) = match answer_in {
            Some(w) if w <= self.timeout => {
                let r = if decision.outcome == Outcome::Served {
                    Ok(())
                } else {
                    Err(self.error(&decision))
                };
                (w, r)
            }
            _ => (self.timeout, Err(ProviderError::timeout())),
        };
        let result_ok = result.is_ok();
        Answer {
            charged: decision.charged,
            wait,
            result,
            // Only a streamed answer shows its first token; otherwise it all comes at the end.
            generated: decision.generated.map(|g| {
                let first = way.stream.then(|| self.scale.to_runtime(g.first_token));
                (first, g.output_tokens)
            }),
            // Only an answer the client receives can be used.
            bill: decision.bill.filter(|_| result_ok),
        }
    }
}

impl<C: Clock> Provider for VirtualProvider<C> {
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
        let arrived = self.clock.now();
        let Answer {
            charged,
            wait,
            result,
            generated,
            bill,
        } = self.answer(arrived, tokens, route);
        let mut watch = OrphanWatch {
            charged,
            answered: false,
            abandoned: &query.abandoned,
            recorder: &self.recorder,
        };
        self.clock.sleep_until(arrived + wait).await;
        watch.answered = true;
        if let (Ok(()), Some((first, output_tokens))) = (&result, generated) {
            self.recorder.generated(wait, first, output_tokens);
        }
        if let Some(bill) = bill.filter(|b| query.use_answer(b)) {
            self.recorder
                .used(self.ways[usize::from(route)].endpoint, &bill);
        }
        if let Some(c) = client {
            let answered = !matches!(&result, Err(e) if matches!(e.kind, FailureKind::Timeout));
            c.done(spent, answered).await;
        }
        result
    }
}
