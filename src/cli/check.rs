//! `capsize check` (the CI gate) and `capsize baseline`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{
    default_out, load, load_and_run, out, realtime_options, run_in, Failure, ScenarioArgs,
};
use crate::analysis::check::{self, Selection, Tolerances};
use crate::engine::scenario::{Scenario, Stop};
use crate::engine::sim::RealtimeOptions;
use crate::engine::summary::metrics;
use crate::engine::summary::slo::Tolerance;
use crate::engine::summary::Summary;
use crate::output::check::Rows;
use crate::output::files::OutputSet;
use crate::output::report::escape;
use serde_json::Value;

/// Exit code of a check that failed.
const EXIT_CHECK_FAILED: u8 = 1;

/// Flags of `capsize check`.
#[derive(Debug, ClapArgs)]
pub struct CheckArgs {
    #[command(flatten)]
    input: ScenarioArgs,
    /// A baseline (a summary.json from `capsize baseline`): the metrics --metrics chooses
    /// (default: every one with a way that is worse, but the maxima) are compared with it.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// How much worse than the baseline a metric may get, of its baseline value: "5%"
    /// (percent) or 0.05 (a fraction); a bare 5 is refused as ambiguous. [slo.tolerance] in
    /// the scenario overrides it per metric.
    #[arg(long, default_value = "5%", value_parser = Tolerance::parse, value_name = "TOL")]
    tolerance: Tolerance,
    /// The metrics compared with the baseline, comma-separated: full paths or prefixes
    /// ("latency_ms.query,provider.rate_limited"); overrides [check] metrics. Default: every
    /// metric with a way that is worse but the maxima (*.max), which are compared only when
    /// named in full.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    metrics: Option<Vec<String>>,
    /// Print (and summarise in --summary-md) only the checks that failed; the closing line
    /// still counts every check.
    #[arg(long = "only-failures")]
    only_failures: bool,
    /// Write JUnit XML here: one testcase per check, named by its kind and metric (the same
    /// names from one baseline to the next).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a Markdown summary here (e.g. "$GITHUB_STEP_SUMMARY").
    #[arg(long = "summary-md", value_name = "FILE")]
    summary_md: Option<PathBuf>,
    /// Where the run's summary.json and .hgrm files go (default: capsize-out/<scenario name>/).
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

/// Runs the scenario and checks it; the exit code says how it went.
pub fn check(args: CheckArgs) -> ExitCode {
    match prepare(&args).and_then(|gate| gate.run(&args)) {
        Ok(code) => code,
        Err(f) => f.exit(),
    }
}

/// A check ready to run: everything that can be refused has been, before the run.
struct Gate<'a> {
    scenario: Scenario,
    realtime: Option<RealtimeOptions>,
    /// "virtual" or "realtime": a baseline must come from the same mode.
    mode: &'static str,
    baseline: Option<Value>,
    /// The metrics compared with the baseline.
    selection: Selection,
    dir: PathBuf,
    outputs: OutputSet<'a>,
}

/// Loads the scenario and the baseline, checks the objectives, and declares every output.
fn prepare(args: &CheckArgs) -> Result<Gate<'_>, Failure> {
    let scenario = load(&args.input)?;
    let realtime = realtime_options(&args.input.clock, true).map_err(Failure::bad_input)?;
    super::preflight(realtime.as_ref(), [&scenario])?;
    check::validate(
        &scenario.slo,
        &scenario.slo_tolerance,
        &scenario.provider_names(),
    )
    .map_err(|e| Failure::bad_input(format!("{}: {e}", args.input.scenario.display())))?;
    let listed = Selection::of(scenario.check.metrics.as_deref());
    listed
        .validate(&scenario.provider_names(), "[check] metrics")
        .map_err(|e| Failure::bad_input(format!("{}: {e}", args.input.scenario.display())))?;
    let selection = match &args.metrics {
        Some(list) => {
            let flag = Selection::of(Some(list));
            flag.validate(&scenario.provider_names(), "--metrics")
                .map_err(|e| Failure::bad_input(e.to_string()))?;
            flag
        }
        None => listed,
    };
    let mode = if realtime.is_some() {
        "realtime"
    } else {
        "virtual"
    };
    let baseline = args
        .baseline
        .as_ref()
        .map(|path| check::read_baseline(path, &scenario.name, mode))
        .transpose()
        .map_err(Failure::bad_input)?;
    if let Some(b) = &baseline {
        if check::compared(b, &selection) == 0 {
            let from = match (&args.metrics, &scenario.check.metrics) {
                (Some(_), _) => "--metrics",
                (None, Some(_)) => "[check] metrics",
                (None, None) => "the default (every metric but the maxima)",
            };
            return Err(Failure::bad_input(format!(
                "{}: nothing to compare: {from} selects no metric the baseline holds a number for",
                args.input.scenario.display()
            )));
        }
    }
    if scenario.slo.is_empty() && baseline.is_none() {
        return Err(Failure::bad_input(format!(
            "{}: nothing to check: the scenario has no [slo] objectives and no --baseline was given",
            args.input.scenario.display()
        )));
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
    outputs.check().map_err(|e| Failure::output(&e))?;
    Ok(Gate {
        scenario,
        realtime,
        mode,
        baseline,
        selection,
        dir,
        outputs,
    })
}

