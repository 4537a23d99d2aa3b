//! `capsize calibrate`: a scenario measured from the user's own traces, logs or exec
//! recordings, written with its fit table, then checked by replaying the observed conditions
//! through it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{out, Failure, DEFAULT_OUT};
use crate::analysis::calibrate::{self, Calibration, Collector, FitCheck, View};
use crate::engine::observed::{self, Format};
use crate::engine::scenario;
use crate::fmt::fmt_num;
use crate::output::calibrate::values::file_text;
use crate::output::calibrate::{
    client, names, reports, scenario::scenario as written_scenario, verify,
};
use crate::output::files::OutputSet;

/// Flags of `capsize calibrate`.
#[derive(Debug, ClapArgs)]
pub struct CalibrateArgs {
    /// The files to read, each recognized by its content: OTLP JSON traces (the OpenTelemetry
    /// Collector's file exporter, or an OTLP/HTTP JSON body), capsize exec's calls.jsonl, or a
    /// request log (CSV or JSON lines with a timestamp column; the Azure LLM inference and
    /// BurstGPT traces' columns are known by name).
    #[arg(required = true, value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// Output folder (default: capsize-out/<--name>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The calibrated scenario's name.
    #[arg(long, default_value = "calibrated")]
    name: String,
    /// Set a key of the calibrated scenario: what the input cannot say, such as the provider's
    /// limits (providers.NAME.rpm=500) or the client settings it was recorded under
    /// (scheduler.max_concurrency=8). Written into scenario.toml and used by the check.
    #[arg(long = "set", value_name = "KEY.PATH=VALUE")]
    sets: Vec<String>,
    /// Do not check the fit (the check replays the observed conditions through the calibrated
    /// scenario in virtual time and compares query and call figures).
    #[arg(long = "no-check")]
    no_check: bool,
}

/// Reads, fits, writes, checks.
pub fn calibrate(args: CalibrateArgs) -> ExitCode {
    match run(&args) {
        Ok(text) => out(&text),
        Err(f) => f.exit(),
    }
}

fn run(args: &CalibrateArgs) -> Result<String, Failure> {
    // The name names the output folder: refused before anything is read, naming its flag.
    scenario::check_name(&args.name)
        .map_err(|e| Failure::bad_input(format!("--name: {}", e.message)))?;
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new(DEFAULT_OUT).join(&args.name));
    // An input given twice (one file under two names, or the same bytes) would count its
    // rows twice: refused before anything is read.
    observed::repeated(&args.inputs).map_err(Failure::bad_input)?;
    let mut collector = Collector::default();
    let mut reads = Vec::new();
    let formats = args
        .inputs
        .iter()
        .map(|p| observed::detect(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::bad_input)?;
    let traces = |f: &Format| matches!(f, Format::OtlpJson | Format::OtlpProto);
    // The provider's record and the agent's traces together: each gives what it sees best.
    let both = formats.contains(&Format::Calls) && formats.iter().any(traces);
    for (path, format) in args.inputs.iter().zip(&formats) {
        let view = match format {
            Format::Calls if both => View::PROVIDER,
            f if both && traces(f) => View::AGENT,
            _ => View::ALL,
        };
        let read =
            observed::read(path, &mut |s| collector.add(s, view)).map_err(Failure::bad_input)?;
        reads.push(read);
    }
    collector.finish();
    let mut cal = calibrate::calibrate(collector, reads);
    let inputs = describe_inputs(&args.inputs);
    let mut written = written_scenario(&cal, &args.name, &inputs).map_err(Failure::bad_input)?;
    for set in &args.sets {
        written
            .doc
            .apply_set(set)
            .map_err(|m| Failure::bad_input(format!("--set {set}: {m}")))?;
    }
    let target = dir.join("scenario.toml");
    // Read back in memory as `capsize run` will read it: a value out of bounds is refused
    // here, naming where it came from, before anything is written.
    let (mut text, mut parsed) =
        verify::parse(&written, &target, &inputs).map_err(Failure::bad_input)?;
    // With both sides of the model calls read, the difference is the client's own time,
    // fitted by replaying the scenario (unless it was given).
    let given = args
        .sets
        .iter()
        .any(|s| s.trim().starts_with("scheduler.client"));
    if both && !given {
        cal.client = calibrate::client::fit(&parsed, &cal).map_err(Failure::run_failed)?;
        if let Some(fit) = &cal.client {
            client::put(&mut written, fit);
            (text, parsed) =
                verify::parse(&written, &target, &inputs).map_err(Failure::bad_input)?;
        }
    }
    let check = if args.no_check {
        None
    } else {
        Some(calibrate::check(&parsed, &cal).map_err(Failure::run_failed)?)
    };
    let charts = crate::output::calibrate::charts::charts(&cal);
    let mut svgs = Vec::with_capacity(charts.len());
    for (stem, _, chart) in &charts {
        let svg = crate::output::report::charts::svg(chart).map_err(Failure::write_failed)?;
        svgs.push((stem.clone(), svg));
    }
    let (md, html) = reports(&args.name, &cal, check.as_ref(), &written.assumed, &svgs);
    let mut set = OutputSet::new();
    for p in &args.inputs {
        set.input(p, "an input");
    }
    set.put(&target, text.into_bytes());
    for (name, values) in written.files.iter() {
        set.put(dir.join(name), file_text(values).into_bytes());
    }
    for ((stem, _, chart), (_, svg)) in charts.iter().zip(&svgs) {
        crate::output::report::charts::put(&mut set, chart, &dir, stem, svg.clone());
    }
    set.put(dir.join("calibration.md"), md.into_bytes());
    set.put(dir.join("calibration.html"), html.into_bytes());
    set.put(
        dir.join("calibration.json"),
        crate::output::calibrate::json::json(&cal, check.as_ref(), &written.assumed).into_bytes(),
    );
    set.check().map_err(|e| Failure::output(&e))?;
    set.commit().map_err(|e| Failure::output(&e))?;
    Ok(terminal(
        &cal,
        check.as_ref(),
        &dir,
        written.files.iter().count(),
    ))
}

