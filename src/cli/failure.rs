//! Why a command stopped: its exit code and one line for stderr.

use std::process::ExitCode;

use super::{interrupt, EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_WRITE_FAILED};
use crate::output::files::OutputError;
use crate::output::report::escape;

/// Why a command stopped: its exit code (docs/reference.md's table) and one line for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The process's exit code.
    pub(crate) code: u8,
    /// The line, without the `capsize: ` prefix.
    pub(crate) message: String,
}

impl Failure {
    /// Bad input, refused before anything runs or is written (exit 2).
    pub(crate) fn bad_input(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message: message.to_string(),
        }
    }

    /// A run that could not finish (exit 4).
    pub(crate) fn run_failed(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: EXIT_RUN_FAILED,
            message: message.to_string(),
        }
    }

    /// Outputs that could not be written (exit 5).
    pub(crate) fn write_failed(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: EXIT_WRITE_FAILED,
            message: message.to_string(),
        }
    }

    /// An output that may not or could not be written: refused before the run, bad input; found
    /// while writing, a write failure; a commit stopped by a signal, 128 + it (wrote nothing).
    pub(crate) fn output(e: &OutputError) -> Failure {
        let code = match (e.signal, e.refused) {
            (Some(signal), _) => interrupt::exit_code(signal),
            (None, refused) => [EXIT_WRITE_FAILED, EXIT_BAD_INPUT][usize::from(refused)],
        };
        let message = e.to_string();
        Failure { code, message }
    }

    /// Prints `capsize: <message>` on stderr (control characters shown visibly: a message may
    /// quote a scenario string) and returns the exit code.
    pub(crate) fn exit(self) -> ExitCode {
        eprintln!("capsize: {}", escape::terminal(&self.message));
        ExitCode::from(self.code)
    }
}
