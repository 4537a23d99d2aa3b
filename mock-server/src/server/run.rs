//! One run of the provider: everything `POST /reset` starts afresh. A run holds the model (its
//! windows, counters, randomness and phases' clock), the real instant its model time 0 was, and
//! what the clients did (in flight, retries, orphans, the per-second series). A reset puts a new
//! run in place of the current one; a request holds the run it arrived in until it leaves, so
//! one in flight across a reset is decided, counted and let go by the old run, never the new.

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::traffic::{TrafficLog, TrafficReport};
use crate::config::ProviderConfig;
use crate::model::{Counters, ProviderModel};

/// The state of one run (see the module docs).
pub(crate) struct Run {
    /// Resets before this run: 0 for the run the server started with.
    pub(crate) generation: u64,
    /// The model, fed model time since `start`.
    pub(crate) model: Mutex<ProviderModel>,
    /// Real time at the run's model time 0.
    pub(crate) start: Instant,
    /// What the clients did in this run.
    pub(crate) traffic: Arc<TrafficLog>,
}

impl Run {
    /// A fresh run of `provider` seeded by `seed`, its model time 0 at `start`.
    pub(crate) fn new(
        provider: &ProviderConfig,
        seed: u64,
        generation: u64,
        start: Instant,
    ) -> Self {
        Run {
            generation,
            model: Mutex::new(ProviderModel::new(provider.clone(), seed)),
            start,
            traffic: Arc::new(TrafficLog::new(start)),
        }
    }

    /// The model, locked (a panic while it was held leaves it usable).
    pub(crate) fn model(&self) -> std::sync::MutexGuard<'_, ProviderModel> {
        self.model.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The model's counters.
    pub(crate) fn counters(&self) -> Counters {
        self.model().counters()
    }

    /// Each phase's counters.
    pub(crate) fn phase_counters(&self) -> Vec<Counters> {
        self.model().phase_counters().to_vec()
    }

    /// Everything this run has seen, now.
    pub(crate) fn report(&self) -> Report {
        Report {
            generation: self.generation,
            elapsed_us: u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX),
            counters: self.counters(),
            phases: self.phase_counters(),
            traffic: self.traffic.report(),
        }
    }
}

/// What one run has seen, as `GET /report` serves it (and `capsize exec` reports it): which
/// run, how long since it started, the model's counters (each phase's too) and the clients'
/// traffic, with the per-second series, the busiest 60 s and the retry waits. Two readings of
/// one run are ordered by `elapsed_us`; a later one holds everything an earlier one does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Resets before this run (0: the run the server started with).
    pub generation: u64,
    /// Real time from the run's start (the server's start or its last reset) to the reading, µs.
    pub elapsed_us: u64,
    /// The model's counters.
    pub counters: Counters,
    /// Each phase's counters (none without phases).
    #[serde(default)]
    pub phases: Vec<Counters>,
    /// The clients' traffic.
    pub traffic: TrafficReport,
}

/// The current run, replaced whole by a reset.
pub(crate) struct Runs {
    provider: ProviderConfig,
    seed: u64,
    current: Mutex<Arc<Run>>,
}

impl Runs {
    /// The first run (generation 0) of `provider` seeded by `seed`, starting at `start`.
    pub(crate) fn new(provider: ProviderConfig, seed: u64, start: Instant) -> Self {
        let first = Arc::new(Run::new(&provider, seed, 0, start));
        Runs {
            provider,
            seed,
            current: Mutex::new(first),
        }
    }

    /// The provider every run serves.
    pub(crate) fn provider(&self) -> &ProviderConfig {
        &self.provider
    }

    /// The current run.
    pub(crate) fn current(&self) -> Arc<Run> {
        Arc::clone(&self.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Starts a new run at `start`, as the server started: returns its generation.
    pub(crate) fn reset(&self, start: Instant) -> u64 {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = current.generation.saturating_add(1);
        *current = Arc::new(Run::new(&self.provider, self.seed, generation, start));
        generation
    }
}
