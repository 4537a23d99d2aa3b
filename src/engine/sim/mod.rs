//! Running a scenario: the real scheduler against the provider, in virtual or in real time.
//!
//! Virtual time (`run`): the in-process provider model on capsize-des, a discrete-event executor
//! whose clock jumps from timer to timer and reads model time itself. Rules it follows
//! (CONTRIBUTING.md's "How the simulation works" says why): timers fire on a 1 µs tick; every
//! wait is to an absolute instant; at one instant, the timer armed first fires first; a virtual-time
//! watchdog turns a run that cannot finish into an error; tasks are bounded; every random stream
//! is seeded from the scenario's seed.
//!
//! Real time (`run_realtime`): the same, over HTTP to the mock provider on tokio's real clock.
//!
//! Both modes share the workload driver (`drive`); they differ only in the `Runtime` (clock
//! and tasks) and the [`Provider`](crate::engine::provider::Provider) behind the scheduler.

mod descriptors;
mod drive;
pub mod fleet;
pub mod live;
mod realtime;
pub mod replica;
pub(crate) mod runtime;
pub mod target;

pub use realtime::{
    mock_config, mock_configs, run_realtime, run_realtime_with, Announcement, RealtimeOptions,
};

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::{Counters, ProviderConfig};
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use thiserror::Error;

use self::runtime::DesRuntime;
use crate::engine::provider::client::Clients;
use crate::engine::provider::simulated::VirtualProvider;
use crate::engine::recorder::{Recorder, Recording};
use crate::engine::routes::Routes;
use crate::engine::scenario::{FleetLimiter, Scenario, Stop};
use crate::engine::timescale::TimeScale;
use crate::engine::workload::{stream_seed, streams};
use crate::scheduler::{
    Builder, Clock, ConfigError, Limit, LimitStats, LimiterConfig, Nanos, RetryPolicy, Scheduler,
    SchedulerConfig,
};

/// The virtual clock's timer tick: a microsecond, the recorder's resolution. Deadlines are
/// rounded up to it (as tokio's timer wheel rounded them to its 1 ms tick when the simulator
/// ran on tokio's paused clock a thousand times slower than model time).
pub const TICK: Duration = Duration::from_micros(1);

/// How long a run may go on, in model time, past the last instant a query may start, before
/// the watchdog stops it: a year. (The virtual clock counts nanoseconds in a u64: 584 years.)
pub const HORIZON: Duration = Duration::from_secs(365 * 86_400);

/// The watchdog's limit for a run of `s`: [`HORIZON`] past its duration, if it has one (so a
/// run of the longest duration allowed, a year, still has a year to finish its last queries),
/// else [`HORIZON`].
pub fn horizon(s: &Scenario) -> Duration {
    match s.workload.stop {
        Stop::Duration(d) => d.saturating_add(HORIZON),
        Stop::Queries(_) => HORIZON,
    }
}

