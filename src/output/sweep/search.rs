//! What `capsize search` writes and prints: search.csv (a row per probe, in the order run),
//! each probe's line of progress, and the answer in words, for a boundary search and a search
//! on a metric alike.

use std::fmt::Write as _;

use crate::analysis::sweep::search::{self, Found, Limit, Probe, SearchSpec, Step, Stop};
use crate::engine::summary::metrics;
use crate::fmt::{fmt_num, six_figures};

/// The file a search writes.
pub const CSV: &str = "search.csv";

/// A probe's row: value, seeds passing, queries/s, query p95, 429s, verdict, step, note.
pub fn row(spec: &SearchSpec, found: Option<&Found>, p: &Probe) -> [String; 8] {
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
        p.step.to_string(),
        found.map_or(String::new(), |f| note(spec, f, p)),
    ]
}

/// The metric's mean at a probe, for a search on a metric (empty without a value); `None` for
/// a boundary search.
pub fn metric_cell(spec: &SearchSpec, p: &Probe) -> Option<String> {
    let metric = spec.metric.as_deref()?;
    Some(search::reading(p, metric).map_or(String::new(), |(m, _)| six_figures(m)))
}

/// search.csv's note on a probe. A boundary search: one that contradicts the assumption that
/// passing is monotone (`not monotone: 2, larger, passes` on a failing probe, `not monotone:
/// 1, smaller, fails` on a passing one). A search on a metric: `least` or `greatest` (the
/// answer), `as good within noise`, `another dip` (`another peak` for `--max`), `fails
/// between passing values`. Empty
/// otherwise.
fn note(spec: &SearchSpec, found: &Found, p: &Probe) -> String {
    if spec.metric.is_some() {
        let is = |values: Vec<f64>| values.contains(&p.value);
        let answer = found.answer.map(|a| found.probes[a].value);
        let words = spec.extremum();
        return if answer == Some(p.value) {
            words.answer.into()
        } else if is(search::near(spec, found)) {
            "as good within noise".into()
        } else if is(search::dips(spec, found)) {
            format!("another {}", words.turn)
        } else if is(search::gaps(found)) {
            "fails between passing values".into()
        } else {
            String::new()
        };
    }
    found.contradicts(p, spec.max).map_or(String::new(), |q| {
        format!(
            "not monotone: {}, {}, {}",
            search::shown(spec, q),
            if q > p.value { "larger" } else { "smaller" },
            if p.passes() { "fails" } else { "passes" }
        )
    })
}

/// `search.csv`: a row per probe, in the order run.
pub fn csv(spec: &SearchSpec, found: &Found) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    // A search on a metric has the metric's column after the key's.
    let with_metric = |mut cells: Vec<String>, metric: Option<String>| {
        if let Some(m) = metric {
            cells.insert(1, m);
        }
        cells
    };
    let header = [
        "seeds_passing",
        "queries_per_s",
        "query_p95_ms",
        "rate_limited",
        "verdict",
        "step",
        "note",
    ];
    let header = std::iter::once(spec.key.as_str())
        .chain(header)
        .map(String::from);
    w.write_record(with_metric(header.collect(), spec.metric.clone()))?;
    for p in &found.probes {
        let cells = row(spec, Some(found), p).to_vec();
        w.write_record(with_metric(cells, metric_cell(spec, p)))?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A limit in words: `the largest workload.sessions takes`, `the --to given`, `2^20 × the
/// start`.
fn limit_words(spec: &SearchSpec, limit: &Limit, high: bool) -> String {
    match (limit.stop, high) {
        (Stop::Key, true) => format!("the largest {} takes", spec.key),
        (Stop::Key, false) => format!("the smallest {} takes", spec.key),
        (Stop::To, _) => "the --to given".into(),
        (Stop::Range, true) => "2^20 × the start".into(),
        (Stop::Range, false) => "2^-20 × the start".into(),
        (Stop::Floor, _) => "the smallest integer above 0".into(),
    }
}

/// The answer in words.
pub fn answer(spec: &SearchSpec, found: &Found) -> String {
    if let (Some(metric), Some(a)) = (spec.metric.as_deref(), found.answer) {
        return least_words(spec, metric, found, &found.probes[a]);
    }
    let which = if spec.max { "largest" } else { "smallest" };
    let probe = |i: usize| &found.probes[i];
    let reasons = |p: &Probe| {
        let r: Vec<String> = p.failures.iter().map(|f| f.to_string()).collect();
        r.join("; ")
    };
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
                    let _ = write!(
                        line,
                        "; {} fails: {}",
                        search::shown(spec, b.value),
                        reasons(b)
                    );
                }
                // Nothing failed on the far side: the search stopped at its limit there.
                None => {
                    let limit = if spec.max {
                        &found.limits.high
                    } else {
                        &found.limits.low
                    };
                    line.push_str(&at_limit(spec, limit, spec.max, "the answer"));
                }
            }
            line
        }
        (None, _) => {
            let values = found.probes.iter().map(|p| p.value);
            let lo = values.clone().fold(f64::INFINITY, f64::min);
            let hi = values.fold(f64::NEG_INFINITY, f64::max);
            // The end nearest to passing by the assumption: the least load, the most capacity;
            // for a search on a metric, the start.
            let (best, limit) = if spec.metric.is_some() {
                (search::start(spec), &found.limits.low)
            } else if spec.max {
                (lo, &found.limits.low)
            } else {
                (hi, &found.limits.high)
            };
            let best_probe = found.probes.iter().rev().find(|p| p.value == best);
            let why = best_probe.map_or(String::new(), reasons);
            let at = if best == limit.value {
                format!(", {},", limit_words(spec, limit, !spec.max))
            } else {
                String::new()
            };
            let tried = if lo == hi {
                format!("the one value tried, {}, fails", search::shown(spec, lo))
            } else {
                format!(
                    "all {} values tried, from {} to {}, fail",
                    found.probes.len(),
                    search::shown(spec, lo),
                    search::shown(spec, hi)
                )
            };
            format!(
                "no value of {} tried meets the objectives: {tried}; {}{at} fails: {why}",
                spec.key,
                search::shown(spec, best),
            )
        }
    }
}