/// The inputs as the scenario's comment names them.
fn describe_inputs(inputs: &[PathBuf]) -> String {
    let names: Vec<String> = inputs
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or(p.as_os_str())
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.join(", ")
}

/// What the terminal shows: the fits in brief, the check, where the files went.
fn terminal(cal: &Calibration, check: Option<&FitCheck>, dir: &Path, extra: usize) -> String {
    let mut s = format!(
        "read {} spans or rows: {} queries over {} s\n",
        fmt_num(cal.reads.iter().map(|r| r.spans).sum::<u64>() as f64),
        fmt_num(cal.queries as f64),
        fmt_num(cal.window_s)
    );
    let skipped = cal.skipped.total();
    if skipped > 0 {
        s.push_str(&format!(
            "skipped or read by assumption: {} (see calibration.md)\n",
            fmt_num(skipped as f64)
        ));
    }
    let mut fitted = Vec::new();
    if let Some(p) = &cal.provider {
        if let Some(f) = &p.latency {
            fitted.push((format!("{} latency", p.name), f, " ms"));
        }
        if let Some(f) = &p.input {
            fitted.push((format!("{} input tokens", p.name), f, ""));
        }
    }
    for (t, name) in cal.tools.iter().zip(names::tools(cal)) {
        if let Some(f) = &t.latency {
            fitted.push((
                format!("tool {}", names::tool_label(&name, &t.name)),
                f,
                " ms",
            ));
        }
    }
    for (what, f, unit) in fitted {
        s.push_str(&format!(
            "  {what:<28} {:<12} KS {:.3}  observed p50 {}{unit}, p95 {}{unit}\n",
            f.fit.family.name(),
            f.fit.distance,
            fmt_num(f.observed.p50),
            fmt_num(f.observed.p95)
        ));
    }
    if let Some(c) = &cal.client {
        s.push_str(&format!(
            "  {:<28} {} ms a request on one thread: model calls took the agent {} ms (p50), \
             the provider {} ms\n",
            "the client's own time",
            fmt_num(c.work_ms),
            fmt_num(c.observed_p50),
            fmt_num(c.provider_p50)
        ));
    }
    if let Some(c) = check {
        s.push_str(&format!(
            "check (the calibrated scenario under the observed conditions, virtual time, {} \
             seed{} pooled):\n",
            c.runs,
            if c.runs == 1 { "" } else { "s" }
        ));
        for r in &c.rows {
            let ratio = r.ratio().map_or("n/a".into(), |x| format!("{x:.3}"));
            let verdict = r.verdict().map_or(String::new(), |v| format!("  {v}"));
            s.push_str(&format!(
                "  {:<28} observed {:>10}  predicted {:>10}  ratio {ratio}{verdict}\n",
                r.what,
                fmt_num(r.observed),
                fmt_num(r.predicted)
            ));
        }
    }
    s.push_str(&format!(
        "wrote {}: scenario.toml, calibration.md, calibration.html, calibration.json{}\n",
        dir.display(),
        if extra > 0 {
            format!(" and {extra} empirical file(s)")
        } else {
            String::new()
        }
    ));
    s
}
