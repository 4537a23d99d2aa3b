//! The `capsize-mock` command line: flags ([`MockArgs`], reusable by another clap command),
//! their resolution into a [`ServerConfig`], and [`serve`], which prints the server's address as
//! the first line on stdout and serves until Ctrl-C or SIGTERM.
//!
//! Exit codes: 0 stopped by a signal; 1 the server failed (e.g. the port is taken); 2 bad input
//! (flags, scenario file), with a one-line message on stderr.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, ValueEnum};
use serde::Deserialize;
use thiserror::Error;

use crate::config::{ErrorMix, Overload, RawProvider, RawRetryAfter};
use crate::error::ConfigError;
use crate::latency::RawLatency;
use crate::limits::{BODY_LIMIT_RANGE, MAX_BODY_BYTES, MAX_FILE_BYTES};
use crate::server::{MockProvider, ServerConfig, ServerError};
use crate::window::WindowKind;
use capsize_files::read_regular_file;

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for a server that failed.
pub const EXIT_FAILED: u8 = 1;
/// The latency override a scenario's `[workload.model_turn] latency` is registered as.
pub const MODEL_TURN: &str = "model_turn";

/// How the per-minute limits are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WindowArg {
    /// The 60 s after each request.
    Sliding,
    /// Whole minutes from the start.
    Fixed,
    /// A continuously refilled bucket.
    #[value(alias = "token_bucket")]
    TokenBucket,
}

impl From<WindowArg> for WindowKind {
    fn from(w: WindowArg) -> Self {
        match w {
            WindowArg::Sliding => WindowKind::Sliding,
            WindowArg::Fixed => WindowKind::Fixed,
            WindowArg::TokenBucket => WindowKind::TokenBucket,
        }
    }
}

/// Flags of the mock provider (`capsize-mock`, or `capsize mock` when flattened elsewhere).
///
/// The provider comes from a scenario file's `[provider]` table and top-level `seed`, from the
/// flags alone, or from both (a flag overrides the scenario's key).
#[derive(Debug, Clone, PartialEq, Args)]
pub struct MockArgs {
    /// A scenario TOML: its provider table, seed and model-turn latency are used.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// With a scenario of several providers (`[providers.NAME]`): the one to serve.
    #[arg(long, value_name = "NAME", requires = "scenario")]
    pub provider: Option<String>,
    /// Requests per minute (default: unlimited).
    #[arg(long)]
    pub rpm: Option<f64>,
    /// Tokens per minute (default: unlimited).
    #[arg(long)]
    pub tpm: Option<f64>,
    /// Input tokens per minute, Anthropic's ITPM (default: unlimited).
    #[arg(long)]
    pub itpm: Option<f64>,
    /// Output tokens per minute, Anthropic's OTPM: charged as max_tokens, settled to the tokens
    /// generated (default: unlimited).
    #[arg(long)]
    pub otpm: Option<f64>,
    /// How the limits are counted (default: sliding).
    #[arg(long, value_enum)]
    pub window: Option<WindowArg>,
    /// A constant service time in ms (default without a scenario: 0).
    #[arg(long, value_name = "MS")]
    pub latency_ms: Option<f64>,
    /// Retry-After on 429s: seconds, "auto" (until the request fits) or "none".
    #[arg(long, value_name = "SECONDS|auto|none")]
    pub retry_after: Option<String>,
    /// Seed of the model's randomness (default: the scenario's, else 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Port to listen on (0 = any free port; the address is printed first on stdout).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Run the model this many times faster than real time (durations on the wire shrink).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// The largest request body read, in bytes (1 KiB to 1 GiB); a larger one is answered 413
    /// without being read further.
    #[arg(long, default_value_t = MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
}

/// The standalone command.
#[derive(Debug, Parser)]
#[command(
    name = "capsize-mock",
    version,
    about = "A rate-limited mock LLM provider over HTTP"
)]
struct Cli {
    #[command(flatten)]
    args: MockArgs,
}

/// Why the mock could not run.
#[derive(Debug, Error)]
pub enum CliError {
    /// The scenario file is unreadable or wrong.
    #[error("{}: {message}", file.display())]
    Scenario {
        /// The file.
        file: PathBuf,
        /// What is wrong, on one line.
        message: String,
    },
    /// The provider the flags describe cannot work.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A flag's value is wrong.
    #[error("{0}")]
    Flag(String),
    /// The server did not start.
    #[error("{0}")]
    Server(#[from] ServerError),
    /// Writing the address, or listening for signals, failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl CliError {
    /// The process exit code for this error: 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Scenario { .. } | CliError::Config(_) | CliError::Flag(_) => EXIT_BAD_INPUT,
            CliError::Server(ServerError::TimeScale(_)) => EXIT_BAD_INPUT,
            CliError::Server(_) | CliError::Io(_) => EXIT_FAILED,
        }
    }
}

