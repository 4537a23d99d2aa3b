//! `capsize exec`: run someone else's agent against the mock and report what the provider saw.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args as ClapArgs;

use super::run::ReplicaArgs;
use super::{check_redis, check_target, default_out, out, seed_flag, Failure};
use crate::analysis::check;
use crate::engine::exec::fleet::Member;
use crate::engine::exec::record::Recorded;
use crate::engine::exec::{self as engine, Ending, ExecRequest, Target};
use crate::engine::scenario::Scenario;
use crate::engine::sim::replica::{ReplicaOf, RECORD_FILE};
use crate::engine::summary::Summary;
use crate::output::exec::{self as report, ExecSummary};
use crate::output::files::OutputSet;
use crate::output::report::escape;

/// Exit code of an objective that failed (`--check`).
const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code when `--timeout` stopped the agent.
pub const EXIT_TIMED_OUT: u8 = 3;
/// The longest `--timeout`: a year.
const MAX_TIMEOUT_S: f64 = 365.0 * 86_400.0;

/// Flags of `capsize exec`.
#[derive(Debug, ClapArgs)]
pub struct ExecArgs {
    /// The scenario file (TOML): its [provider] is served; with --check, its [slo] is checked.
    scenario: PathBuf,
    /// Override the scenario's seed (the mock's randomness: latencies, errors).
    #[arg(long, value_parser = seed_flag)]
    seed: Option<u64>,
    /// Override any key (repeatable): a scalar, e.g. --set scheduler.max_concurrency=8, or an
    /// inline table, e.g. --set provider.latency='{ dist = "uniform", min_ms = 200, max_ms = 900 }'.
    #[arg(long = "set", value_name = "KEY.PATH=VALUE")]
    sets: Vec<String>,
    /// Output folder (default: capsize-out/<scenario name>/exec/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Stop the agent (and everything it started) after this long: 90s, 5m, 1h, 1500ms, or a
    /// number of seconds. Exit 3.
    #[arg(long, value_parser = duration_flag, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// Gate CI: check the scenario's [slo] objectives on summary.json (exit 0 all pass, 1 one
    /// fails, 2 an objective names a metric summary.json does not have, or there is none).
    /// Not with --replica: check the merged fleet's summary.json with `capsize check`.
    #[arg(long, conflicts_with = "replica")]
    check: bool,
    /// Send the agent to this running capsize mock (http://HOST:PORT) instead of starting one
    /// here: it must serve the scenario's provider (its GET /config is compared), and it is
    /// reset (POST /reset) before the agent starts. What it saw is read from its GET /report;
    /// the agent's requests are not recorded (no calls.jsonl), nor its traces.
    #[arg(long, value_name = "URL")]
    target: Option<String>,
    /// With --replica: the Redis (redis://HOST:PORT) the replicas start together on.
    #[arg(long, value_name = "URL", requires = "replica")]
    fleet_redis: Option<String>,
    #[command(flatten)]
    replica: ReplicaArgs,
    /// The agent: a command and its arguments, after `--`. {address} in an argument becomes
    /// the mock's HOST:PORT.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// A `--timeout`: `90s`, `5m`, `1h`, `1500ms` or a number of seconds, above 0, at most a year.
fn duration_flag(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .into_iter()
        .find_map(|(suffix, unit)| t.strip_suffix(suffix).map(|n| (n, unit)))
        .unwrap_or((t, 1.0));
    number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * unit)
        .filter(|secs| secs.is_finite() && *secs > 0.0 && *secs <= MAX_TIMEOUT_S)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("{s:?} is not a duration above 0 and at most a year, such as 90s, 5m or 1h")
        })
}

/// Runs the agent, writes the outputs, prints the summary (and the checks); the exit code says
/// how it went.
pub fn exec(args: ExecArgs) -> ExitCode {
    match prepare(&args).and_then(|p| p.run(&args)) {
        Ok(code) => code,
        Err(f) => f.exit(),
    }
}

/// Everything that can be refused has been, before the agent runs.
struct Prepared<'a> {
    scenario: Scenario,
    dir: PathBuf,
    outputs: OutputSet<'a>,
    target: Option<Target>,
}

