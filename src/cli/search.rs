//! `capsize search`: the largest (or smallest) value of one numeric key that still meets the
//! scenario's objectives, or (`--over KEY --min METRIC`) the passing value with the least mean
//! of a metric ([`crate::analysis::sweep::search`]); what it writes is
//! [`crate::output::sweep::search`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{default_out, out, realtime_options, ClockArgs, Failure};
use crate::analysis::sweep::search::{self, Outside, Probe, SearchError, SearchSpec, Step};
use crate::analysis::sweep::SweepOptions;
use crate::engine::scenario;
use crate::fmt::fmt_num;
use crate::output::files::OutputSet;
use crate::output::report::escape;
use crate::output::sweep::search::{answer, check_words, csv, metric_cell, not_monotone, row, CSV};

/// Flags of `capsize search`.
#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("direction").required(true).args(["max", "min"])))]
pub struct SearchArgs {
    /// The scenario file (TOML), with the [slo] objectives to meet.
    scenario: PathBuf,
    /// Find the largest value of this key that meets the objectives (a load:
    /// workload.sessions, workload.arrival_rate). With --over: the greatest mean of this
    /// metric of summary.json.
    #[arg(long, value_name = "KEY.PATH")]
    max: Option<String>,
    /// Find the smallest value of this key that meets the objectives (a capacity:
    /// scheduler.max_concurrency, provider.rpm). With --over: the least mean of this metric
    /// of summary.json (cost.per_good_query_usd: the cheapest passing value).
    #[arg(long, value_name = "KEY.PATH")]
    min: Option<String>,
    /// Search this key for the passing value with the least (--min) or greatest (--max) mean
    /// of a metric, instead of for the edge of the passing values.
    #[arg(long, value_name = "KEY.PATH")]
    over: Option<String>,
    /// Where to start (default: the scenario's own value of the key).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    from: Option<String>,
    /// The largest value to try (default: 2^20 times the start, at most the key's own bound).
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
fn spec(
    args: &SearchArgs,
    key: &str,
    max: bool,
    metric: Option<String>,
    text: &str,
) -> Result<SearchSpec, String> {
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
            if integer && v.round() < 1.0 {
                return Err(format!(
                    "--from {f:?}: {key} takes integers: give 1 or more"
                ));
            }
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
        metric,
    })
}

/// Refuses a `--min`/`--max` metric that summary.json does not have (or a cost without a
/// price), and a metric given as the key to search without `--over`.
fn metric_known(
    base: &crate::engine::scenario::Scenario,
    key: &str,
    max: bool,
    metric: Option<&str>,
) -> Result<(), String> {
    use crate::engine::summary::Summary;
    let flag = if max { "--max" } else { "--min" };
    let providers = base.provider_names();
    let is_metric = |m: &str| Summary::is_metric(m, &providers);
    match metric {
        None if is_metric(key) => Err(format!(
            "{flag} {key}: a metric of summary.json, not a key of the scenario: give --over KEY to find the KEY value with the {} {key} (e.g. --over scheduler.max_concurrency)",
            search::extremum(max).answer
        )),
        Some(m) if !is_metric(m) => Err(format!(
            "{flag} {m}: with --over, {flag} takes a metric of summary.json, such as cost.per_good_query_usd or latency_ms.query.p95"
        )),
        Some(m) if m.starts_with("cost.") && !base.priced() => Err(format!(
            "{flag} {m}: the scenario has no price, so nothing is billed: add one ([provider] price = {{ input_per_mtok = 3.0, output_per_mtok = 15.0 }})"
        )),
        _ => Ok(()),
    }
}

