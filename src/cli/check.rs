//! `capsize check` (the CI gate) and `capsize baseline`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{
    default_out, load, load_and_run, out, realtime_options, run_in, Failure, ScenarioArgs,
};
use crate::analysis::check;
use crate::output::files::OutputSet;
use crate::output::report::escape;
use crate::output::report::metrics;
use crate::output::report::summary::Summary;

/// Exit code of a check that failed.
const EXIT_CHECK_FAILED: u8 = 1;

/// Flags of `capsize check`.
#[derive(Debug, ClapArgs)]
pub struct CheckArgs {
    #[command(flatten)]
    input: ScenarioArgs,
    /// A baseline (a summary.json from `capsize baseline`): every metric is compared with it.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// How much worse than the baseline a metric may get, in percent of its baseline value
    /// ("5%" or "5"); [slo.tolerance] in the scenario overrides it per metric.
    #[arg(long, default_value = "5%", value_parser = percent, value_name = "PCT")]
    tolerance: f64,
    /// Write JUnit XML here: one testcase per check.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a Markdown summary here (e.g. "$GITHUB_STEP_SUMMARY").
    #[arg(long = "summary-md", value_name = "FILE")]
    summary_md: Option<PathBuf>,
    /// Where the run's summary.json and .hgrm files go (default: reports/<scenario name>/).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Flags of `capsize baseline`.
#[derive(Debug, ClapArgs)]
pub struct BaselineArgs {
    #[command(flatten)]
    input: ScenarioArgs,
    /// The baseline file to write (its folder is created).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// A tolerance flag: `5%` or `5`, a percentage from 0 up.
fn percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    t.strip_suffix('%')
        .unwrap_or(t)
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && (0.0..=1e6).contains(p))
        .ok_or_else(|| format!("{s:?} is not a percentage from 0 to 1000000, such as 5%"))
}

/// Runs the scenario and checks it; the exit code says how it went.
pub fn check(args: CheckArgs) -> ExitCode {
    // Everything that can be refused is refused before the run.
    let scenario = match load(&args.input) {
        Ok(s) => s,
        Err(f) => return f.exit(),
    };
    let realtime = match realtime_options(&args.input.clock) {
        Ok(r) => r,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    if let Err(e) = check::validate(&scenario.slo, &scenario.slo_tolerance) {
        return Failure::bad_input(format!("{}: {e}", args.input.scenario.display())).exit();
    }
    let mode = if realtime.is_some() {
        "realtime"
    } else {
        "virtual"
    };
    let baseline = match &args.baseline {
        Some(path) => match check::read_baseline(path, &scenario.name, mode) {
            Ok(b) => Some(b),
            Err(e) => return Failure::bad_input(e).exit(),
        },
        None => None,
    };
    if scenario.slo.is_empty() && baseline.is_none() {
        return Failure::bad_input(format!(
            "{}: nothing to check: the scenario has no [slo] objectives and no --baseline was given",
            args.input.scenario.display()
        ))
        .exit();
    }
    let dir = default_out(&args.out, &scenario.name);
    let mut outputs = OutputSet::new();
    outputs.scenario(&args.input.scenario, &args.input.sets);
    if let Some(path) = &args.baseline {
        outputs.input(path, "the baseline (--baseline)");
    }
    crate::output::report::declare_run(&mut outputs, &dir);
    for (path, flag) in [(&args.junit, "--junit"), (&args.summary_md, "--summary-md")] {
        if let Some(path) = path {
            outputs.output(path, flag);
        }
    }
    if let Err(e) = outputs.check() {
        return Failure::output(&e).exit();
    }
    // The contract: a run that cannot be done is exit 2, like bad input.
    let outcome = match run_in(&scenario, realtime.as_ref()) {
        Ok(o) => o,
        Err(f) => {
            return Failure::bad_input(format!("the run could not be done: {}", f.message)).exit()
        }
    };
    let summary = Summary::new(&scenario, &outcome);
    let run = serde_json::to_value(&summary).expect("a summary always serialises");
    let mut checks = check::objectives(&scenario.slo, &run);
    if let Some(b) = &baseline {
        checks.extend(check::against_baseline(
            b,
            &run,
            args.tolerance,
            &scenario.slo_tolerance,
        ));
    }
    let against = match (&args.baseline, &baseline) {
        (Some(path), Some(b)) => format!(
            " against baseline {} (seed {}) at {} % tolerance",
            path.display(),
            crate::analysis::slo::lookup(b, metrics::SEED.path())
                .map_or("?".into(), |v| v.to_string()),
            crate::analysis::plan::fmt_num(args.tolerance)
        ),
        _ => String::new(),
    };
    let title = format!(
        "{} (seed {}, {mode}){against}",
        scenario.name, scenario.seed
    );
    crate::output::report::put_run(&mut outputs, &dir, &summary, &outcome.recording);
    if let Some(path) = &args.junit {
        outputs.put(path, check::junit(&scenario.name, &checks));
    }
    if let Some(path) = &args.summary_md {
        outputs.put(path, check::markdown(&title, &checks));
    }
    if let Err(e) = outputs.commit() {
        return Failure::output(&e).exit();
    }
    let printed = out(&format!(
        "capsize check: {}\n\n{}",
        escape::terminal(&title),
        check::table(&checks)
    ));
    if checks.iter().all(|c| c.pass) {
        printed
    } else {
        ExitCode::from(EXIT_CHECK_FAILED)
    }
}

/// Runs the scenario and writes its summary.json as a baseline.
pub fn baseline(args: BaselineArgs) -> ExitCode {
    let mut outputs = OutputSet::new();
    let loaded = load_and_run(&args.input, |_| {
        outputs
            .scenario(&args.input.scenario, &args.input.sets)
            .output(&args.out, "--out");
        outputs.check().map_err(|e| Failure::output(&e))
    });
    let (scenario, outcome) = match loaded {
        Ok(r) => r,
        Err(f) => return f.exit(),
    };
    let summary = Summary::new(&scenario, &outcome);
    outputs.put(&args.out, summary.to_json());
    if let Err(e) = outputs.commit() {
        return Failure::output(&e).exit();
    }
    out(&format!(
        "capsize baseline: wrote {} ({} seed {}, {} queries, p95 {} ms)\n",
        escape::terminal(&args.out.display().to_string()),
        escape::terminal(&scenario.name),
        scenario.seed,
        summary.queries,
        crate::analysis::plan::fmt_num(summary.latency_ms.query.p95)
    ))
}
