//! The virtual provider: the clockless [`ProviderModel`] fed tokio's (paused) time, turning each
//! decision into a wait until the answer's absolute instant and a result the scheduler can
//! classify. It also books orphaned quota: requests the provider charged whose answer nobody
//! will use (the query was abandoned, or the request was dropped in flight).

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::{Decision, Latency, Outcome, ProviderModel};
use tokio::time::Instant;

use crate::recorder::Recorder;
use crate::scheduler::{FailureKind, ProviderError};

/// The provider model on a virtual clock running `scale` times slower than model time.
pub struct VirtualProvider {
    model: RefCell<ProviderModel>,
    recorder: Arc<Recorder>,
    t0: Instant,
    scale: u32,
    /// The client's timeout per attempt, in virtual time.
    timeout: Duration,
}

/// Counts a charged request as orphaned if it is dropped unanswered, or answered after its
/// query was abandoned.
struct OrphanWatch<'a> {
    charged: bool,
    answered: bool,
    abandoned: &'a Cell<bool>,
    recorder: &'a Recorder,
}

impl Drop for OrphanWatch<'_> {
    fn drop(&mut self) {
        if self.charged && (!self.answered || self.abandoned.get()) {
            self.recorder.orphaned();
        }
    }
}

impl VirtualProvider {
    /// A provider for `model`, recording into `recorder`; the run started at `t0`.
    pub fn new(
        model: ProviderModel,
        recorder: Arc<Recorder>,
        t0: Instant,
        scale: u32,
        timeout: Duration,
    ) -> Self {
        VirtualProvider {
            model: RefCell::new(model),
            recorder,
            t0,
            scale,
            timeout: timeout * scale,
        }
    }

    /// The model's counters.
    pub fn counters(&self) -> capsize_mock::Counters {
        self.model.borrow().counters()
    }

    fn error(&self, d: &Decision) -> ProviderError {
        let scaled = d.retry_after.map(|r| r * self.scale);
        match d.outcome {
            Outcome::RateLimited => ProviderError::rate_limited(scaled),
            Outcome::Error(code) => ProviderError {
                kind: FailureKind::Status {
                    code,
                    retry_after: scaled,
                },
                message: format!("HTTP {code}"),
            },
            Outcome::Timeout => ProviderError::timeout(),
            Outcome::Served => ProviderError::other("served is not an error"),
        }
    }

    /// One attempt: `tokens` to the provider, service time from `latency` if given (else the
    /// provider's). Resolves when the answer arrives, or at the client's timeout.
    pub async fn request(
        &self,
        tokens: u64,
        latency: Option<&Latency>,
        abandoned: &Cell<bool>,
    ) -> Result<(), ProviderError> {
        let arrived = Instant::now();
        let now = (arrived - self.t0) / self.scale;
        let decision = self
            .model
            .borrow_mut()
            .on_request_with(now, tokens, latency);
        let limited = decision.outcome == Outcome::RateLimited;
        self.recorder
            .arrival(now, tokens, decision.charged, limited);
        if decision.charged {
            self.recorder.provider_queued(decision.queued);
        }
        let mut watch = OrphanWatch {
            charged: decision.charged,
            answered: false,
            abandoned,
            recorder: &self.recorder,
        };
        let answer_in = decision.latency.map(|l| l * self.scale);
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
        tokio::time::sleep_until(arrived + wait).await;
        watch.answered = true;
        result
    }
}