/// The target and, for a replica, the fleet it is one of; refused in one line where a flag
/// is missing.
fn target_of(args: &ExecArgs) -> Result<Option<Target>, Failure> {
    let mut sets = args.sets.clone();
    sets.extend(args.seed.map(|s| format!("seed={s}")));
    // An exec runs its provider at model time itself: time scale 1.
    let replica = args.replica.of(&args.scenario, &sets, 1.0)?;
    if let Some(url) = &args.target {
        check_target(url).map_err(Failure::bad_input)?;
    }
    if let Some(url) = &args.fleet_redis {
        check_redis(url).map_err(Failure::bad_input)?;
    }
    let Some(url) = &args.target else {
        return match replica {
            Some(r) => Err(Failure::bad_input(format!(
                "--replica {}: the replicas' agents send to one provider: give --target URL (a `capsize mock` every replica reaches)",
                r.label()
            ))),
            None => Ok(None),
        };
    };
    let replica = match (replica, &args.fleet_redis) {
        (Some(r), Some(redis)) => Some((r, redis.clone())),
        (Some(r), None) => {
            return Err(Failure::bad_input(format!(
                "--replica {}: the replicas start together on Redis: give --fleet-redis redis://HOST:PORT",
                r.label()
            )))
        }
        (None, _) => None,
    };
    Ok(Some(Target {
        url: url.trim_end_matches('/').to_string(),
        replica,
    }))
}

fn prepare(args: &ExecArgs) -> Result<Prepared<'_>, Failure> {
    let mut scenario = crate::engine::scenario::load_for_exec(&args.scenario, &args.sets)
        .map_err(Failure::bad_input)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if args.check {
        let at = args.scenario.display();
        if scenario.slo.is_empty() {
            return Err(Failure::bad_input(format!(
                "{at}: nothing to check: the scenario has no [slo] objectives"
            )));
        }
        let known = ExecSummary::metric_paths();
        if let Some(t) = scenario.slo.iter().find(|t| !known.contains(&t.metric)) {
            return Err(Failure::bad_input(format!(
                "{at}: [slo]: {:?} is not a metric of capsize exec's summary.json{}; it has {}",
                t.metric,
                if Summary::metric_paths().contains(&t.metric) {
                    " (capsize run measures it on capsize's own client; exec sees only what the mock saw of the agent)"
                } else {
                    ""
                },
                ExecSummary::metric_families().join(", ")
            )));
        }
    }
    let target = target_of(args)?;
    let mut dir = exec_dir(&args.out, &scenario);
    let mut outputs = OutputSet::new();
    outputs.scenario(&args.scenario, &args.sets);
    match target.as_ref().and_then(|t| t.replica.as_ref()) {
        Some((me, _)) => {
            dir = dir.join(me.folder());
            outputs.output(dir.join(RECORD_FILE), "--out");
        }
        None => report::declare(&mut outputs, &dir),
    }
    outputs.check().map_err(|e| Failure::output(&e))?;
    Ok(Prepared {
        scenario,
        dir,
        outputs,
        target,
    })
}

/// Where exec writes: `--out`, or capsize-out/<scenario name>/exec/.
pub(super) fn exec_dir(out: &Option<PathBuf>, scenario: &Scenario) -> PathBuf {
    match out {
        Some(_) => default_out(out, &scenario.name),
        None => default_out(&None, &scenario.name).join("exec"),
    }
}

/// Puts `summary`'s summary.json and the `charts` (`report::charts` of what the provider saw)
/// into `dir`.
pub(super) fn put_summary<'a>(
    outputs: &mut OutputSet<'a>,
    dir: &std::path::Path,
    summary: &ExecSummary,
    charts: &'a [(&'static str, crate::output::report::charts::Chart)],
) -> Result<(), Failure> {
    let mut svgs = Vec::with_capacity(charts.len());
    for (_, chart) in charts {
        svgs.push(crate::output::report::charts::svg(chart).map_err(Failure::write_failed)?);
    }
    outputs.put(dir.join(report::SUMMARY), summary.to_json());
    for ((stem, chart), svg) in charts.iter().zip(svgs) {
        crate::output::report::charts::put(outputs, chart, dir, stem, svg);
    }
    Ok(())
}

