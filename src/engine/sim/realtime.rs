//! Real time: the same driver and scheduler on tokio's real clock, every attempt an HTTP request
//! to the mock provider (started in-process on a free loopback port, or already running at a
//! target URL).
//!
//! A time scale F runs the whole run F times faster than model time: the client converts every
//! model duration and rate with it, the mock runs its model F times faster and divides the
//! waits it announces (Retry-After, resets) by F, and every figure recorded is converted back,
//! so a virtual run and a time-scaled real-time run of one scenario report comparable numbers.
//!
//! A mock already running at a target must serve the scenario's provider at the run's time
//! scale: its `GET /config` is compared with what an in-process mock would serve, and a
//! mismatch stops the run before it starts ([`SimError::Mismatch`]).

#![allow(clippy::disallowed_methods)] // real time: tokio's clock and tasks by design

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::server::{MockProvider, ServerConfig};
use tokio::time::Instant;

use super::replica::{self, ReplicaOf};
use super::runtime::RealClock;
use super::target;
use super::{drive, horizon, live, schedulers, total, Mode, RunExtras, SimError, SimOutcome};
use crate::engine::provider::client::Clients;
use crate::engine::provider::http::{HttpProvider, HttpTarget};
use crate::engine::recorder::Recorder;
use crate::engine::routes::Routes;
use crate::engine::scenario::Scenario;
use crate::engine::timescale::TimeScale;

/// How a real-time run is set up.
#[derive(Debug, Clone)]
pub struct RealtimeOptions {
    /// How many times faster than model time the run goes (1: model time itself).
    pub time_scale: f64,
    /// A running capsize-mock to send to; `None` starts one in-process.
    pub target: Option<String>,
    /// The Redis on which a fleet with `limiter = "shared"` keeps its limiter (required for
    /// one in real time).
    pub fleet_redis: Option<String>,
    /// Whether this run is the command's only run against `target`. Every run against a
    /// target resets it first (`POST /reset`), so that it starts on a clean provider and
    /// counts only its own traffic; a target that cannot be reset serves a single run (its
    /// counters read before the run are taken off), and is refused for one of several.
    pub single_run: bool,
    /// This process is one replica of a fleet run as separate processes (`--replica I/K`):
    /// it needs `target` (the fleet's one provider) and `fleet_redis` (its start line, and its
    /// limiter when shared).
    pub replica: Option<ReplicaOf>,
    /// A line for stderr, said by the first run given it once it is set up (mocks started,
    /// target and Redis reached): what a long run will take, said only when nothing can refuse
    /// the run any more.
    pub announce: Option<Arc<Announcement>>,
}

/// A line to say once, on stderr, when the first real-time run it is given to has set up.
#[derive(Debug)]
pub struct Announcement {
    text: String,
    said: std::sync::atomic::AtomicBool,
}

