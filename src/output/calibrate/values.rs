//! A fitted quantity as the scenario writes it, held to the bound the scenario's validator
//! holds it to (the bounds' own constants): a latency table, a token count, a share. A value
//! beyond its bound is written at the bound and [`Clamped`] says so, for the value's comment
//! and calibration.md's "assumed" list; so the scenario calibrate writes is always one it
//! reads back.

use capsize_mock::limits::{clamp_ms, MAX_DURATION_MS};
use capsize_mock::tokens::MAX_TOKENS as MAX_OUTPUT_TOKENS;

use crate::analysis::calibrate::fit::Family;
use crate::analysis::calibrate::Fitted;
use crate::fmt::fmt_num;

use super::doc::Table;

/// The least positive latency written where one must be above 0: a microsecond, the
/// recorder's resolution.
const LEAST_MS: f64 = 0.001;

/// `v` as a note shows it: `1,000`; `2e15` from 10^15 up; `1e-300` below 10^-4.
fn num(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-4 {
        let text = format!("{v:.3e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        format!("{mantissa}e{exponent}")
    } else {
        fmt_num(v)
    }
}

/// `x` to 4 significant digits.
pub(super) fn sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 3 - x.abs().log10().floor() as i32;
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The changes one value needed to fit the scenario's bounds, a line each.
#[derive(Debug, Default)]
pub(super) struct Clamped(Vec<String>);

impl Clamped {
    /// `v` within `[lo, hi]` (NaN: `hi`, as an overflow), noting a change of `what`; `bound`
    /// says what the limit is.
    pub(super) fn within(&mut self, what: &str, v: f64, lo: f64, hi: f64, bound: &str) -> f64 {
        let to = if v.is_nan() { hi } else { v.clamp(lo, hi) };
        if to != v {
            self.0.push(format!(
                "{what} = {} is outside {}..{} ({bound}): {} written",
                num(v),
                num(lo),
                num(hi),
                num(to)
            ));
        }
        to
    }

    /// Milliseconds from 0 to a year.
    pub(super) fn ms(&mut self, what: &str, v: f64) -> f64 {
        let to = clamp_ms(v);
        if to != v {
            self.note_ms(what, v, to);
        }
        to
    }

    /// Milliseconds above 0, up to a year.
    pub(super) fn positive_ms(&mut self, what: &str, v: f64) -> f64 {
        let to = clamp_ms(v).max(LEAST_MS);
        if to != v {
            self.note_ms(what, v, to);
        }
        to
    }

    fn note_ms(&mut self, what: &str, v: f64, to: f64) {
        let bound = if v < to {
            "below the least a scenario's latency may be"
        } else {
            "above a year, the most a scenario's latency may be"
        };
        self.0.push(format!(
            "{what} = {} ms is {bound}: {} ms written",
            num(v),
            num(to)
        ));
    }

    /// A count from `lo` to `hi`.
    pub(super) fn count(&mut self, what: &str, v: u64, lo: u64, hi: u64, bound: &str) -> u64 {
        let to = v.clamp(lo, hi);
        if to != v {
            self.0.push(format!(
                "{what} = {} is outside {}..{} ({bound}): {} written",
                fmt_num(v as f64),
                fmt_num(lo as f64),
                fmt_num(hi as f64),
                fmt_num(to as f64)
            ));
        }
        to
    }

    /// Adds a note of one's own.
    pub(super) fn note(&mut self, line: String) {
        self.0.push(line);
    }

    /// Whether nothing changed.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The empirical files beside the scenario, each name given once (a name already taken, in
/// any case, gets `-2`, `-3`, ... before its extension): a file name derived from two input
/// names never names one file twice.
#[derive(Debug, Clone, Default)]
pub struct Files(Vec<(String, Vec<f64>)>);

impl Files {
    /// Adds `values` under `name` (or the first free name like it), which it returns.
    pub(super) fn add(&mut self, name: &str, values: Vec<f64>) -> String {
        let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
        let taken = |n: &str| self.0.iter().any(|(f, _)| f.eq_ignore_ascii_case(n));
        let mut name = name.to_string();
        let mut k = 2;
        while taken(&name) {
            name = format!("{stem}-{k}.{ext}");
            k += 1;
        }
        self.0.push((name.clone(), values));
        name
    }

    /// The files: name and values, in ms.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[f64])> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// The values of the file `name`.
    pub fn values(&self, name: &str) -> Option<&[f64]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// A file's text: a header, then a value a line, as an empirical latency file is read.
pub fn file_text(values: &[f64]) -> String {
    let mut text = String::from("ms\n");
    for v in values {
        text.push_str(&format!("{v}\n"));
    }
    text
}

/// What a scenario is being built from, and what it has had to assume: each value's changes
/// go to its comment and, with its key, to the "assumed" list.
#[derive(Debug, Default)]
pub(super) struct Sink {
    /// The empirical files.
    pub(super) files: Files,
    /// What was assumed, one line each.
    pub(super) assumed: Vec<String>,
}

impl Sink {
    /// `table.key = value  # comment`, with what `clamped` says of it added to the comment and
    /// to what was assumed.
    pub(super) fn put(
        &mut self,
        table: &mut Table,
        key: &str,
        value: impl Into<toml::Value>,
        comment: impl Into<String>,
        clamped: Clamped,
    ) {
        let mut comment = comment.into();
        self.clamped(&table.path, key, &mut comment, clamped);
        table.put(key, value, comment);
    }

    /// Adds what `clamped` says of the value at `path.key` to `comment` and to the "assumed"
    /// list.
    pub(super) fn clamped(
        &mut self,
        path: &[String],
        key: &str,
        comment: &mut String,
        clamped: Clamped,
    ) {
        if clamped.is_empty() {
            return;
        }
        let at: Vec<&str> = path
            .iter()
            .map(String::as_str)
            .chain(std::iter::once(key))
            .collect();
        let at = at.join(".");
        let lines = clamped.0.join("; ");
        if !comment.is_empty() {
            comment.push_str("; ");
        }
        comment.push_str(&format!("CLAMPED to the scenario's bounds: {lines}"));
        for line in clamped.0 {
            self.assumed.push(format!("{at}: {line}"));
        }
    }
}

/// How a fit is described in a comment: "lognormal, KS 0.012 (n 3,150; p50 2,010 ms, p95 4,700 ms)".
pub(super) fn source(f: &Fitted, what: &str, unit: &str) -> String {
    let o = &f.observed;
    let sampled = if f.exact {
        ""
    } else {
        ", fitted to a sample of 20,000"
    };
    format!(
        "{} {what}: p50 {}{unit}, p95 {}{unit}; {}, KS {:.3}{sampled}",
        fmt_num(o.n as f64),
        fmt_num(sig(o.p50)),
        fmt_num(sig(o.p95)),
        f.fit.family.name(),
        f.fit.distance,
    )
}

/// A latency fit as a scenario's latency table, each parameter within its bound; an empirical
/// one's values go to a file named like `file`.
pub(super) fn latency(f: &Fitted, file: &str, files: &mut Files, c: &mut Clamped) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert("dist".into(), f.fit.family.name().into());
    match &f.fit.family {
        Family::Constant(x) => {
            t.insert("ms".into(), c.ms("ms", sig(*x)).into());
        }
        Family::Uniform(a, b) => {
            t.insert("min_ms".into(), c.ms("min_ms", sig(*a)).into());
            t.insert("max_ms".into(), c.ms("max_ms", sig(*b)).into());
        }
        Family::Normal(m, s) => {
            t.insert("mean_ms".into(), c.positive_ms("mean_ms", sig(*m)).into());
            t.insert("sd_ms".into(), c.ms("sd_ms", sig(*s)).into());
        }
        Family::LogNormal(mu, s) => {
            let most = MAX_DURATION_MS.ln();
            let why = "a median of at most a year";
            let mu = c.within("mu", sig(*mu), f64::MIN, most, why);
            let sigma = c.within("sigma", sig(*s), 0.0, f64::MAX, "a finite spread");
            t.insert("mu".into(), mu.into());
            t.insert("sigma".into(), sigma.into());
        }
        Family::Exponential(m) => {
            t.insert("mean_ms".into(), c.positive_ms("mean_ms", sig(*m)).into());
        }
        Family::Empirical(values) if values.is_empty() => return latency_constant(0.0),
        Family::Empirical(values) => {
            let kept: Vec<f64> = values.iter().map(|v| clamp_ms(sig(*v))).collect();
            let moved = kept
                .iter()
                .zip(values)
                .filter(|(k, v)| **k != sig(**v))
                .count();
            if moved > 0 {
                c.note(format!(
                    "{} of {} values outside 0 ms..a year written at the nearest bound",
                    fmt_num(moved as f64),
                    fmt_num(values.len() as f64)
                ));
            }
            let name = files.add(file, kept);
            t.insert("file".into(), name.into());
        }
    }
    toml::Value::Table(t)
}

/// `{ dist = "constant", ms = ms }`.
pub(super) fn latency_constant(ms: f64) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert("dist".into(), "constant".into());
    t.insert("ms".into(), ms.into());
    toml::Value::Table(t)
}

/// A token-count fit as a provider's `output_tokens`, each count from 1 to the most one
/// answer may have.
pub(super) fn tokens(f: &Fitted, c: &mut Clamped) -> toml::Value {
    let bound = "the tokens of one answer";
    let mut int = |what: &str, x: f64| {
        let n = if x.is_nan() {
            1
        } else {
            x.round().max(0.0) as u64
        };
        toml::Value::Integer(c.count(what, n, 1, MAX_OUTPUT_TOKENS, bound) as i64)
    };
    let mut t = toml::Table::new();
    match (&f.fit.family, lognormal_tokens(&f.fit.family)) {
        (Family::Constant(x), _) => return int("tokens", *x),
        (Family::Uniform(a, b), _) => {
            t.insert("dist".into(), "uniform".into());
            t.insert("min".into(), int("min", *a));
            t.insert("max".into(), int("max", *b));
        }
        (Family::LogNormal(..), Some((mean, p95))) => {
            t.insert("dist".into(), "lognormal".into());
            t.insert("mean".into(), (mean as i64).into());
            t.insert("p95".into(), (p95 as i64).into());
        }
        (family, _) => {
            let values = match family {
                Family::Empirical(v) if !v.is_empty() => v.clone(),
                _ => (0..100)
                    .map(|k| family.quantile((k as f64 + 0.5) / 100.0))
                    .collect(),
            };
            t.insert("dist".into(), "empirical".into());
            let values = values.iter().map(|v| int("values", *v)).collect();
            t.insert("values".into(), toml::Value::Array(values));
        }
    }
    toml::Value::Table(t)
}

/// A log-normal token count as whole `mean` and `p95`, if those (rounded, within the bounds)
/// still describe a log-normal, as the validator requires; else it is written by its
/// quantiles.
fn lognormal_tokens(family: &Family) -> Option<(f64, f64)> {
    if !matches!(family, Family::LogNormal(..)) {
        return None;
    }
    let whole = |x: f64| x.round();
    let (mean, p95) = (whole(family.mean()), whole(family.p95()));
    let inside = |x: f64| (1.0..=MAX_OUTPUT_TOKENS as f64).contains(&x);
    (inside(mean) && inside(p95))
        .then(|| capsize_mock::latency::lognormal_fit(mean, p95))
        .flatten()
        .map(|_| (mean, p95))
}

/// The share `part / whole` as a scenario's rate, with its comment.
pub(super) fn rate(part: u64, whole: u64, what: &str) -> (f64, String) {
    let r = if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    };
    (
        sig(r).clamp(0.0, 1.0),
        format!(
            "{} of {} calls {what}",
            fmt_num(part as f64),
            fmt_num(whole as f64)
        ),
    )
}
