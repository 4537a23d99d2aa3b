//! `capsize run`: one run of a scenario, or one replica of a fleet run as separate processes
//! (`--replica I/K --run-id ID`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{default_out, load_and_run_with, out, Failure, ScenarioArgs};
use crate::engine::scenario::Identity;
use crate::engine::sim::replica::{self, Piece, ReplicaOf, Terms, RECORD_FILE as RECORD};
use crate::engine::sim::RunExtras;
use crate::engine::summary::Summary;
use crate::output::files::OutputSet;
use crate::output::report::escape;

/// Flags of `capsize run`.
#[derive(Debug, ClapArgs)]
pub struct RunArgs {
    #[command(flatten)]
    input: ScenarioArgs,
    /// Output folder (default: capsize-out/<scenario name>/). A replica writes into its own
    /// folder in it, replica-I-of-K/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write timeseries.csv: per second of model time (wider bins past 4096 s), requests,
    /// 429s, calls ended, calls in flight and queued, the adaptive limit, call latency
    /// percentiles.
    #[arg(long)]
    timeseries: bool,
    #[command(flatten)]
    replica: ReplicaArgs,
}

/// The flags that make a process one replica of a run made of K processes (`run` and `exec`).
#[derive(Debug, ClapArgs)]
pub(super) struct ReplicaArgs {
    /// Run replica I of K in this process, one of K processes on this machine or others, all
    /// against --target, starting when all K have joined the run on --fleet-redis. `run`: the
    /// replica's share of the fleet's sessions or arrivals (K = fleet.replicas; a shared
    /// limiter keeps its buckets for the K there), real time only. `exec`: its own agent.
    /// Needs --run-id. Writes replica-I-of-K/replica.json into --out; `capsize merge` makes
    /// the run's summary from the K.
    #[arg(long, value_name = "I/K", requires = "run_id")]
    replica: Option<String>,
    /// The run's id, the same in every replica's process and new for each run (letters,
    /// digits, '-', '_', '.').
    #[arg(long, value_name = "ID", requires = "replica")]
    run_id: Option<String>,
    /// How long a replica waits for the others to join before it gives up (exit 4, naming the
    /// missing).
    #[arg(long, value_name = "SECONDS", default_value_t = 120, requires = "replica",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    join_timeout: u64,
}

impl ReplicaArgs {
    /// The replica this process is, if it is one, of a run of the scenario at `scenario` with
    /// `sets` (a `--seed` among them) at `time_scale`: what it agrees with the others on.
    pub(super) fn of(
        &self,
        scenario: &Path,
        sets: &[String],
        time_scale: f64,
    ) -> Result<Option<ReplicaOf>, Failure> {
        let terms = || Identity::of(scenario, sets, &[]).map(|i| Terms::new(i, time_scale));
        match (&self.replica, &self.run_id) {
            (Some(r), Some(id)) => ReplicaOf::parse(r, id, terms)
                .map(|r| {
                    Some(ReplicaOf {
                        join_wait: std::time::Duration::from_secs(self.join_timeout),
                        ..r
                    })
                })
                .map_err(Failure::bad_input),
            _ => Ok(None),
        }
    }
}

/// Puts `me`'s `replica.json` into `dir`: its run of the scenario file given as `scenario`, on
/// the terms it agreed with the others at the start, and `outcome`. (`run` and `exec`.)
pub(super) fn put_record<O: Piece>(
    outputs: &mut OutputSet,
    dir: &Path,
    me: &ReplicaOf,
    scenario: &Path,
    outcome: O,
) -> Result<(), Failure> {
    let record = replica::Record::new(me, &scenario.to_string_lossy(), outcome);
    let text = serde_json::to_string(&record).map_err(|e| Failure::write_failed(e.to_string()))?;
    outputs.put(dir.join(RECORD), text + "\n");
    Ok(())
}

/// `capsize run`.
pub fn run(args: RunArgs) -> ExitCode {
    let replica = args.replica.of(
        &args.input.scenario,
        &args.input.sets_with_seed(),
        args.input.clock.time_scale.unwrap_or(1.0),
    );
    let replica = match replica {
        Ok(r) => r,
        Err(f) => return f.exit(),
    };
    let mut outputs = OutputSet::new();
    let mut dir = PathBuf::new();
    let extras = RunExtras {
        timeseries: args.timeseries,
        // The live status line, on a terminal only (otherwise today's line every 10 s).
        live: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        ..RunExtras::default()
    };
    let loaded = load_and_run_with(&args.input, extras, replica.clone(), |scenario| {
        dir = default_out(&args.out, &scenario.name);
        if let Some(r) = &replica {
            dir = dir.join(r.folder());
            outputs.output(dir.join(RECORD), "--out");
        }
        outputs.scenario(&args.input.scenario, &args.input.sets);
        crate::output::report::declare_run(&mut outputs, &dir);
        if args.timeseries {
            crate::output::timeseries::declare(&mut outputs, &dir);
        }
        outputs.check().map_err(|e| Failure::output(&e))
    });
    let (scenario, outcome) = match loaded {
        Ok(r) => r,
        Err(f) => return f.exit(),
    };
    let summary = Summary::new(&scenario, &outcome);
    crate::output::report::put_run(&mut outputs, &dir, &summary, &outcome.recording);
    if args.timeseries {
        crate::output::timeseries::put(&mut outputs, &dir, &outcome.recording, outcome.span);
    }
    if let Some(r) = &replica {
        let put = put_record(
            &mut outputs,
            &dir,
            r,
            &args.input.scenario,
            replica::Outcome::from(&outcome),
        );
        if let Err(f) = put {
            return f.exit();
        }
    }
    if let Err(e) = outputs.commit() {
        return Failure::output(&e).exit();
    }
    if args.json {
        return out(&summary.to_json());
    }
    let mut files = vec!["summary.json", "query_latency.hgrm", "call_latency.hgrm"];
    if args.timeseries {
        files.push("timeseries.csv");
    }
    if replica.is_some() {
        files.push(RECORD);
    }
    let mut table = crate::output::report::table(&summary);
    if let Some(line) = crate::output::report::binds::line(&summary, &scenario) {
        table.push_str(&line);
        table.push('\n');
    }
    let shown = escape::terminal(&dir.display().to_string());
    let merge = match &replica {
        Some(r) => format!(
            "  replica {} of run {}: when all {} are done, capsize merge {}\n",
            r.label(),
            escape::terminal(&r.run_id),
            r.count,
            escape::terminal(&dir.parent().unwrap_or(&dir).display().to_string())
        ),
        None => String::new(),
    };
    out(&format!(
        "{table}\n  wrote {shown}/{{{}}}\n{merge}",
        files.join(", ")
    ))
}
