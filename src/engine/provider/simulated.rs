//! The virtual provider: the clockless [`ProviderModel`] fed the run's virtual clock, turning
//! each decision into a wait until the answer's absolute instant and a result the scheduler can
//! classify.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::{Decision, Latency, Outcome, ProviderModel};
use tokio::time::Instant;

use super::{OrphanWatch, Provider, RequestKind};
use crate::engine::recorder::{Arrival, Recorder};
use crate::engine::timescale::TimeScale;
use crate::scheduler::{Clock, ProviderError};

/// The provider model in-process, on `clock` at `scale`.
pub struct VirtualProvider<C> {
    model: RefCell<ProviderModel>,
    recorder: Arc<Recorder>,
    clock: C,
    t0: Instant,
    scale: TimeScale,
    /// The client's timeout per attempt, on the runtime's clock.
    timeout: Duration,
    /// The latency of a model turn, if the workload gives it one.
    model_turn: Option<Latency>,
}

impl<C: Clock> VirtualProvider<C> {
    /// A provider for `model`, recording into `recorder`, whose run starts now on `clock`; the
    /// client gives up on an attempt after `timeout` (model time).
    pub fn new(
        model: ProviderModel,
        recorder: Arc<Recorder>,
        clock: C,
        scale: TimeScale,
        timeout: Duration,
        model_turn: Option<Latency>,
    ) -> Self {
        VirtualProvider {
            model: RefCell::new(model),
            recorder,
            t0: clock.now(),
            clock,
            scale,
            timeout: scale.to_runtime(timeout),
            model_turn,
        }
    }

    /// The model's counters.
    pub fn counters(&self) -> capsize_mock::Counters {
        self.model.borrow().counters()
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

impl<C: Clock> Provider for VirtualProvider<C> {
    async fn request(
        &self,
        tokens: u64,
        kind: RequestKind,
        abandoned: &Cell<bool>,
    ) -> Result<(), ProviderError> {
        let arrived = self.clock.now();
        let now = self.scale.to_model(arrived - self.t0);
        let latency = match kind {
            RequestKind::ModelTurn => self.model_turn.as_ref(),
            RequestKind::Tool => None,
        };
        let decision = self
            .model
            .borrow_mut()
            .on_request_with(now, tokens, latency);
        self.recorder.arrival(Arrival {
            at: now,
            tokens,
            charged: decision.charged,
            rate_limited: matches!(
                decision.outcome,
                Outcome::RateLimited | Outcome::TooLarge(_)
            ),
            queued: Some(decision.queued),
        });
        let mut watch = OrphanWatch {
            charged: decision.charged,
            answered: false,
            abandoned,
            recorder: &self.recorder,
        };
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
        self.clock.sleep_until(arrived + wait).await;
        watch.answered = true;
        result
    }
}
