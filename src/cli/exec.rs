//! `capsize exec`: run someone else's agent against the mock and report what the provider saw.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args as ClapArgs;

use super::{default_out, out, seed_flag, Failure};
use crate::analysis::check;
use crate::engine::exec::{self as engine, Ending, ExecRequest};
use crate::engine::scenario::Scenario;
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
    #[arg(long)]
    check: bool,
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
    let dir = match &args.out {
        Some(_) => default_out(&args.out, &scenario.name),
        None => default_out(&None, &scenario.name).join("exec"),
    };
    let mut outputs = OutputSet::new();
    outputs.scenario(&args.scenario, &args.sets);
    report::declare(&mut outputs, &dir);
    outputs.check().map_err(|e| Failure::output(&e))?;
    Ok(Prepared {
        scenario,
        dir,
        outputs,
    })
}

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
        };
        let outcome = engine::run(&self.scenario, &request).map_err(|e| {
            if e.is_bad_input() {
                Failure::bad_input(e)
            } else {
                Failure::run_failed(e)
            }
        })?;
        let command: Vec<String> = args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let summary = ExecSummary::new(&self.scenario, &command, &outcome);
        let charts = report::charts(&outcome.traffic.series, self.scenario.provider());
        let mut svgs = Vec::with_capacity(charts.len());
        for (_, chart) in &charts {
            svgs.push(crate::output::report::charts::svg(chart).map_err(Failure::write_failed)?);
        }
        let json = serde_json::to_value(&summary).expect("a summary always serialises");
        let checks = if args.check {
            check::objectives(&self.scenario.slo, &json)
        } else {
            Vec::new()
        };
        let mut outputs = self.outputs;
        outputs.put(self.dir.join(report::SUMMARY), summary.to_json());
        for ((stem, chart), svg) in charts.iter().zip(svgs) {
            crate::output::report::charts::put(&mut outputs, chart, &self.dir, stem, svg);
        }
        let recorded = &outcome.recorded;
        for name in &recorded.files {
            let from = recorded.path(name);
            outputs.put_with(self.dir.join(name), move |to| {
                std::fs::copy(&from, to)
                    .map(drop)
                    .map_err(|e| format!("{}: {e}", from.display()))
            });
        }
        outputs.commit().map_err(|e| Failure::output(&e))?;
        if report::agent_failed(&summary.agent) {
            eprintln!(
                "capsize: the agent failed: {}; its traffic is reported all the same",
                report::agent_end(&summary.agent)
            );
        }
        let dir = escape::terminal(&self.dir.display().to_string());
        let mut text = report::table(&summary);
        text.push_str(&format!(
            "  wrote {dir}/{{summary.json, requests_per_minute, tokens_per_minute, in_flight, rate_limited (.svg, .png)}}\n"
        ));
        let counts = recorded.counts;
        text.push_str(&format!(
            "  recorded {} requests in {dir}/calls.jsonl{}: capsize calibrate reads them\n",
            counts.calls,
            if counts.trace_requests > 0 {
                format!(
                    " and {} trace exports in {dir}/{}",
                    counts.trace_requests,
                    recorded.files[1..].join(", ")
                )
            } else {
                String::new()
            }
        ));
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
            Ending::TimedOut => ExitCode::from(EXIT_TIMED_OUT),
            Ending::Interrupted(sig) => ExitCode::from(128 + u8::try_from(sig).unwrap_or(0)),
            Ending::Exited if checks.iter().all(|c| c.pass) => printed,
            Ending::Exited => ExitCode::from(EXIT_CHECK_FAILED),
        })
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