impl Gate<'_> {
    /// Runs the scenario, judges it, writes the outputs and prints the table.
    fn run(mut self, args: &CheckArgs) -> Result<ExitCode, Failure> {
        // The contract: a run that cannot be done is exit 2, like bad input.
        let outcome = run_in(&self.scenario, self.realtime.as_ref())
            .map_err(|f| Failure::bad_input(format!("the run could not be done: {}", f.message)))?;
        let summary = Summary::new(&self.scenario, &outcome);
        let run = summary.to_value();
        let checks = self.judge(&run, args.tolerance);
        let rows = if args.only_failures {
            Rows::Failures
        } else {
            Rows::All
        };
        let title = self.title(args);
        let outputs = &mut self.outputs;
        crate::output::report::put_run(outputs, &self.dir, &summary, &outcome.recording);
        if let Some(path) = &args.junit {
            outputs.put(
                path,
                crate::output::check::junit(&self.scenario.name, &checks),
            );
        }
        if let Some(path) = &args.summary_md {
            outputs.put(path, crate::output::check::markdown(&title, &checks, rows));
        }
        self.outputs.commit().map_err(|e| Failure::output(&e))?;
        let printed = out(&format!(
            "capsize check: {}\n\n{}",
            escape::terminal(&title),
            crate::output::check::table_of(&checks, rows)
        ));
        Ok(if checks.iter().all(|c| c.pass) {
            printed
        } else {
            ExitCode::from(EXIT_CHECK_FAILED)
        })
    }

    /// The run held to the objectives, then to the baseline if there is one.
    fn judge(&self, run: &Value, tolerance: Tolerance) -> Vec<check::Check> {
        let scenario = &self.scenario;
        let mut checks = check::objectives(&scenario.slo, run);
        if let Some(b) = &self.baseline {
            let tolerances = Tolerances {
                default: tolerance,
                per_metric: &scenario.slo_tolerance,
            };
            let bound = match scenario.workload.stop {
                Stop::Duration(_) => check::Bound::Duration,
                Stop::Queries(_) => check::Bound::Queries,
            };
            checks.extend(check::against_baseline(
                b,
                run,
                tolerances,
                &self.selection,
                bound,
            ));
        }
        checks
    }

    /// "name (seed S, mode) against baseline FILE (seed B) at T % tolerance", the baseline's
    /// capsize version beside its seed where it is not this one.
    fn title(&self, args: &CheckArgs) -> String {
        let against = match (&args.baseline, &self.baseline) {
            (Some(path), Some(b)) => format!(
                " against baseline {} (seed {}{}) at {} tolerance",
                path.display(),
                crate::engine::summary::slo::lookup(b, metrics::SEED.path())
                    .map_or("?".into(), |v| v.to_string()),
                check::other_version(b).map_or(String::new(), |v| format!("; {v}")),
                args.tolerance
            ),
            _ => String::new(),
        };
        let (name, seed, mode) = (&self.scenario.name, self.scenario.seed, self.mode);
        format!("{name} (seed {seed}, {mode}){against}")
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
        crate::fmt::fmt_num(summary.latency_ms.query.p95)
    ))
}