impl Announcement {
    /// A line to say (without its newline).
    pub fn new(text: impl Into<String>) -> Arc<Self> {
        Arc::new(Announcement {
            text: text.into(),
            said: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Says it, unless it was said.
    fn say_once(&self) {
        if !self.said.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!("{}", self.text);
        }
    }
}

/// Runs `scenario` in real time over HTTP. Raises the process's soft open-files limit to its
/// hard limit first: each call in flight holds a socket, and with the in-process mock two; a
/// run that can need more still is warned of (`descriptors.rs`).
pub fn run_realtime(scenario: &Scenario, opts: &RealtimeOptions) -> Result<SimOutcome, SimError> {
    run_realtime_with(scenario, opts, RunExtras::default())
}

/// [`run_realtime`], recording and showing `extras` too.
pub fn run_realtime_with(
    scenario: &Scenario,
    opts: &RealtimeOptions,
    extras: RunExtras,
) -> Result<SimOutcome, SimError> {
    // A replica in a process of its own runs one of the fleet's clients.
    let here = match opts.replica {
        Some(_) => 1,
        None => scenario.fleet.replicas as u64,
    };
    super::descriptors::prepare(scenario, here, opts.target.is_none());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(realtime(scenario, opts, extras))
}

/// The mocks that serve `scenario`'s endpoints (its providers, and the tools it sends to
/// none), at `time_scale`, in the routes' order.
pub fn mock_configs(s: &Scenario, time_scale: f64) -> Vec<ServerConfig> {
    Routes::of(s)
        .endpoints
        .into_iter()
        .map(|e| ServerConfig {
            provider: e.config,
            seed: e.seed,
            time_scale,
            latencies: e.latencies,
            error_rates: e.error_rates,
            max_body_bytes: capsize_mock::limits::MAX_BODY_BYTES,
            request_log: None,
            trace_sink: None,
        })
        .collect()
}

/// The one mock that serves `scenario`, if every call goes to one endpoint; else the names
/// of its endpoints.
pub fn mock_config(s: &Scenario, time_scale: f64) -> Result<ServerConfig, Vec<String>> {
    let mut configs = mock_configs(s, time_scale);
    if configs.len() == 1 {
        return Ok(configs.remove(0));
    }
    Err(Routes::of(s)
        .endpoints
        .into_iter()
        .map(|e| e.name)
        .collect())
}

async fn realtime(
    s: &Scenario,
    opts: &RealtimeOptions,
    extras: RunExtras,
) -> Result<SimOutcome, SimError> {
    super::fleet::check_one(s, opts.fleet_redis.is_some())?;
    if let Some(r) = &opts.replica {
        check_replica(s, opts, r)?;
    }
    let scale = TimeScale::faster(opts.time_scale);
    let routes = Routes::of(s);
    let configs = mock_configs(s, opts.time_scale);
    // Started here, kept alive to the end of the run, stopped when dropped.
    let mut mocks = Vec::new();
    let bases: Vec<String> = match &opts.target {
        Some(url) => {
            if configs.len() > 1 {
                let names: Vec<&str> = routes.endpoints.iter().map(|e| e.name.as_str()).collect();
                return Err(SimError::Mismatch(format!(
                    "--target names one mock, but this scenario's calls go to {} endpoints ({}): run it without --target, and capsize starts one mock for each",
                    names.len(),
                    names.join(", ")
                )));
            }
            vec![url.trim_end_matches('/').to_string()]
        }
        None => {
            for config in &configs {
                // On this thread: an exchange then wakes no other thread.
                let mock = MockProvider::start_local(
                    config.clone(),
                    SocketAddr::from(([127, 0, 0, 1], 0)),
                )
                .await
                .map_err(|e| {
                    SimError::Unreachable(format!("cannot start the mock provider: {e}"))
                })?;
                mocks.push(mock);
            }
            mocks.iter().map(MockProvider::uri).collect()
        }
    };
    let client = target::client()?;
    // A target that is not there fails now, in one line, not as a run of failed calls.
    for base in &bases {
        target::reach(&client, base, opts.target.is_some()).await?;
    }
    let before = match (&opts.target, &opts.replica) {
        (Some(_), None) => {
            target::same_model(&client, &bases[0], &configs[0]).await?;
            target::start_clean(&client, &bases[0], opts.single_run).await?
        }
        // The fleet's first replica resets the target for the whole run, before it joins:
        // the run starts only once every replica has joined, so after the reset.
        (Some(_), Some(r)) => {
            target::same_model(&client, &bases[0], &configs[0]).await?;
            if r.index == 0 {
                target::start_clean(&client, &bases[0], false).await?;
            }
            None
        }
        (None, _) => None,
    };
    let recorder: Arc<Recorder> =
        Arc::new(Recorder::new(scale, routes.endpoints.len()).with_timeseries(extras.timeseries));
    let schedulers = match &opts.fleet_redis {
        Some(url) if super::fleet::on_redis_needed(s) => {
            super::fleet::on_redis(s, scale, &recorder, url, opts.replica.as_ref()).await?
        }
        _ => {
            let mut all = schedulers(s, scale, &recorder, RealClock)?;
            match &opts.replica {
                Some(r) => vec![all.swap_remove(usize::try_from(r.index).unwrap_or(0))],
                None => all,
            }
        }
    };
    let slice = match (&opts.replica, &opts.fleet_redis) {
        (Some(r), Some(url)) => {
            replica::start_together(url, r).await?;
            r.slice()
        }
        _ => replica::Slice::WHOLE,
    };
    // Clones share everything: the live view reads the permits they hold.
    let watched = schedulers.clone();
    let target = HttpTarget {
        bases: bases.clone(),
        timeout: s.scheduler.timeout,
    };
    // A replica in a process of its own is the fleet's replica `index`: its client's stream.
    let first = opts.replica.as_ref().map_or(0, |r| r.index as usize);
    let model = s.scheduler.client.as_ref();
    let replicas = (first, schedulers.len());
    let clients = Clients::new(
        (model, &routes),
        replicas,
        s.seed,
        (RealClock, scale),
        &recorder,
    );
    let provider = Rc::new(
        HttpProvider::new(&routes, &target, recorder.clone(), Instant::now(), scale)
            .map_err(|e| SimError::Unreachable(format!("cannot build an HTTP client: {e}")))?
            .with_clients(clients),
    );
    if let Some(a) = &opts.announce {
        a.say_once();
    }
    // The driver's tasks run on this thread, beside the HTTP client's.
    let local = tokio::task::LocalSet::new();
    let driven = tokio::select! {
        driven = local.run_until(drive::drive(
            s,
            slice,
            schedulers,
            provider.clone(),
            recorder.clone(),
            scale,
            horizon(s),
        )) => driven,
        // A header that cannot be read stops the run there.
        () = provider.broken() => None,
        () = progress(&recorder, scale), if !extras.live => None,
        () = live::show(&recorder, scale, s.workload.stop, &watched, s.scheduler.max_concurrency), if extras.live => None,
        () = keep_warm(), if opts.time_scale > 1.0 => None,
    };
    if let Some(bad) = provider.bad_header() {
        let base = bases.join(", ");
        return Err(SimError::BadProvider(format!("{base}: {bad}")));
    }
    let driven = driven.ok_or(SimError::Watchdog(horizon(s)))?;
    let (mut endpoints, mut phases) = (Vec::new(), Vec::new());
    for base in &bases {
        let mut s = target::stats(&client, base).await?;
        if let Some(before) = &before {
            s = s.since(before);
        }
        endpoints.push(s.counters);
        phases.push(s.phases);
    }
    Ok(SimOutcome {
        mode: Mode::Realtime,
        recording: recorder.finish(),
        provider: total(&endpoints),
        endpoints,
        phases,
        elapsed: driven.elapsed,
        span: driven.span,
        queries_started: driven.queries_started,
        replica_queries: driven.replica_queries,
        limits: driven.limits,
    })
}

/// Refuses what a replica of a fleet in separate processes cannot be: without one target to
/// send to, or a Redis to start on, or one of more replicas than the fleet has.
fn check_replica(s: &Scenario, opts: &RealtimeOptions, r: &ReplicaOf) -> Result<(), SimError> {
    if opts.target.is_none() {
        return Err(SimError::Mismatch(format!(
            "--replica {}: the replicas of a fleet send to one provider: give --target URL (a `capsize mock` every replica reaches)",
            r.label()
        )));
    }
    if opts.fleet_redis.is_none() {
        return Err(SimError::Mismatch(format!(
            "--replica {}: the replicas start together on Redis: give --fleet-redis redis://HOST:PORT",
            r.label()
        )));
    }
    if s.fleet.replicas as u64 != r.count {
        return Err(SimError::Mismatch(format!(
            "--replica {}: the scenario's fleet has {} replicas (fleet.replicas)",
            r.label(),
            s.fleet.replicas
        )));
    }
    Ok(())
}

/// Keeps this thread running (yielding to the other tasks and to other threads) so that it never
/// goes idle: on a virtual machine a thread woken from idle finds its caches cold, and an
/// exchange with the mock then takes about 0.2 ms instead of 0.02 ms, which a time scale of 50
/// makes 10 ms of model time per call. The price is one core's time for the run; at a time scale
/// of 1 or below the error is too small to be worth it, and this is not used. On a machine whose
/// cores are all taken, spinning would only hand our turns to others: a yield that gives the
/// core away stops it for [`CONTENDED_PAUSE`] (a thread woken from sleep is run first). Never
/// ends.
async fn keep_warm() {
    loop {
        let before = Instant::now();
        std::thread::yield_now();
        if before.elapsed() > CONTENDED {
            // Another thread took the core: spinning now only hands it our turns. Sleep, and
            // let the kernel wake this thread when it has work (a woken sleeper runs first).
            capsize_timer::sleep(CONTENDED_PAUSE).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// A yield that took longer than this gave the core to another thread.
const CONTENDED: Duration = Duration::from_micros(200);
/// How long [`keep_warm`] leaves the thread idle once it has found the core contended.
const CONTENDED_PAUSE: Duration = Duration::from_millis(200);

/// Reports progress on stderr every 10 s of real time; never ends.
async fn progress(recorder: &Recorder, scale: TimeScale) {
    let start = Instant::now();
    let every = Duration::from_secs(10);
    let mut next = start + every;
    loop {
        tokio::time::sleep_until(next).await;
        let model = scale.to_model(next - start).as_secs();
        eprintln!(
            "capsize: real time: {} queries ended, {model} s of model time",
            recorder.queries_ended()
        );
        next += every;
    }
}