/// The files [`put_summary`] writes, as the summary line names them.
pub(super) const SUMMARY_FILES: &str =
    "summary.json, requests_per_minute, tokens_per_minute, in_flight, rate_limited (.svg, .png)";

impl Prepared<'_> {
    fn run(self, args: &ExecArgs) -> Result<ExitCode, Failure> {
        let (program, rest) = args
            .command
            .split_first()
            .ok_or_else(|| Failure::bad_input("no COMMAND after `--` (see --help)"))?;
        let request = ExecRequest {
            program: program.clone(),
            args: rest.to_vec(),
            timeout: args.timeout,
            target: self.target.clone(),
        };
        // A mock started here takes the agent's traces, over whatever the user's environment
        // says (a signal's own endpoint would otherwise take them elsewhere, silently).
        let overrode = match self.target {
            None => engine::otel::overridden(),
            Some(_) => Vec::new(),
        };
        if !overrode.is_empty() {
            eprintln!(
                "capsize: the agent's traces go to the mock: overriding {} of the environment",
                overrode.join(", ")
            );
        }
        let outcome = engine::run(&self.scenario, &request).map_err(|e| match e {
            engine::ExecError::Stopped(sig) => Failure {
                code: 128 + u8::try_from(sig).unwrap_or(0),
                message: e.to_string(),
            },
            engine::ExecError::Target(sim) if super::is_bad_input(&sim) => Failure::bad_input(sim),
            e if e.is_bad_input() => Failure::bad_input(e),
            e => Failure::run_failed(e),
        })?;
        let command: Vec<String> = args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let code = match outcome.agent.ending {
            Ending::TimedOut => ExitCode::from(EXIT_TIMED_OUT),
            Ending::Interrupted(sig) => ExitCode::from(128 + u8::try_from(sig).unwrap_or(0)),
            Ending::Exited => ExitCode::SUCCESS,
        };
        if let Some((me, _)) = self.target.clone().and_then(|t| t.replica) {
            return self.write_replica(args, &me, command, outcome, code);
        }
        let agents = [(command, outcome.agent)];
        let summary = ExecSummary::new(&self.scenario, &agents, &outcome.report);
        let json = summary.to_value();
        let checks = if args.check {
            check::objectives(&self.scenario.slo, &json)
        } else {
            Vec::new()
        };
        let charts = report::charts(&outcome.report.traffic.series, self.scenario.provider());
        let mut outputs = self.outputs;
        put_summary(&mut outputs, &self.dir, &summary, &charts)?;
        if let Some(recorded) = &outcome.recorded {
            for name in &recorded.files {
                let from = recorded.path(name);
                outputs.put_with(self.dir.join(name), move |to| {
                    std::fs::copy(&from, to)
                        .map(drop)
                        .map_err(|e| format!("{}: {e}", from.display()))
                });
            }
        }
        outputs.commit().map_err(|e| Failure::output(&e))?;
        say_if_failed(&summary.agent);
        let dir = escape::terminal(&self.dir.display().to_string());
        let mut text = report::table(&summary);
        text.push_str(&format!("  wrote {dir}/{{{SUMMARY_FILES}}}\n"));
        match &outcome.recorded {
            Some(recorded) => {
                text.push_str(&recorded_line(recorded, &dir));
                say_if_untraced(recorded, &overrode);
            }
            None => text.push_str(
                "  the agent's requests went to --target: not recorded here (no calls.jsonl)\n",
            ),
        }
        if args.check {
            text.push_str(&format!(
                "\ncapsize exec --check: {} (seed {}, exec)\n\n{}",
                escape::terminal(&self.scenario.name),
                self.scenario.seed,
                crate::output::check::table(&checks)
            ));
        }
        let printed = out(&text);
        Ok(match outcome.agent.ending {
            Ending::Exited if checks.iter().all(|c| c.pass) => printed,
            Ending::Exited => ExitCode::from(EXIT_CHECK_FAILED),
            _ => code,
        })
    }

    /// A replica writes its `replica.json` (its agent's end, its reading of the target) and
    /// says how its agent ended; the fleet's summary is `capsize merge`'s.
    fn write_replica(
        self,
        args: &ExecArgs,
        me: &ReplicaOf,
        command: Vec<String>,
        outcome: engine::ExecOutcome,
        code: ExitCode,
    ) -> Result<ExitCode, Failure> {
        let agent = outcome.agent;
        // The summary of what this replica saw, for its own line only.
        let summary =
            ExecSummary::new(&self.scenario, &[(command.clone(), agent)], &outcome.report);
        let member = Member {
            command,
            agent,
            report: outcome.report,
        };
        let mut outputs = self.outputs;
        super::run::put_record(&mut outputs, &self.dir, me, &args.scenario, member)?;
        outputs.commit().map_err(|e| Failure::output(&e))?;
        say_if_failed(&summary.agent);
        let shown = escape::terminal(&self.dir.display().to_string());
        let parent =
            escape::terminal(&self.dir.parent().unwrap_or(&self.dir).display().to_string());
        let verdict = if report::agent_failed(&summary.agent) {
            "FAILED"
        } else {
            "ok"
        };
        let printed = out(&format!(
            "replica {} of run {} ({}): agent {verdict}: {} after {:.1} s\n  wrote {shown}/{RECORD_FILE}\n  when all {} are done: capsize merge {parent}\n",
            me.label(),
            escape::terminal(&me.run_id),
            escape::terminal(&self.scenario.name),
            report::agent_end(&summary.agent),
            summary.agent.wall_seconds,
            me.count,
        ));
        Ok(match agent.ending {
            Ending::Exited => printed,
            _ => code,
        })
    }
}

