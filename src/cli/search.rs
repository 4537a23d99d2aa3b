//! `capsize search`: the largest (or smallest) value of one numeric key that still meets the
//! scenario's objectives ([`crate::output::sweep::search`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{default_out, out, realtime_options, ClockArgs, Failure};
use crate::analysis::plan::fmt_num;
use crate::engine::scenario;
use crate::output::files::OutputSet;
use crate::output::report::{escape, metrics};
use crate::output::sweep::search::{self, Found, Probe, SearchError, SearchSpec};
use crate::output::sweep::SweepOptions;

/// Flags of `capsize search`.
#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("direction").required(true).args(["max", "min"])))]
pub struct SearchArgs {
    /// The scenario file (TOML), with the [slo] objectives to meet.
    scenario: PathBuf,
    /// Find the largest value of this key that meets the objectives (a load:
    /// workload.sessions, workload.arrival_rate).
    #[arg(long, value_name = "KEY.PATH")]
    max: Option<String>,
    /// Find the smallest value of this key that meets the objectives (a capacity:
    /// scheduler.max_concurrency, provider.rpm).
    #[arg(long, value_name = "KEY.PATH")]
    min: Option<String>,
    /// Where to start (default: the scenario's own value of the key).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    from: Option<String>,
    /// The largest value to try (default: 2^20 times the start).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    to: Option<f64>,
    /// Seeds per probe; a probe whose seeds disagree runs this many more, up to --max-repeats.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeats: u32,
    /// The most seeds a noisy probe runs.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_repeats: u32,
    /// A fractional key's answer to within this share of its value (0.01: 1 %).
    #[arg(long, default_value_t = 0.01)]
    precision: f64,
    /// Override any key (repeatable): a scalar or an inline table, as for `capsize run`.
    #[arg(long = "set", value_name = "KEY.PATH=VALUE")]
    sets: Vec<String>,
    /// Override the scenario's seed (each probe's seeds derive from it).
    #[arg(long, value_parser = super::seed_flag)]
    seed: Option<u64>,
    /// Runs at once (default: the number of cores). Real time runs one at a time.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output folder for search.csv (default: capsize-out/<name>/search/).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    clock: ClockArgs,
}

/// The file a search writes.
const CSV: &str = "search.csv";

/// The key's value in the scenario file, and whether it is an integer.
fn own_value(text: &str, key: &str) -> Option<(f64, bool)> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let mut v = table.get(key.split('.').next()?)?;
    for part in key.split('.').skip(1) {
        v = v.get(part)?;
    }
    match v {
        toml::Value::Integer(i) => Some((*i as f64, true)),
        toml::Value::Float(f) => Some((*f, false)),
        _ => None,
    }
}

/// The search's spec from the flags and the scenario's text.
fn spec(args: &SearchArgs, key: &str, max: bool, text: &str) -> Result<SearchSpec, String> {
    if let Some(set) = args.sets.iter().find(|s| scenario::set_key(s) == Some(key)) {
        return Err(format!(
            "--set {set} gives the key the search varies: drop it or search another key"
        ));
    }
    let own = own_value(text, key);
    let (from, integer) = match &args.from {
        Some(f) => {
            let v: f64 = f
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v > 0.0)
                .ok_or_else(|| format!("--from {f:?}: not a number above 0"))?;
            let integer = own.map_or(!f.contains(['.', 'e', 'E']), |(_, i)| i);
            (v, integer)
        }
        None => own.filter(|(v, _)| *v > 0.0).ok_or_else(|| {
            format!("{key} has no number above 0 in the scenario to start from: give --from N")
        })?,
    };
    if let Some(to) = args.to.filter(|t| !(t.is_finite() && *t > from)) {
        return Err(format!(
            "--to {to}: must be above the start, {}",
            fmt_num(from)
        ));
    }
    if !(args.precision > 0.0 && args.precision < 1.0) {
        return Err(format!(
            "--precision {}: a share in (0, 1), e.g. 0.01",
            args.precision
        ));
    }
    if args.max_repeats < args.repeats {
        return Err(format!(
            "--max-repeats {} is below --repeats {}",
            args.max_repeats, args.repeats
        ));
    }
    Ok(SearchSpec {
        key: key.to_string(),
        max,
        from,
        to: args.to,
        integer,
        precision: args.precision,
        repeats: args.repeats,
        max_repeats: args.max_repeats,
    })
}

/// A probe's row: value, seeds passing, queries/s, query p95, 429s, verdict.
fn row(spec: &SearchSpec, p: &Probe) -> [String; 6] {
    let get = |m: metrics::Metric| m.read(&p.result.mean).map_or(String::new(), fmt_num);
    let verdict = if p.passes() {
        "passes".to_string()
    } else {
        let reasons: Vec<String> = p.failures.iter().map(|f| f.to_string()).collect();
        format!("fails: {}", reasons.join("; "))
    };
    [
        search::shown(spec, p.value),
        format!("{}/{}", p.seeds_passing, p.result.runs.len()),
        get(metrics::QUERIES_PER_S),
        get(metrics::QUERY_P95),
        get(metrics::PROVIDER_RATE_LIMITED),
        verdict,
    ]
}