/// Refuses a start or `--to` the key does not take, naming the flag, its value and the key's
/// bound, before any probe runs (the whole line: the scenario's own error when the key takes
/// no value near it).
fn within_bounds(
    path: &Path,
    sets: &[String],
    spec: &SearchSpec,
    from: Option<&str>,
    own: Option<f64>,
) -> Result<(), String> {
    let say = |flag: &str, given: &str, o: Outside| match o {
        Outside::Above(b) => format!(
            "{}: {flag} {given}: above the largest {} takes, {}",
            path.display(),
            spec.key,
            search::shown(spec, b)
        ),
        Outside::Below(b) => format!(
            "{}: {flag} {given}: below the smallest {} takes, {}",
            path.display(),
            spec.key,
            search::shown(spec, b)
        ),
        Outside::Refused(e) => e.to_string(),
    };
    let start = search::start(spec);
    if let Some(f) = from {
        if let Some(o) = search::outside(path, sets, spec, start, own) {
            return Err(say("--from", f.trim(), o));
        }
    }
    if let Some(to) = spec.to {
        let v = if spec.integer { to.floor() } else { to };
        if let Some(o) = search::outside(path, sets, spec, v, Some(start)) {
            return Err(say("--to", &to.to_string(), o));
        }
    }
    Ok(())
}

/// `capsize search`.
pub fn search(args: SearchArgs) -> ExitCode {
    let realtime = match realtime_options(&args.clock, false) {
        Ok(r) => r,
        Err(e) => return Failure::bad_input(e).exit(),
    };
    let (target, max) = match (&args.max, &args.min) {
        (Some(k), None) => (k.trim().to_string(), true),
        (None, Some(k)) => (k.trim().to_string(), false),
        _ => return Failure::bad_input("give one of --max KEY or --min KEY").exit(),
    };
    // With --over, --min and --max name a metric; without, the key searched.
    let (key, metric) = match &args.over {
        Some(over) => (over.trim().to_string(), Some(target)),
        None => (target, None),
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
    if let Err(f) = super::preflight(realtime.as_ref(), [&base]) {
        return f.exit();
    }
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
    if let Err(e) = metric_known(&base, &key, max, metric.as_deref()) {
        return Failure::bad_input(format!("{}: {e}", args.scenario.display())).exit();
    }
    let spec = match spec(&args, &key, max, metric, &text) {
        Ok(s) => s,
        Err(e) => return Failure::bad_input(format!("{}: {e}", args.scenario.display())).exit(),
    };
    let own = own_value(&text, &key).map(|(v, _)| v);
    if let Err(e) = within_bounds(&args.scenario, &sets, &spec, args.from.as_deref(), own) {
        return Failure::bad_input(e).exit();
    }
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
        // Ctrl-C ends a search at once, as before: its probes are not kept.
        stop: None,
    };
    // Each probe as it finishes; before the first that checks the other way, why.
    let (mut lowest, mut highest) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut checking = false;
    let shown = |p: &Probe| {
        if matches!(p.step, Step::CheckUp | Step::CheckDown) && !checking {
            checking = true;
            let why = check_words(&spec, lowest, highest, p.step);
            eprintln!("capsize search: {}", escape::terminal(&why));
        }
        lowest = lowest.min(p.value);
        highest = highest.max(p.value);
        let [v, seeds, qps, p95, limited, verdict, step, _] = row(&spec, None, p);
        let metric = match (spec.metric.as_deref(), metric_cell(&spec, p)) {
            (Some(m), Some(value)) if !value.is_empty() => format!("; {m} {value}"),
            _ => String::new(),
        };
        eprintln!(
            "capsize search: {key} = {v} ({step}): {verdict} ({seeds} seeds pass{metric}; {qps} queries/s, p95 {p95} ms, {limited} 429s)"
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
    let note = not_monotone(&spec, &found)
        .map_or(String::new(), |n| format!("{}\n", escape::terminal(&n)));
    out(&format!(
        "{}: {} probes of {} seeds or more{}\n{}\n{}  wrote {}\n",
        escape::terminal(&base.name),
        found.probes.len(),
        spec.repeats,
        match (note.is_empty(), spec.metric.is_some()) {
            (true, _) => String::new(),
            (false, false) => "; passing is not monotone".into(),
            (false, true) => format!("; not one {}", spec.extremum().noun),
        },
        escape::terminal(&answer(&spec, &found)),
        note,
        escape::terminal(&Path::new(&dir).join(CSV).display().to_string())
    ))
}