/// The summary's line naming what was recorded in `dir` (shown as it is given).
fn recorded_line(recorded: &Recorded, dir: &str) -> String {
    let counts = recorded.counts;
    let traces = match counts.trace_requests {
        0 => String::new(),
        n => format!(
            " and {n} trace exports in {dir}/{}",
            recorded.files[1..].join(", ")
        ),
    };
    let refused = match (counts.trace_refused, &recorded.first_refusal) {
        (0, _) | (_, None) => String::new(),
        (n, Some(first)) => format!(
            " ({n} trace exports refused, the first {})",
            escape::terminal(first)
        ),
    };
    format!(
        "  recorded {} requests in {dir}/calls.jsonl{traces}{refused}: capsize calibrate reads them\n",
        counts.calls
    )
}

/// Says on stderr, in one line, that an agent that looks instrumented (its requests carry a
/// `traceparent`, it exported traces that were refused, or its environment set OpenTelemetry
/// variables exec `overrode`) left no traces for calibrate.
fn say_if_untraced(recorded: &Recorded, overrode: &[&str]) {
    let c = recorded.counts;
    if c.trace_requests > 0 {
        return;
    }
    let seen = match (c.trace_refused, &recorded.first_refusal) {
        (1, Some(first)) => format!(
            "its one trace export was refused ({})",
            escape::terminal(first)
        ),
        (n, Some(first)) if n > 1 => format!(
            "its {n} trace exports were all refused (the first {})",
            escape::terminal(first)
        ),
        _ if c.traced_calls > 0 => format!(
            "{} of its {} requests carried a traceparent, but it exported no traces to the mock",
            c.traced_calls, c.calls
        ),
        _ if !overrode.is_empty() => format!(
            "its environment sets {}, but it exported no traces to the mock",
            overrode.join(", ")
        ),
        _ => return,
    };
    eprintln!(
        "capsize: warning: the agent looks instrumented: {seen}: no traces recorded (is OTEL_TRACES_EXPORTER otlp, and does it flush its spans before it exits?)"
    );
}

/// Says on stderr that the agent failed, if it did (its traffic is reported all the same).
pub(super) fn say_if_failed(agent: &crate::output::exec::AgentSummary) {
    if report::agent_failed(agent) {
        eprintln!(
            "capsize: the agent failed: {}; its traffic is reported all the same",
            report::agent_end(agent)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::duration_flag;
    use std::time::Duration;

    #[test]
    fn timeouts_take_units() {
        let ok = |s: &str| duration_flag(s).unwrap();
        assert_eq!(ok("90"), Duration::from_secs(90));
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("1500ms"), Duration::from_millis(1500));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok(" 1h "), Duration::from_secs(3600));
        for bad in ["0", "-1s", "abc", "1d", "inf", "400000h", ""] {
            assert!(duration_flag(bad).is_err(), "{bad}");
        }
    }
}
