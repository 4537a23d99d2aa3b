//! `capsize compare`: two runs or two sweeps side by side.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{out, Failure};
use crate::analysis::compare;
use crate::output::compare::{self as written, Shown};
use crate::output::report::escape;

/// Exit code of `--fail-on-worse` when a figure got worse beyond its noise.
const EXIT_WORSE: u8 = 1;

/// Flags of `capsize compare`.
#[derive(Debug, ClapArgs)]
pub struct CompareArgs {
    /// The first run or sweep (the one compared against): a summary.json, a sweep.csv, or the
    /// folder holding one.
    a: PathBuf,
    /// The second: changes are B − A.
    b: PathBuf,
    /// Print the comparison as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Sweeps: show every metric of every matched point, not only those that moved.
    #[arg(long)]
    all: bool,
    /// Exit 1 when a figure with a way that is worse moved that way beyond its noise.
    #[arg(long = "fail-on-worse")]
    fail_on_worse: bool,
}

/// Reads both, compares them, warns of a different load, prints the comparison.
pub fn compare(args: CompareArgs) -> ExitCode {
    let read = |p: &PathBuf| compare::read(p).map_err(Failure::bad_input);
    let compared = read(&args.a)
        .and_then(|a| Ok((a, read(&args.b)?)))
        .and_then(|(a, b)| compare::compare(&a, &b).map_err(Failure::bad_input));
    let c = match compared {
        Ok(c) => c,
        Err(f) => return f.exit(),
    };
    if !c.load().is_empty() {
        eprintln!(
            "capsize: warning: A and B were not run on the same load: {}",
            escape::terminal(&c.load().join("; "))
        );
    }
    let shown = if args.all { Shown::All } else { Shown::Moved };
    let text = if args.json {
        written::json(&c)
    } else {
        written::table(&c, shown)
    };
    let printed = out(&text);
    if args.fail_on_worse && c.any_worse() {
        return ExitCode::from(EXIT_WORSE);
    }
    printed
}