/// A search on a metric's answer: `least mean cost.per_good_query_usd of the
/// scheduler.max_concurrency values that meet the objectives: 8, at 0.0066 (± 0.0001 over 3
/// seeds); as good within the noise: 6, 10`, and where it lies at a limit, which.
fn least_words(spec: &SearchSpec, metric: &str, found: &Found, a: &Probe) -> String {
    let (mean, error) = search::reading(a, metric).unwrap_or((f64::NAN, 0.0));
    let mut line = format!(
        "{} mean {metric} of the {} values that meet the objectives: {}, at {} (± {} over {} seeds)",
        spec.extremum().answer,
        spec.key,
        search::shown(spec, a.value),
        six_figures(mean),
        fmt_num(error),
        a.result.runs.len()
    );
    let near: Vec<String> = search::near(spec, found)
        .into_iter()
        .map(|v| search::shown(spec, v))
        .collect();
    if !near.is_empty() {
        let _ = write!(line, "; as good within twice that: {}", near.join(", "));
    }
    let failing = found.probes.iter().filter(|p| !p.passes()).count();
    if failing > 0 {
        let _ = write!(
            line,
            "; {failing} of {} values tried fail",
            found.probes.len()
        );
    }
    for (limit, high) in [(&found.limits.low, false), (&found.limits.high, true)] {
        if a.value == limit.value {
            line.push_str(&at_limit(spec, limit, high, "a better one"));
        }
    }
    line
}

/// An answer at a limit (the `high` one, or the low): `; it is the --to given, so no larger
/// value was tried`, and where the limit is the search's own rather than the key's, that
/// `what` (the answer, a better one) may lie beyond it and how to look there.
fn at_limit(spec: &SearchSpec, limit: &Limit, high: bool, what: &str) -> String {
    let mut words = format!(
        "; it is {}, so no {} value was tried",
        limit_words(spec, limit, high),
        if high { "larger" } else { "smaller" }
    );
    match (limit.stop, high) {
        (Stop::To | Stop::Range, true) => {
            let _ = write!(words, ": {what} may lie above it (raise --to)");
        }
        (Stop::Range, false) => {
            let _ = write!(words, ": {what} may lie below it (start lower with --from)");
        }
        _ => {}
    }
    words
}

/// Why the search turns to check the other way (`step`, the first such probe), from the
/// values tried so far: `nothing passes from 4 down to 1: trying larger values, in case
/// passing is not monotone in workload.sessions`.
pub fn check_words(spec: &SearchSpec, lowest: f64, highest: f64, step: Step) -> String {
    let start = search::start(spec);
    let up = step == Step::CheckUp;
    let (end, way, other) = if up {
        (lowest, "down", "larger")
    } else {
        (highest, "up", "smaller")
    };
    let nothing = if end == start {
        format!(
            "{} fails and no {} value can be tried",
            search::shown(spec, start),
            if up { "smaller" } else { "larger" }
        )
    } else {
        format!(
            "nothing passes from {} {way} to {}",
            search::shown(spec, start),
            search::shown(spec, end)
        )
    };
    format!(
        "{nothing}: trying {other} values, in case passing is not monotone in {}",
        spec.key
    )
}

/// The line saying the probes contradict the search's assumption, if they do: for a boundary
/// search that passing is monotone, for a search on a metric that the passing values are one
/// stretch with one minimum (one maximum, `--max`).
pub fn not_monotone(spec: &SearchSpec, found: &Found) -> Option<String> {
    if let Some(metric) = spec.metric.as_deref() {
        return least_caveat(spec, metric, found);
    }
    let (fails, passes) = found.contradiction(spec.max)?;
    let passing: Vec<String> = found
        .passing_values()
        .into_iter()
        .map(|v| search::shown(spec, v))
        .collect();
    Some(format!(
        "not monotone: {} {} fails, yet {}, {}, passes (the search assumes {}); values that pass: {}",
        spec.key,
        search::shown(spec, fails),
        search::shown(spec, passes),
        if passes > fails { "larger" } else { "smaller" },
        if spec.max {
            "more load never helps"
        } else {
            "more capacity never hurts"
        },
        passing.join(", ")
    ))
}

/// A search on a metric's caveat: more than one dip, or failing values between passing ones.
fn least_caveat(spec: &SearchSpec, metric: &str, found: &Found) -> Option<String> {
    let shown = |values: Vec<f64>| {
        let v: Vec<String> = values.iter().map(|v| search::shown(spec, *v)).collect();
        v.join(", ")
    };
    let (dips, gaps) = (search::dips(spec, found), search::gaps(found));
    let words = spec.extremum();
    let mut said = Vec::new();
    if dips.len() > 1 {
        said.push(format!(
            "{metric} {} at more than one value of {} ({}) beyond the seeds' noise",
            words.verb,
            spec.key,
            shown(dips)
        ));
    }
    if !gaps.is_empty() {
        said.push(format!(
            "{} {} fails between values that pass",
            spec.key,
            shown(gaps)
        ));
    }
    (!said.is_empty()).then(|| {
        format!(
            "not one {noun}: {} (the search assumes one stretch of passing values with one {noun}): the best found may not be the best there is; a sweep over the range shows the whole curve",
            said.join("; "),
            noun = words.noun
        )
    })
}
