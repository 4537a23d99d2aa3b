//! The command line: parses arguments and hands each subcommand to the library.
//!
//! Exit codes: 0 success; 1 a check failed (the CI gate); 2 bad input (flags, scenario files);
//! 3 the subcommand is not built yet.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for a subcommand that is not built yet.
pub const EXIT_NOT_BUILT: u8 = 3;

/// Size the concurrency and rate-limit headroom of LLM agent tool calls.
///
/// capsize drives a real scheduler (bounded fan-out, RPM/TPM token buckets, retry with jitter
/// and Retry-After, cancellation, read/write dispatch, budgets) against a provider that behaves
/// like a rate-limited LLM API, in virtual time or real time, and reports what max_concurrency
/// and headroom to run at.
#[derive(Debug, Parser)]
#[command(name = "capsize", version, about, long_about)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the article's scheduler examples in virtual time and print what was measured.
    Demo,
    /// Simulate a scenario file and report latency, throughput and 429s (not built yet).
    Run {
        /// The scenario file (TOML).
        scenario: String,
    },
    /// Sweep max_concurrency x headroom over a scenario and write a capacity report (not built yet).
    Sweep {
        /// The scenario file (TOML).
        scenario: String,
    },
    /// Print the closed-form rate-limit arithmetic, no simulation (not built yet).
    Plan {
        /// The scenario file (TOML).
        scenario: Option<String>,
    },
    /// Gate CI on a scenario's SLOs and a baseline (not built yet).
    Check {
        /// The scenario file (TOML).
        scenario: String,
    },
    /// Serve the mock provider over HTTP (not built yet).
    Mock,
}

fn not_built(what: &str, issue: u32) -> ExitCode {
    eprintln!(
        "capsize {what}: not built yet (issue #{issue}); `capsize demo` runs the scheduler today"
    );
    ExitCode::from(EXIT_NOT_BUILT)
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // --help and --version are not errors.
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match args.command {
        Command::Demo => {
            print!("{}", crate::demo::render(&crate::demo::rows()));
            ExitCode::SUCCESS
        }
        Command::Run { .. } => not_built("run", 3),
        Command::Sweep { .. } => not_built("sweep", 5),
        Command::Plan { .. } => not_built("plan", 5),
        Command::Check { .. } => not_built("check", 6),
        Command::Mock => not_built("mock", 4),
    }
}