/// The parts of a scenario file the mock reads; every other key is ignored.
#[derive(Debug, Deserialize)]
struct ScenarioFile {
    seed: Option<u64>,
    provider: Option<RawProvider>,
    providers: Option<BTreeMap<String, RawProvider>>,
    workload: Option<WorkloadPart>,
}

#[derive(Debug, Deserialize)]
struct WorkloadPart {
    provider: Option<String>,
    model_turn: Option<ModelTurnPart>,
}

#[derive(Debug, Deserialize)]
struct ModelTurnPart {
    latency: Option<RawLatency>,
    provider: Option<String>,
}

impl ScenarioFile {
    /// The provider table to serve (`pick` names one of `[providers.NAME]`), and the model
    /// turn's latency if model turns go to it.
    fn provider(
        self,
        pick: Option<&str>,
    ) -> Result<(RawProvider, Option<RawLatency>), ConfigError> {
        let w = self.workload.unwrap_or(WorkloadPart {
            provider: None,
            model_turn: None,
        });
        let (turn_to, turn) = match w.model_turn {
            Some(t) => (t.provider.or(w.provider), t.latency),
            None => (None, None),
        };
        match (self.provider, self.providers, pick) {
            (Some(p), None, None) => Ok((p, turn)),
            (Some(_), None, Some(name)) => Err(ConfigError::new(
                "provider",
                format!(
                    "--provider {name}: the scenario has one [provider] table, no [providers.NAME]"
                ),
            )),
            (None, Some(mut named), Some(name)) => match named.remove(name) {
                Some(p) => Ok((p, turn.filter(|_| turn_to.as_deref() == Some(name)))),
                None => Err(ConfigError::new(
                    "providers",
                    format!(
                        "--provider {name}: the scenario names {}",
                        named.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )),
            },
            (None, Some(named), None) if named.len() == 1 => {
                let (_, p) = named.into_iter().next().expect("one provider");
                Ok((p, turn))
            }
            (None, Some(named), None) => Err(ConfigError::new(
                "providers",
                format!(
                    "the scenario names several providers ({}): pick one with --provider NAME",
                    named.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )),
            (Some(_), Some(_), _) => Err(ConfigError::new(
                "providers",
                "give one [provider] table or [providers.NAME] tables, not both",
            )),
            (None, None, _) => Err(ConfigError::new(
                "provider",
                "the scenario has no [provider] table",
            )),
        }
    }
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).map_or(0, |t| t.matches('\n').count()) + 1
}

fn load_scenario(path: &Path) -> Result<ScenarioFile, CliError> {
    let fail = |message: String| CliError::Scenario {
        file: path.to_path_buf(),
        message,
    };
    // A regular file of at most 16 MiB: `--scenario /dev/zero` is refused, not read forever.
    let bytes =
        read_regular_file(path, MAX_FILE_BYTES).map_err(|e| fail(format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        fail(format!(
            "cannot read: not UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    toml::from_str(&text).map_err(|e: toml::de::Error| {
        let message = e.message().trim().replace('\n', " ");
        match e.span() {
            Some(s) if !message.starts_with("missing field") => {
                fail(format!("line {}: {message}", line_of(&text, s.start)))
            }
            _ => fail(message),
        }
    })
}

impl MockArgs {
    /// The address to listen on.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.bind, self.port)
    }

    /// The server configuration: the scenario (if any) with the flags applied over it.
    pub fn server_config(&self) -> Result<ServerConfig, CliError> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err(CliError::Flag(format!(
                "--time-scale must be a positive finite number, got {}",
                self.time_scale
            )));
        }
        if !BODY_LIMIT_RANGE.contains(&self.max_body_bytes) {
            return Err(CliError::Flag(format!(
                "--max-body-bytes must be from {} to {} bytes, got {}",
                BODY_LIMIT_RANGE.start(),
                BODY_LIMIT_RANGE.end(),
                self.max_body_bytes
            )));
        }
        let (file, base) = match &self.scenario {
            Some(path) => {
                let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
                (Some(load_scenario(path)?), base)
            }
            None => (None, PathBuf::from(".")),
        };
        let in_file = |e: ConfigError| match &self.scenario {
            Some(path) => CliError::Scenario {
                file: path.clone(),
                message: e.to_string(),
            },
            None => CliError::Config(e),
        };
        let (seed, provider, turn) = match file {
            Some(f) => {
                let seed = f.seed;
                let (provider, turn) = f.provider(self.provider.as_deref()).map_err(in_file)?;
                (seed, provider, turn)
            }
            None => (None, self.flags_only(), None),
        };
        let provider = self.apply(provider).build(&base).map_err(in_file)?;
        let mut latencies = BTreeMap::new();
        if let Some(raw) = turn {
            let l = raw
                .build("workload.model_turn.latency", &base)
                .map_err(in_file)?;
            latencies.insert(MODEL_TURN.to_string(), l);
        }
        Ok(ServerConfig {
            provider,
            seed: self.seed.or(seed).unwrap_or(0),
            time_scale: self.time_scale,
            latencies,
            max_body_bytes: self.max_body_bytes,
            request_log: None,
            trace_sink: None,
            error_rates: Default::default(),
        })
    }

