//! `capsize exec`: bring your own agent. The scenario's provider is served by the mock on a
//! free loopback port, in real time; the agent (any command, in any language) runs with the
//! mock's address in its environment (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` for the traces it
//! exports, over the user's own ([`otel`]),
//! `CAPSIZE_MOCK_URL`; dummy API keys, [`DUMMY_KEY`]; loopback in `NO_PROXY`) and in its
//! arguments ([`ADDRESS`]) until it exits, is timed out or is interrupted; what the mock saw of
//! it is the outcome.
//!
//! Or the agent is sent to a mock already running (`--target`): it is checked to serve the
//! scenario's provider and reset before the agent starts, and what it saw is read from its
//! `GET /report` after the agent ends. Agents that scale out run as K processes against one
//! target, each a replica (`--replica I/K`): they start together on the Redis of
//! `--fleet-redis` (the first replica resets the target before it joins), and each reads the
//! target when its agent is done; the latest reading, taken after every agent ended, is the
//! fleet's ([`fleet`]).
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
pub mod fleet;
pub mod otel;
pub mod record;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::Duration;

use capsize_mock::server::{MockProvider, Report, ServerConfig, ServerError};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

use crate::engine::scenario::Scenario;
use crate::engine::sim::replica::{start_together, ReplicaOf};
use crate::engine::sim::{mock_configs, target, SimError};
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
    /// A mock already running to send the agent to, instead of one started here.
    pub target: Option<Target>,
}

/// A mock already running (`--target`), and the fleet this process is a replica of, if it is.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its base URL, `http://HOST:PORT`.
    pub url: String,
    /// This process's replica, and the Redis the replicas start together on.
    pub replica: Option<(ReplicaOf, String)>,
}

impl Target {
    /// `HOST:PORT` of the URL (what `{address}` becomes).
    fn address(&self) -> &str {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, r)| r);
        rest.split('/').next().unwrap_or(rest)
    }
}

/// How the agent's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    /// What the mock saw: the model's counters (each phase's too) and the clients' traffic.
    pub report: Report,
    /// Every request the mock saw, and the traces the agent exported to it (a mock started
    /// here only: a target's requests are not recorded here).
    pub recorded: Option<record::Recorded>,
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
    /// The target or the fleet's Redis refused, could not be reached, or answered something
    /// unreadable.
    #[error("{0}")]
    Target(#[from] SimError),
    /// capsize got this signal before the agent started: nothing was run.
    #[error("stopped by signal {0} before the agent started: nothing was run")]
    Stopped(i32),
    /// The runtime, a signal handler or the wait for the agent failed.
    #[error("{0}")]
    System(String),
}

impl ExecError {
    /// Whether the command line is at fault (not found, not executable) rather than the system.
    /// (A target's errors, [`ExecError::Target`], are classified as a run's are.)
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
    // A replica may wait long at the start line: a signal then stops it, with nothing run.
    let provider = tokio::select! {
        p = Provider::start(s, request.target.as_ref()) => p?,
        _ = sigint.recv() => return Err(ExecError::Stopped(libc::SIGINT)),
        _ = sigterm.recv() => return Err(ExecError::Stopped(libc::SIGTERM)),
        _ = sighup.recv() => return Err(ExecError::Stopped(libc::SIGHUP)),
    };
    let start = Instant::now();
    let mut agent = Agent::spawn(request, provider.address(), provider.takes_traces())?;
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
    let (report, recorded) = provider.finish().await?;
    Ok(ExecOutcome {
        agent: AgentEnd {
            ending,
            exit_code: status.0,
            signal: status.1,
            wall,
        },
        report,
        recorded,
    })
}

/// Where the agent's calls go.
enum Provider {
    /// A mock started here for this agent, recording what it sees.
    Local {
        mock: MockProvider,
        recorder: record::Recorder,
        address: String,
    },
    /// A mock already running (`--target`), perhaps shared with the fleet's other replicas.
    Target {
        client: reqwest::Client,
        target: Target,
    },
}

impl Provider {
    /// The mock for `s`'s provider, ready for the agent: started here and recording, or the
    /// target checked, reset (by the fleet's first replica) and, for a replica, every replica
    /// joined at the start line.
    async fn start(s: &Scenario, to: Option<&Target>) -> Result<Provider, ExecError> {
        let mut config = mock_for(s)?;
        let Some(t) = to else {
            let recorder = record::Recorder::start()
                .map_err(|e| ExecError::System(format!("cannot record the agent's calls: {e}")))?;
            config.request_log = Some(recorder.request_log(&s.providers[0].name));
            config.trace_sink = Some(recorder.trace_sink());
            let mock = MockProvider::start(config, SocketAddr::from(([127, 0, 0, 1], 0))).await?;
            let address = mock.address().to_string();
            return Ok(Provider::Local {
                mock,
                recorder,
                address,
            });
        };
        let client = target::client()?;
        let base = t.url.trim_end_matches('/');
        target::reach(&client, base, true).await?;
        target::same_model(&client, base, &config).await?;
        if t.replica.as_ref().is_none_or(|(me, _)| me.index == 0) {
            target::start_clean(&client, base, false).await?;
        }
        if let Some((me, redis)) = &t.replica {
            start_together(redis, me).await?;
        }
        Ok(Provider::Target {
            client,
            target: t.clone(),
        })
    }

    /// `HOST:PORT`.
    fn address(&self) -> &str {
        match self {
            Provider::Local { address, .. } => address,
            Provider::Target { target, .. } => target.address(),
        }
    }

    /// Whether the agent's traces go to the mock (one started here records them).
    fn takes_traces(&self) -> bool {
        matches!(self, Provider::Local { .. })
    }

    /// What the mock saw, once what the agent left in flight has settled (at most [`SETTLE`]);
    /// a mock started here is stopped, and its recording finished.
    async fn finish(self) -> Result<(Report, Option<record::Recorded>), ExecError> {
        let until = Instant::now() + SETTLE;
        match self {
            Provider::Local { mock, recorder, .. } => {
                while mock.traffic().in_flight > 0 && Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let report = mock.report();
                // The mock stopped, every request has left and been recorded.
                drop(mock);
                let recorded = recorder.finish().map_err(|e| {
                    ExecError::System(format!("cannot record the agent's calls: {e}"))
                })?;
                Ok((report, Some(recorded)))
            }
            Provider::Target { client, target } => {
                let base = target.url.trim_end_matches('/');
                loop {
                    let report = target::report(&client, base).await?;
                    if report.traffic.traffic.in_flight == 0 || Instant::now() >= until {
                        return Ok((report, None));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
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
