//! Reading what `capsize compare` compares: a run (summary.json, with the `.hgrm` files beside
//! it when they are there) or a sweep (sweep.csv, with report.md beside it when it is there),
//! named by the file or by its folder. Everything is checked here, so a comparison never meets
//! a missing number it needs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::noise::Hgrm;
use super::CompareError;
use crate::engine::summary::metrics;
use crate::engine::summary::slo;

/// The most bytes read from one file.
const LIMIT: u64 = 256 << 20;

/// The counts summary.json's comparison reads: each a whole number from 0 to `u64::MAX`, so
/// that one reading of it serves the header and the table alike.
const COUNTS: &[&str] = &[
    "seed",
    "queries",
    "queries_started",
    "queries_failed",
    "queries_abandoned",
    "calls",
    "latency_ms.query.count",
    "latency_ms.call.count",
    "provider.received",
    "provider.rate_limited",
    "provider.tokens_charged",
    "retries",
    "errors",
];

/// The other numbers it reads: each finite and 0 or more.
const NUMBERS: &[&str] = &[
    "virtual_seconds",
    "latency_ms.query.mean",
    "latency_ms.query.p50",
    "latency_ms.query.p95",
    "latency_ms.query.p99",
    "latency_ms.query.max",
    "latency_ms.call.p95",
    "throughput.queries_per_s",
    "throughput.calls_per_s",
];

/// What it reads of a priced run (one with a `cost`): counts, then numbers.
const PRICED: (&[&str], &[&str]) = (
    &["provider.served", "cost.good_queries"],
    &["cost.total_usd", "cost.wasted_share"],
);

/// A histogram's figures in the order they cannot go down.
const ORDERED: &[&str] = &["p50", "p90", "p95", "p99", "max"];

/// A run or a sweep, read and checked.
#[derive(Debug, Clone)]
pub enum Record {
    /// A `capsize run`.
    Run(Run),
    /// A `capsize sweep`.
    Sweep(Sweep),
}

impl Record {
    /// `run` or `sweep`.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Run(_) => "run",
            Record::Sweep(_) => "sweep",
        }
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        match self {
            Record::Run(r) => &r.path,
            Record::Sweep(s) => &s.path,
        }
    }
}

/// A run: its summary.json and, when beside it, its two latency histograms.
#[derive(Debug, Clone)]
pub struct Run {
    /// summary.json.
    pub path: PathBuf,
    /// Its content.
    pub json: Value,
    /// query_latency.hgrm, if beside it.
    pub query: Option<Hgrm>,
    /// call_latency.hgrm, if beside it.
    pub call: Option<Hgrm>,
}

impl Run {
    /// The number at a dotted path that [`read`] checked is there (0 otherwise).
    pub fn num(&self, path: &str) -> f64 {
        slo::number(&self.json, path).unwrap_or(0.0)
    }