/// Why a run could not produce results.
#[derive(Debug, Error)]
pub enum SimError {
    /// The scheduler configuration derived from the scenario is invalid.
    #[error("scheduler: {0}")]
    Config(#[from] ConfigError),
    /// The run did not finish within the horizon (a deadlock, or a scenario far too long).
    #[error("the run did not finish within {0:?} of model time (deadlock, or a scenario too long to simulate)")]
    Watchdog(Duration),
    /// The virtual-time run stopped with work waiting and nothing to wake it (a deadlock).
    #[error("{0}")]
    Stalled(#[from] capsize_des::Stalled),
    /// The runtime could not be built.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The provider could not be started or reached (real time).
    #[error("{0}")]
    Unreachable(String),
    /// The provider answered something that cannot be read: a malformed rate-limit header or
    /// statistics (real time).
    #[error("the provider sent something unreadable: {0}")]
    BadProvider(String),
    /// The mock at the target serves another model or time scale than the run expects, or
    /// does not say which (real time).
    #[error("{0}")]
    Mismatch(String),
}

/// Which clock a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The discrete-event executor's virtual clock and the in-process provider model.
    Virtual,
    /// The real clock and HTTP to a mock provider.
    Realtime,
}

impl Mode {
    /// The name summary.json uses.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Virtual => "virtual",
            Mode::Realtime => "realtime",
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    /// Which clock it ran on.
    pub mode: Mode,
    /// Histograms and counters.
    pub recording: Recording,
    /// The provider's own counters (every endpoint's, added up).
    pub provider: capsize_mock::Counters,
    /// Each endpoint's counters, in the routes' order (see `engine::routes::Routes`).
    pub endpoints: Vec<capsize_mock::Counters>,
    /// Each endpoint's counters per phase of its provider (see `[[provider.phases]]`).
    pub phases: Vec<Vec<capsize_mock::Counters>>,
    /// Model time from the start to the last query's end.
    pub elapsed: Duration,
    /// Model time from the start to the end of the run (detached work included).
    pub span: Duration,
    /// Queries started.
    pub queries_started: u64,
    /// Queries each replica of the fleet finished (one entry without `[fleet]`).
    pub replica_queries: Vec<u64>,
    /// Each replica's adaptive concurrency limit (empty with fixed limits).
    pub limits: Vec<LimitStats>,
}

/// The scheduler configuration for a scenario on a runtime clock at `scale` (durations and
/// rates converted from model time). A fleet with `limiter = "split"` gives each replica 1/K of
/// every limit (and of its burst).
pub fn scheduler_config(s: &Scenario, scale: TimeScale) -> SchedulerConfig {
    let sc = &s.scheduler;
    let share = match s.fleet.limiter {
        FleetLimiter::Split => s.fleet.replicas as f64,
        FleetLimiter::Local | FleetLimiter::Shared => 1.0,
    };
    let limit = |per_minute: Option<f64>| {
        per_minute.map(|pm| {
            let pm = pm / share;
            // Capacity in tokens does not depend on the scale: `burst_s` of the scaled refill.
            let burst = sc.bucket_capacity(pm);
            Limit::per_minute(scale.rate_to_runtime(pm)).with_burst(burst)
        })
    };
    // One limiter per provider: the default one in the one-provider form, one named after
    // each provider otherwise (the driver sends each call through its provider's).
    let limiter = |p: &ProviderConfig| LimiterConfig {
        requests: limit(p.rpm),
        tokens: limit(p.tpm),
        headroom: sc.headroom,
    };
    let (limits, named_limits) = match (sc.rate_limit, s.named_providers) {
        (false, _) => (None, Vec::new()),
        (true, false) => (Some(limiter(s.provider())), Vec::new()),
        (true, true) => (
            None,
            s.providers
                .iter()
                .map(|p| (p.name.clone(), limiter(&p.config)))
                .collect(),
        ),
    };
    SchedulerConfig {
        max_concurrency: sc.max_concurrency,
        limits,
        named_limits,
        retry: RetryPolicy {
            base: scale.to_runtime(sc.retry.base),
            cap: scale.to_runtime(sc.retry.cap),
            retry_after_cap: scale.to_runtime(sc.retry.retry_after_cap),
            retry_after_max: sc.retry.retry_after_max.map(|d| scale.to_runtime(d)),
            ..sc.retry.clone()
        },
    }
}

/// Replica `i`'s jitter stream. Replica 0 keeps the single client's, so a fleet of one is
/// today's run.
fn jitter(s: &Scenario, i: usize) -> Xoshiro256PlusPlus {
    let seed = match i {
        0 => stream_seed(s.seed, streams::JITTER),
        i => stream_seed(stream_seed(s.seed, streams::JITTER), i as u64),
    };
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// Replica `i`'s scheduler, but for its limiters: the scenario's configuration, its own
/// jitter stream and adaptive limit (if the scenario has one), reporting to `recorder`.
fn replica<C: Clock>(
    s: &Scenario,
    config: &SchedulerConfig,
    i: usize,
    recorder: &Arc<Recorder<C::Instant>>,
    clock: C,
) -> Builder<C> {
    let builder = Scheduler::builder_on(config.clone(), clock)
        .rng(jitter(s, i))
        .observer(recorder.clone());
    match s.scheduler.adaptive {
        Some(a) => builder.adaptive_concurrency(a),
        None => builder,
    }
}

/// The schedulers of the fleet's replicas (one without `[fleet]`), each with its own jitter
/// stream; with `limiter = "shared"` every one shares the first's limiters.
fn schedulers<C: Clock>(
    s: &Scenario,
    scale: TimeScale,
    recorder: &Arc<Recorder<C::Instant>>,
    clock: C,
) -> Result<Vec<Scheduler<C>>, SimError> {
    let config = scheduler_config(s, scale);
    let mut all: Vec<Scheduler<C>> = Vec::with_capacity(s.fleet.replicas);
    for i in 0..s.fleet.replicas {
        let mut builder = replica(s, &config, i, recorder, clock.clone());
        if let (FleetLimiter::Shared, Some(first)) = (s.fleet.limiter, all.first()) {
            builder = builder.share_limiters(first);
        }
        all.push(builder.build()?);
    }
    Ok(all)
}

/// What a run records and shows beyond what every run does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunExtras {
    /// Keep what the calls did per bin of the series (`capsize run --timeseries`).
    pub timeseries: bool,
    /// Real time only: show a live one-line status on stderr (the caller checks that stderr is
    /// a terminal) instead of a progress line every 10 s.
    pub live: bool,
    /// Keep each answered model turn's time (`Recording::model_turns`: calibrate's check).
    pub model_turns: bool,
}

async fn simulate(
    s: &Scenario,
    rt: DesRuntime<Nanos>,
    extras: RunExtras,
) -> Result<SimOutcome, SimError> {
    let scale = TimeScale::VIRTUAL;
    let routes = Routes::of(s);
    let recorder: Arc<Recorder<Nanos>> = Arc::new(
        Recorder::new(scale, routes.endpoints.len())
            .with_timeseries(extras.timeseries)
            .with_model_turns(extras.model_turns),
    );
    let schedulers = schedulers(s, scale, &recorder, rt.clone())?;
    let model = s.scheduler.client.as_ref();
    let clients = Clients::new(
        (model, &routes),
        (0, schedulers.len()),
        s.seed,
        (rt.clone(), scale),
        &recorder,
    );
    let provider = Rc::new(VirtualProvider::new(
        &routes,
        recorder.clone(),
        rt,
        scale,
        (s.scheduler.timeout, clients),
    ));
    let driven = drive::drive(
        s,
        replica::Slice::WHOLE,
        schedulers,
        provider.clone(),
        recorder.clone(),
        scale,
        horizon(s),
    )
    .await
    .ok_or(SimError::Watchdog(horizon(s)))?;
    let endpoints = provider.counters();
    Ok(SimOutcome {
        mode: Mode::Virtual,
        recording: recorder.finish(),
        provider: total(&endpoints),
        endpoints,
        phases: provider.phase_counters(),
        elapsed: driven.elapsed,
        span: driven.span,
        queries_started: driven.queries_started,
        replica_queries: driven.replica_queries,
        limits: driven.limits,
    })
}

/// Every endpoint's counters added up.
pub(crate) fn total(endpoints: &[Counters]) -> Counters {
    endpoints
        .iter()
        .fold(Counters::default(), |sum, c| sum.plus(*c))
}

/// Simulates `scenario` in virtual time on a fresh discrete-event executor.
pub fn run(scenario: &Scenario) -> Result<SimOutcome, SimError> {
    run_with(scenario, RunExtras::default())
}

/// [`run`], recording `extras` too.
pub fn run_with(scenario: &Scenario, extras: RunExtras) -> Result<SimOutcome, SimError> {
    let scenario = scenario.clone();
    runtime::run_virtual(
        TICK,
        |rt| async move { simulate(&scenario, rt, extras).await },
    )?
}
