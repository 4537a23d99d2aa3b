//! `capsize exec`: bring your own agent. The scenario's provider is served by the mock on a
//! free loopback port, in real time; the agent (any command, in any language) runs with the
//! mock's address in its environment (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` for the traces it exports,
//! `CAPSIZE_MOCK_URL`; dummy API keys, [`DUMMY_KEY`]; loopback in `NO_PROXY`) and in its
//! arguments ([`ADDRESS`]) until it exits, is timed out or is interrupted; what the mock saw of
//! it is the outcome.
//!
//! The agent runs in a process group of its own, so that it and everything it started can be
//! stopped together: on a timeout, or on SIGINT, SIGTERM or SIGHUP to capsize, the group gets
//! SIGTERM (and SIGCONT, so a stopped agent acts on it), and SIGKILL after [`KILL_GRACE`] (at
//! once on a second signal). When the agent itself has
//! exited, whatever it left running in its group is killed. Then the mock is stopped. If capsize
//! itself is killed (SIGKILL, a crash), the group's leader, a watchdog forked for it, kills the
//! group (see `child.rs`).

#![allow(clippy::disallowed_methods)] // real time: tokio's clock and signals by design

mod child;
pub mod record;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::Duration;

use capsize_mock::server::{MockProvider, ServerConfig, ServerError, TrafficReport};
use capsize_mock::Counters;
use thiserror::Error;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

use crate::engine::scenario::Scenario;
use crate::engine::sim::mock_configs;
use child::Agent;

/// The placeholder replaced in the command's arguments by the mock's `host:port`.
pub const ADDRESS: &str = "{address}";
/// How long the agent's process group has after SIGTERM before it is killed.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long the mock is given, after the agent ended, to notice connections it closed.
const SETTLE: Duration = Duration::from_secs(3);
/// The API key the agent is given (both SDKs refuse to start without one).
pub const DUMMY_KEY: &str = "capsize-exec-dummy-key";

/// What to run and for how long.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// The command (looked up in `PATH` if it has no `/`).
    pub program: OsString,
    /// Its arguments; [`ADDRESS`] in any of them is replaced by the mock's `host:port`.
    pub args: Vec<OsString>,
    /// Stop the agent after this long.
    pub timeout: Option<Duration>,
}

/// How the agent's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself (with any code) or died on a signal nobody here sent.
    Exited,
    /// `--timeout` stopped it.
    TimedOut,
    /// capsize got this signal (SIGINT or SIGTERM) and stopped it.
    Interrupted(i32),
}

impl Ending {
    /// `exited`, `timed_out` or `interrupted`, as summary.json writes it.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Exited => "exited",
            Ending::TimedOut => "timed_out",
            Ending::Interrupted(_) => "interrupted",
        }
    }
}

/// The agent's end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentEnd {
    /// Why it ended.
    pub ending: Ending,
    /// Its exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal it died of, if it did.
    pub signal: Option<i32>,
    /// From its start to its exit.
    pub wall: Duration,
}

/// What the mock saw of the agent, and how the agent ended.
#[derive(Debug)]
pub struct ExecOutcome {
    /// The agent's end.
    pub agent: AgentEnd,
    /// The model's counters.
    pub counters: Counters,
    /// The model's counters in each phase of the provider.
    pub phases: Vec<Counters>,
    /// The clients' side: in flight, retries, orphans, the series.
    pub traffic: TrafficReport,
    /// Every request the mock saw, and the traces the agent exported to it.
    pub recorded: record::Recorded,
}

/// Why the agent could not be run.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The command does not exist.
    #[error("{0}: command not found")]
    NotFound(String),
    /// The command exists but could not be started (not executable, say).
    #[error("{program}: cannot run it: {source}")]
    Spawn {
        /// The command.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The scenario has several providers: `capsize exec` serves one mock.
    #[error("capsize exec serves one provider, but this scenario has {}: {} (give it one [provider] table)", .0.len(), .0.join(", "))]
    SeveralProviders(Vec<String>),
    /// The mock provider did not start.
    #[error("cannot start the mock provider: {0}")]
    Mock(#[from] ServerError),
    /// The runtime, a signal handler or the wait for the agent failed.
    #[error("{0}")]
    System(String),
}

impl ExecError {
    /// Whether the command line is at fault (not found, not executable) rather than the system.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ExecError::NotFound(_) | ExecError::Spawn { .. } | ExecError::SeveralProviders(_)
        )
    }
}

/// Runs the agent against the mock for `scenario`'s provider and reports what the mock saw.
pub fn run(scenario: &Scenario, request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ExecError::System(format!("cannot start a runtime: {e}")))?;
    rt.block_on(exec(scenario, request))
}