    /// A `[provider]` table with nothing but defaults (the flags go over it).
    fn flags_only(&self) -> RawProvider {
        RawProvider {
            rpm: None,
            tpm: None,
            itpm: None,
            otpm: None,
            window: WindowKind::default(),
            clock_from: crate::config::ClockFrom::default(),
            retry_after: None,
            latency: RawLatency::Constant { ms: 0.0 },
            max_in_flight: None,
            overload: Overload::default(),
            error_rate: 0.0,
            error_mix: ErrorMix::default(),
            timeout_rate: 0.0,
            output_tokens: None,
            ttft: None,
            tpot: None,
            max_output_tokens: None,
            price: None,
            phases: Vec::new(),
        }
    }

    /// `raw` with the flags that were given applied over it.
    fn apply(&self, mut raw: RawProvider) -> RawProvider {
        if self.rpm.is_some() {
            raw.rpm = self.rpm;
        }
        if self.tpm.is_some() {
            raw.tpm = self.tpm;
        }
        if self.itpm.is_some() {
            raw.itpm = self.itpm;
        }
        if self.otpm.is_some() {
            raw.otpm = self.otpm;
        }
        if let Some(w) = self.window {
            raw.window = w.into();
        }
        if let Some(ms) = self.latency_ms {
            raw.latency = RawLatency::Constant { ms };
        }
        if let Some(r) = &self.retry_after {
            raw.retry_after = Some(match r.trim().parse::<f64>() {
                Ok(s) => RawRetryAfter::Seconds(s),
                Err(_) => RawRetryAfter::Word(r.trim().to_string()),
            });
        }
        raw
    }
}

/// Completes at Ctrl-C or SIGTERM. The handlers are installed before this returns, so a signal
/// that arrives before the future is polled is not lost (nor fatal).
pub fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

/// Starts the mock provider `args` describe, prints its URI (`http://ADDR:PORT`) as the first
/// line on stdout, and serves until Ctrl-C or SIGTERM. Call it from a tokio runtime with the
/// `net`, `time` and `signal` drivers enabled.
pub async fn serve(args: &MockArgs) -> Result<(), CliError> {
    let config = args.server_config()?;
    let stop = shutdown_signal()?;
    let provider = MockProvider::start(config, args.address()).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", provider.uri())?;
        out.flush()?;
    }
    stop.await;
    drop(provider);
    Ok(())
}

/// Runs [`serve`] on a runtime of its own and returns the exit code; errors are printed as one
/// line on stderr, prefixed by `program`.
pub fn run(args: &MockArgs, program: &str) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = match runtime {
        Ok(rt) => rt.block_on(serve(args)),
        Err(e) => Err(CliError::Io(e)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The `capsize-mock` binary: parses `argv` (program name first) and runs. A bad flag is one
/// line on stderr and exit code 2; `--help` and `--version` print and exit 0.
pub fn main_with<I, T>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    const PROGRAM: &str = "capsize-mock";
    match Cli::try_parse_from(argv) {
        Ok(cli) => run(&cli.args, PROGRAM),
        Err(e) if !e.use_stderr() => {
            // --help, --version.
            let _ = e.print();
            ExitCode::SUCCESS
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let line = rendered.lines().next().unwrap_or("bad arguments");
            eprintln!("{PROGRAM}: {}", line.trim_start_matches("error: "));
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}