/// `search.csv`: a row per probe, in the order run.
fn csv(spec: &SearchSpec, found: &Found) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        spec.key.as_str(),
        "seeds_passing",
        "queries_per_s",
        "query_p95_ms",
        "rate_limited",
        "verdict",
    ])?;
    for p in &found.probes {
        w.write_record(row(spec, p))?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The answer in words.
fn answer(spec: &SearchSpec, found: &Found) -> String {
    let which = if spec.max { "largest" } else { "smallest" };
    let probe = |i: usize| &found.probes[i];
    match (found.answer, found.beyond) {
        (Some(a), b) => {
            let a = probe(a);
            let mut line = format!(
                "{which} {} that meets the objectives: {}",
                spec.key,
                search::shown(spec, a.value)
            );
            if a.noisy() {
                let _ = write!(
                    line,
                    " (noisy: {} of its {} seeds pass on their own; judged on their mean)",
                    a.seeds_passing,
                    a.result.runs.len()
                );
            }
            match b.map(probe) {
                Some(b) => {
                    let reasons: Vec<String> = b.failures.iter().map(|f| f.to_string()).collect();
                    let _ = write!(
                        line,
                        "; {} fails: {}",
                        search::shown(spec, b.value),
                        reasons.join("; ")
                    );
                }
                // Nothing failed on the far side: the search stopped at its bound.
                None if spec.max => {
                    let _ = write!(
                        line,
                        "; every value tried passes: the answer may lie beyond {} (raise --to)",
                        search::shown(spec, a.value)
                    );
                }
                None => {
                    let _ = write!(
                        line,
                        "; every value tried passes, down to the smallest the key takes here"
                    );
                }
            }
            line
        }
        (None, _) => {
            let last = found.probes.last();
            let reasons: Vec<String> = last
                .map(|p| p.failures.iter().map(|f| f.to_string()).collect())
                .unwrap_or_default();
            format!(
                "no value of {} tried meets the objectives (down to {}: {})",
                spec.key,
                last.map_or(String::new(), |p| search::shown(spec, p.value)),
                reasons.join("; ")
            )
        }
    }
}

/// `capsize search`.
pub fn search(args: SearchArgs) -> ExitCode {
    let realtime = match realtime_options(&args.clock) {
        Ok(r) => r,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let (key, max) = match (&args.max, &args.min) {
        (Some(k), None) => (k.trim().to_string(), true),
        (None, Some(k)) => (k.trim().to_string(), false),
        _ => return Failure::bad_input("give one of --max KEY or --min KEY").exit(),
    };
    let mut sets = args.sets.clone();
    if let Some(seed) = args.seed {
        sets.push(format!("seed={seed}"));
    }
    let text = match scenario::read(&args.scenario) {
        Ok(t) => t,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let base = match scenario::parse(&text, &args.scenario, &sets) {
        Ok(s) => s,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    if base.slo.is_empty() {
        return Failure::bad_input(format!(
            "{}: no [slo] objectives to meet: add an [slo] table (e.g. \"latency_ms.query.p95\" = \"< 2000\")",
            args.scenario.display()
        ))
        .exit();
    }
    if let Err(e) =
        crate::analysis::check::validate(&base.slo, &base.slo_tolerance, &base.provider_names())
    {
        return Failure::bad_input(format!("{}: {e}", args.scenario.display())).exit();
    }
    let spec = match spec(&args, &key, max, &text) {
        Ok(s) => s,
        Err(e) => return Failure::bad_input(format!("{}: {e}", args.scenario.display())).exit(),
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Failure::bad_input("--jobs 0: at least one").exit();
    }
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&None, &base.name).join("search"));
    let mut outputs = OutputSet::new();
    outputs.scenario(&args.scenario, &sets);
    outputs.output(dir.join(CSV), "--out");
    if let Err(e) = outputs.check() {
        return Failure::output(&e).exit();
    }
    super::warn(&base);
    let opts = SweepOptions {
        repeats: spec.repeats,
        first_repeat: 0,
        jobs,
        realtime,
        progress: false,
    };
    let shown = |p: &Probe| {
        let [v, seeds, qps, p95, limited, verdict] = row(&spec, p);
        eprintln!(
            "capsize search: {key} = {v}: {verdict} ({seeds} seeds pass; {qps} queries/s, p95 {p95} ms, {limited} 429s)"
        );
    };
    let found = match search::search(&args.scenario, &sets, &spec, &base.slo, &opts, shown) {
        Ok(f) => f,
        Err(SearchError::Grid(e)) => return Failure::bad_input(e).exit(),
        Err(SearchError::Run(e)) if super::is_bad_input(&e.source) => {
            return Failure::bad_input(e).exit()
        }
        Err(SearchError::Run(e)) => return Failure::run_failed(e).exit(),
    };
    let table = match csv(&spec, &found) {
        Ok(t) => t,
        Err(e) => return Failure::write_failed(e).exit(),
    };
    outputs.put(dir.join(CSV), table);
    if let Err(e) = outputs.commit() {
        return Failure::output(&e).exit();
    }
    out(&format!(
        "{}: {} probes of {} seeds or more\n{}\n  wrote {}\n",
        escape::terminal(&base.name),
        found.probes.len(),
        spec.repeats,
        escape::terminal(&answer(&spec, &found)),
        escape::terminal(&Path::new(&dir).join(CSV).display().to_string())
    ))
}