async fn exec(s: &Scenario, request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
    // Listening before anything starts: a Ctrl-C from here on stops the agent, not capsize.
    let system = |e: std::io::Error| ExecError::System(format!("cannot handle signals: {e}"));
    let mut sigint = signal(SignalKind::interrupt()).map_err(system)?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(system)?;
    // The terminal or session going away stops the agent too, rather than orphaning it.
    let mut sighup = signal(SignalKind::hangup()).map_err(system)?;
    let mut config = mock_for(s)?;
    let recorder = record::Recorder::start()
        .map_err(|e| ExecError::System(format!("cannot record the agent's calls: {e}")))?;
    config.request_log = Some(recorder.request_log(&s.providers[0].name));
    config.trace_sink = Some(recorder.trace_sink());
    let mock = MockProvider::start(config, SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let address = mock.address();
    let start = Instant::now();
    let mut agent = Agent::spawn(request, address)?;
    let deadline = request.timeout.map(|t| start + t);
    let mut ending = Ending::Exited;
    // When the group gets SIGKILL, once it has been told to stop.
    let mut kill_at: Option<Instant> = None;
    // Nothing to wait for is a time that never comes.
    let never = start + Duration::from_secs(100 * 365 * 86_400);
    // The first reason to stop is kept; a second signal ends the grace at once.
    let stopped = |ending: &mut Ending, kill_at: &mut Option<Instant>, why: Ending| {
        if kill_at.is_some() {
            *kill_at = Some(Instant::now());
        } else {
            *ending = why;
            *kill_at = Some(Instant::now() + KILL_GRACE);
        }
    };
    let exited = agent.exited();
    tokio::pin!(exited);
    loop {
        let stop_at = if kill_at.is_none() { deadline } else { None };
        tokio::select! {
            biased;
            done = &mut exited => {
                done.map_err(|e| ExecError::System(format!("cannot wait for the agent: {e}")))?;
                break;
            }
            _ = sigint.recv() => {
                stopped(&mut ending, &mut kill_at, Ending::Interrupted(libc::SIGINT));
                agent.terminate();
            }
            _ = sigterm.recv() => {
                stopped(&mut ending, &mut kill_at, Ending::Interrupted(libc::SIGTERM));
                agent.terminate();
            }
            _ = sighup.recv() => {
                stopped(&mut ending, &mut kill_at, Ending::Interrupted(libc::SIGHUP));
                agent.terminate();
            }
            () = tokio::time::sleep_until(stop_at.unwrap_or(never)), if stop_at.is_some() => {
                stopped(&mut ending, &mut kill_at, Ending::TimedOut);
                agent.terminate();
            }
            () = tokio::time::sleep_until(kill_at.unwrap_or(never)), if kill_at.is_some() => {
                agent.kill();
                kill_at = Some(never);
            }
        }
    }
    let wall = start.elapsed();
    // Whatever the agent left running in its group goes with it.
    agent.kill();
    let status = agent
        .reap()
        .map_err(|e| ExecError::System(format!("cannot collect the agent's exit: {e}")))?;
    settle(&mock).await;
    let (counters, phases, traffic) = (
        mock.counters(),
        mock.phase_counters(),
        mock.traffic_report(),
    );
    // The mock stopped, every request has left and been recorded.
    drop(mock);
    let recorded = recorder
        .finish()
        .map_err(|e| ExecError::System(format!("cannot record the agent's calls: {e}")))?;
    Ok(ExecOutcome {
        agent: AgentEnd {
            ending,
            exit_code: status.0,
            signal: status.1,
            wall,
        },
        counters,
        phases,
        traffic,
        recorded,
    })
}

/// The mock for `s`'s one provider (with the named latencies and error rates its calls may ask
/// for); its providers' names if it has several. The workload is not run, so the endpoint of
/// the tools it sends to no provider (`none`) is neither served nor counted.
fn mock_for(s: &Scenario) -> Result<ServerConfig, ExecError> {
    if s.providers.len() != 1 {
        return Err(ExecError::SeveralProviders(
            s.providers.iter().map(|p| p.name.clone()).collect(),
        ));
    }
    // Endpoints list the providers first, in the scenario's order.
    mock_configs(s, 1.0)
        .into_iter()
        .next()
        .ok_or_else(|| ExecError::System("the scenario's provider has no endpoint".into()))
}

/// Waits until nothing is in flight at the mock (it notices a closed connection soon, not at
/// once), or [`SETTLE`] at most.
async fn settle(mock: &MockProvider) {
    let until = Instant::now() + SETTLE;
    while mock.traffic().in_flight > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