    /// The count at a dotted path that [`read`] checked is a `u64` (0 otherwise): what
    /// [`Run::num`] reads of it too, exactly where it is below 2⁵³.
    pub fn count(&self, path: &str) -> u64 {
        slo::lookup(&self.json, path)
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// Whether the run has a `cost` (its provider has a price).
    pub fn priced(&self) -> bool {
        self.json.get("cost").is_some_and(Value::is_object)
    }

    /// The words at a top-level field (`scenario`, `mode`), or "?".
    pub fn word(&self, field: &str) -> String {
        self.json
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    }

    /// The provider names of a scenario of several (`providers.NAME`), in the file's order.
    pub fn providers(&self) -> Vec<String> {
        self.json
            .get("providers")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// A provider's field (`providers.NAME.FIELD`), if it is a number.
    pub fn provider(&self, name: &str, field: &str) -> Option<f64> {
        self.json.get("providers")?.get(name)?.get(field)?.as_f64()
    }
}

/// A sweep: its points, each metric's mean and 95 % half-width.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// sweep.csv.
    pub path: PathBuf,
    /// The swept keys, in the file's order.
    pub keys: Vec<String>,
    /// Runs per point.
    pub repeats: usize,
    /// The metric columns, in the file's order (without their `_ci95` twins).
    pub columns: Vec<String>,
    /// The points, in the file's order.
    pub points: Vec<Point>,
    /// The scenario's name, from report.md's title, if report.md is beside it.
    pub scenario: Option<String>,
    /// The recommended point as report.md words it (`max_concurrency = 4 at headroom = 0.7`,
    /// or `none`), if report.md is beside it.
    pub recommended: Option<String>,
}

/// One point of a sweep.
#[derive(Debug, Clone)]
pub struct Point {
    /// The swept values, one per key, as written.
    pub values: Vec<String>,
    /// Per metric column: its mean and its 95 % half-width (`None`: empty in the file).
    pub stats: Vec<(Option<f64>, Option<f64>)>,
}

/// Reads `path`: a summary.json, a sweep.csv, or a folder holding one of them.
pub fn read(path: &Path) -> Result<Record, CompareError> {
    let bad = |reason: String| CompareError::input(path, reason);
    if path.is_dir() {
        let (summary, sweep) = (path.join("summary.json"), path.join("sweep.csv"));
        return match (summary.exists(), sweep.exists()) {
            (true, true) => Err(bad(format!(
                "holds a run (summary.json) and a sweep (sweep.csv): name the one to compare, {} or {}",
                summary.display(),
                sweep.display()
            ))),
            (true, false) => read_run(&summary),
            (false, true) => read_sweep(&sweep),
            (false, false) => Err(bad(
                "holds neither summary.json (a run) nor sweep.csv (a sweep)".into(),
            )),
        };
    }
    let is_csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv {
        read_sweep(path)
    } else {
        read_run(path)
    }
}

/// The text of `path`, or why it cannot be read.
fn text(path: &Path) -> Result<String, CompareError> {
    let bytes = capsize_files::read_regular_file(path, LIMIT)
        .map_err(|e| CompareError::input(path, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|_| CompareError::input(path, "cannot read: not UTF-8 text"))
}

/// A run's summary.json and the histograms beside it.
fn read_run(path: &Path) -> Result<Record, CompareError> {
    let bad = |reason: String| CompareError::input(path, reason);
    let json: Value = serde_json::from_str(&text(path)?).map_err(|e| {
        bad(format!(
            "not JSON ({e}): compare a summary.json of `capsize run`"
        ))
    })?;
    if !json.is_object() {
        return Err(bad("not a summary.json (not a JSON object)".into()));
    }
    let version = json.get(metrics::SCHEMA_VERSION.path());
    if version.and_then(Value::as_u64) != Some(1) {
        return Err(bad(format!(
            "not a summary.json of schema_version 1 (schema_version is {})",
            version.unwrap_or(&Value::Null)
        )));
    }
    let mode = json.get("mode").and_then(Value::as_str);
    if !matches!(mode, Some("virtual" | "realtime")) {
        return Err(bad(format!(
            "mode is {}: compare runs of `capsize run` (virtual or realtime)",
            json.get("mode").unwrap_or(&Value::Null)
        )));
    }
    if !json.get("scenario").is_some_and(Value::is_string) {
        return Err(bad("scenario: missing or not a string".into()));
    }
    check_figures(&json).map_err(bad)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let histogram = |name: &str, count: &str| -> Result<Option<Hgrm>, CompareError> {
        let file = dir.join(name);
        if !file.exists() {
            return Ok(None);
        }
        let h = Hgrm::parse(&text(&file)?).map_err(|e| CompareError::input(&file, e))?;
        let want = slo::lookup(&json, count)
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if h.count != want {
            return Err(CompareError::input(
                &file,
                format!(
                    "holds {} samples where {} says {count} = {want}: not this run's",
                    h.count,
                    path.display()
                ),
            ));
        }
        Ok(Some(h))
    };
    let query = histogram("query_latency.hgrm", "latency_ms.query.count")?;
    let call = histogram("call_latency.hgrm", "latency_ms.call.count")?;
    Ok(Record::Run(Run {
        path: path.to_path_buf(),
        json,
        query,
        call,
    }))
}

/// Checks every figure the comparison reads of summary.json `json`: present, a count or a
/// number of its kind, and not against another (a percentile above the maximum, more 429s
/// than requests). The error names the field or fields, in one line.
fn check_figures(json: &Value) -> Result<(), String> {
    let (mut counts, mut numbers) = (COUNTS.to_vec(), NUMBERS.to_vec());
    let mut optional: Vec<String> = Vec::new();
    if json.get("cost").is_some_and(Value::is_object) {
        counts.extend(PRICED.0);
        numbers.extend(PRICED.1);
    }
    // Each provider of several: what its rows read, where it has it.
    let providers = json.get("providers").and_then(Value::as_object);
    for name in providers.into_iter().flat_map(|m| m.keys()) {
        for f in ["received", "rate_limited", "tokens_charged"] {
            optional.push(format!("providers.{name}.{f}"));
        }
    }
    for (field, required) in counts
        .iter()
        .map(|f| (f.to_string(), true))
        .chain(optional.into_iter().map(|f| (f, false)))
    {
        match slo::lookup(json, &field) {
            Some(v) if v.as_u64().is_some() => {}
            Some(v) => {
                return Err(format!(
                    "{field}: must be a count of 0 or more (a whole number up to {}), got {v}",
                    u64::MAX
                ))
            }
            None if required => return Err(format!("{field}: missing")),
            None => {}
        }
    }
    for field in numbers {
        match slo::lookup(json, field) {
            Some(v) if v.as_f64().is_some_and(|n| n.is_finite() && n >= 0.0) => {}
            Some(v) => return Err(format!("{field}: must be a number of 0 or more, got {v}")),
            None => return Err(format!("{field}: missing")),
        }
    }
    if let Some(w) = slo::number(json, "cost.wasted_share").filter(|w| *w > 1.0) {
        return Err(format!(
            "cost.wasted_share: must be a share from 0 to 1, got {w}"
        ));
    }
    consistent(json)
}

/// Refuses figures of one run that contradict each other: a histogram's percentiles going
/// down (or its mean above its maximum), and more 429s than requests received.
fn consistent(json: &Value) -> Result<(), String> {
    let f = crate::fmt::fmt_num;
    let above = |(lo, a): (&str, f64), (hi, b): (&str, f64), what: &str| {
        format!("{lo} ({}) is above {hi} ({}): {what}", f(a), f(b))
    };
    let histograms = json.get("latency_ms").and_then(Value::as_object);
    for name in histograms.into_iter().flat_map(|m| m.keys()) {
        let path = |stat: &str| format!("latency_ms.{name}.{stat}");
        let at = |stat: &str| slo::number(json, &path(stat)).map(|v| (path(stat), v));
        // Each figure against the maximum first, then each percentile against the next.
        let present: Vec<(String, f64)> = ORDERED.iter().filter_map(|s| at(s)).collect();
        let max = at("max");
        let mean = at("mean");
        let to_max = mean
            .iter()
            .chain(&present)
            .filter_map(|p| max.as_ref().map(|m| (p, m)));
        let pairs = present.windows(2).map(|w| (&w[0], &w[1]));
        for ((lo, a), (hi, b)) in to_max.chain(pairs) {
            if a > b {
                return Err(above((lo, *a), (hi, *b), "not one histogram's figures"));
            }
        }
    }
    let mut sides = vec!["provider".to_string()];
    let providers = json.get("providers").and_then(Value::as_object);
    sides.extend(
        providers
            .into_iter()
            .flat_map(|m| m.keys().map(|n| format!("providers.{n}"))),
    );
    for side in sides {
        let (k, n) = (format!("{side}.rate_limited"), format!("{side}.received"));
        if let (Some(a), Some(b)) = (slo::number(json, &k), slo::number(json, &n)) {
            if a > b {
                return Err(above((&k, a), (&n, b), "every 429 is a request received"));
            }
        }
    }
    Ok(())
}

/// A sweep's sweep.csv and the report.md beside it.
fn read_sweep(path: &Path) -> Result<Record, CompareError> {
    let bad = |reason: String| CompareError::input(path, reason);
    let content = text(path)?;
    let mut reader = csv::ReaderBuilder::new().from_reader(content.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| bad(format!("not a sweep.csv ({e})")))?
        .iter()
        .map(str::to_string)
        .collect();
    let Some(seed_at) = header.iter().position(|h| h == "seed" || h == "seeds") else {
        return Err(bad(
            "not a sweep.csv: no seed or seeds column after the swept keys".into(),
        ));
    };
    if header.last().map(String::as_str) != Some("slo_pass") {
        return Err(bad(
            "not a sweep.csv: its last column is not slo_pass".into()
        ));
    }
    let keys = header[..seed_at].to_vec();
    let metric_cells = &header[seed_at + 1..header.len() - 1];
    let with_ci = header[seed_at] == "seeds";
    let columns: Vec<String> = if with_ci {
        let mut out = Vec::new();
        for pair in metric_cells.chunks(2) {
            match pair {
                [m, ci] if *ci == format!("{m}_ci95") => out.push(m.clone()),
                _ => {
                    return Err(bad(format!(
                        "not a sweep.csv: {} is not followed by its _ci95 column",
                        pair[0]
                    )))
                }
            }
        }
        out
    } else {
        metric_cells.to_vec()
    };
    let mut points: Vec<Point> = Vec::new();
    let mut repeats = 1;
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let record = record.map_err(|e| bad(format!("line {line}: {e}")))?;
        let cells: Vec<&str> = record.iter().collect();
        if with_ci {
            repeats = cells[seed_at].split_whitespace().count().max(repeats);
        }
        let number = |at: usize| -> Result<Option<f64>, CompareError> {
            let cell = cells[at].trim();
            if cell.is_empty() {
                return Ok(None);
            }
            cell.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(Some)
                .ok_or_else(|| {
                    bad(format!(
                        "line {line}: {}: {cell:?} is not a number",
                        header[at]
                    ))
                })
        };
        let step = if with_ci { 2 } else { 1 };
        let mut stats = Vec::new();
        for c in 0..columns.len() {
            let at = seed_at + 1 + c * step;
            let ci = if with_ci { number(at + 1)? } else { None };
            stats.push((number(at)?, ci));
        }
        let values: Vec<String> = cells[..seed_at].iter().map(|v| v.to_string()).collect();
        if points.iter().any(|p| same_point(&p.values, &values)) {
            return Err(bad(format!("line {line}: a point listed twice")));
        }
        points.push(Point { values, stats });
    }
    if points.is_empty() {
        return Err(bad("not a sweep.csv: no points".into()));
    }
    let (scenario, recommended) =
        report(&path.parent().unwrap_or(Path::new(".")).join("report.md"));
    Ok(Record::Sweep(Sweep {
        path: path.to_path_buf(),
        keys,
        repeats,
        columns,
        points,
        scenario,
        recommended,
    }))
}

/// Whether two swept values are the same point's: equal as written, or as numbers.
pub fn same_value(a: &str, b: &str) -> bool {
    a == b || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
}

/// Whether two points' values (in one key order) are the same.
fn same_point(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y))
}

/// The scenario's name (its title) and the recommendation's headline from a sweep's report.md,
/// where it is there and reads as one; a report that cannot be read is left out.
fn report(path: &Path) -> (Option<String>, Option<String>) {
    let Ok(bytes) = capsize_files::read_regular_file(path, LIMIT) else {
        return (None, None);
    };
    let md = String::from_utf8_lossy(&bytes);
    let scenario = md
        .lines()
        .find_map(|l| l.strip_prefix("# Capacity report: "))
        .map(|s| s.trim().to_string());
    let recommended = md
        .split("\n## Recommendation\n")
        .nth(1)
        .and_then(|section| section.lines().map(str::trim).find(|l| !l.is_empty()))
        .and_then(|first| {
            if first.starts_with("No point") {
                return Some("none".to_string());
            }
            let rest = first.strip_prefix("**")?;
            rest.split_once("**").map(|(bold, _)| bold.to_string())
        });
    (scenario, recommended)
}
