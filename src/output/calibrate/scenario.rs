//! The calibrated scenario as a person reads it: every fitted value with a comment giving its
//! source (how many observations) and its fit (family, KS distance); what the traces do not
//! say written at capsize's defaults and said to be assumed; empirical distributions as files
//! beside it. Every value is held to the bound the scenario's validator holds it to (a value
//! beyond it is written at it, and said to be), so what is written is a scenario calibrate
//! reads back ([`super::verify`] checks it before anything is written).

use capsize_mock::config::DEFAULT_MAX_OUTPUT_TOKENS;
use capsize_mock::limits::MAX_PER_MINUTE;

use crate::analysis::calibrate::{Calibration, ProviderFit};
use crate::fmt::fmt_num;

use super::doc::{Doc, Table};
use super::names;
use super::values::{latency, latency_constant, rate, sig, source, tokens, Clamped, Files, Sink};
use super::workload::{max_tokens, workload};

/// A scenario and the files it names.
#[derive(Debug, Clone)]
pub struct Written {
    /// The document (before `--set`).
    pub doc: Doc,
    /// Files beside it: name and values.
    pub files: Files,
    /// What was assumed, one line each.
    pub assumed: Vec<String>,
}

/// Why no scenario can be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unwritable(pub String);

/// Builds the scenario `name` from `cal`.
pub fn scenario(cal: &Calibration, name: &str, inputs: &str) -> Result<Written, Unwritable> {
    let p = cal.provider.as_ref().ok_or_else(|| {
        Unwritable(
            "no model call could be read (spans with gen_ai.operation.name chat, \
             text_completion or generate_content, or a log's rows): nothing to calibrate"
                .into(),
        )
    })?;
    let mut sink = Sink::default();
    let mut doc = Doc {
        head: vec![
            format!("Calibrated by `capsize calibrate` from {inputs}."),
            "Each fitted value says what it was fitted to and how well: the family with the \
             smallest Kolmogorov-Smirnov (KS) distance to what was observed, kept if within the \
             5 % critical value (1.36/sqrt(n), at least 0.03), else the observed distribution \
             itself (empirical). calibration.md has the fit table and the check."
                .into(),
        ],
        tables: Vec::new(),
    };
    let mut top = Table::new(&[]);
    top.put("name", name, "");
    top.put(
        "description",
        format!(
            "Calibrated from {}: {} queries over {} s.",
            inputs,
            fmt_num(cal.queries as f64),
            fmt_num(sig(cal.window_s))
        ),
        "",
    );
    top.put("seed", 1, "");
    doc.tables.push(top);

    let mut prov = provider(p, &mut sink);
    let (work, request) = workload(cal, p, &mut sink);
    limits(&mut prov, p, request, &mut sink);
    doc.tables.push(prov);
    doc.tables.push(work);

    let mut sched = Table::new(&["scheduler"]);
    sched.note.push(
        "The client's settings are not in the input: capsize's defaults, as the check ran \
         them. Give the ones the input was recorded under with --set scheduler.KEY=VALUE"
            .into(),
    );
    sched.put("max_concurrency", 0, "ASSUMED: unbounded");
    sched.put("rate_limit", false, "ASSUMED: no client-side buckets");
    sink.assumed.push(
        "the client's settings (max_concurrency, rate_limit, headroom, retry): capsize's \
         defaults unless given with --set"
            .into(),
    );
    doc.tables.push(sched);
    Ok(Written {
        doc,
        files: sink.files,
        assumed: sink.assumed,
    })
}

/// `[providers.NAME]`: what was seen of it, its latency (and generation), its failures.
fn provider(p: &ProviderFit, sink: &mut Sink) -> Table {
    let mut prov = Table::new(&["providers", p.name.as_str()]);
    prov.note.push(format!(
        "{}model {}: {} calls seen, {} answered, {} 429s, {} failed, {} timed out",
        if p.said.is_empty() {
            "the provider is not named in the input; ".to_string()
        } else {
            format!("{} ", names::shown(&p.said))
        },
        if p.model.is_empty() {
            "(not named)".to_string()
        } else {
            names::shown(&p.model)
        },
        fmt_num(p.calls as f64),
        fmt_num(p.answered as f64),
        fmt_num(p.rate_limited as f64),
        fmt_num(p.errors as f64),
        fmt_num(p.timeouts as f64),
    ));
    match &p.latency {
        Some(f) => {
            let mut c = Clamped::default();
            let file = format!("{}-latency.csv", p.name);
            let v = latency(f, &file, &mut sink.files, &mut c);
            let retried = if p.retried > 0 {
                format!(
                    "; {} answered after retries left out (their time holds the client's waits)",
                    fmt_num(p.retried as f64)
                )
            } else {
                String::new()
            };
            let comment = format!("{}{retried}", source(f, "answered calls", " ms"));
            sink.put(&mut prov, "latency", v, comment, c);
        }
        None => {
            prov.put(
                "latency",
                latency_constant(1000.0),
                "ASSUMED: the input has no call times (a log without latency); 1 s",
            );
            sink.assumed.push(format!(
                "{}'s latency: the input has no call times; 1 s written",
                p.name
            ));
        }
    }
    if let (Some(ttft), Some(tpot), Some(out)) = (&p.ttft, &p.tpot, &p.output) {
        for (key, f, what) in [
            ("ttft", ttft, "streamed answers' first chunk"),
            ("tpot", tpot, "answers' time per output token"),
        ] {
            let mut c = Clamped::default();
            let file = format!("{}-{key}.csv", p.name);
            let v = latency(f, &file, &mut sink.files, &mut c);
            sink.put(&mut prov, key, v, source(f, what, " ms"), c);
        }
        let mut c = Clamped::default();
        let v = tokens(out, &mut c);
        sink.put(
            &mut prov,
            "output_tokens",
            v,
            source(out, "answers' output tokens", ""),
            c,
        );
    }
    let failed = p.errors + p.timeouts + p.answered;
    let mut errors = 0.0;
    if p.errors > 0 {
        let (r, comment) = rate(p.errors, failed, "failed (not 429, not a timeout)");
        errors = r;
        prov.put("error_rate", r, comment);
    }
    if p.timeouts > 0 {
        let (r, comment) = rate(p.timeouts, failed, "timed out");
        let mut c = Clamped::default();
        // Each rounded on its own, the two could add up to a hair above 1.
        let r = c.within(
            "timeout_rate",
            r,
            0.0,
            1.0 - errors,
            "with error_rate, at most 1",
        );
        sink.put(&mut prov, "timeout_rate", r, comment, c);
    }
    if let Some(asked) = p.max_tokens.filter(|m| *m > DEFAULT_MAX_OUTPUT_TOKENS) {
        let mut c = Clamped::default();
        let most = max_tokens(asked, &mut c);
        let comment = format!(
            "the calls asked for up to {} output tokens: the provider gives them (its default \
             is {})",
            fmt_num(asked as f64),
            fmt_num(DEFAULT_MAX_OUTPUT_TOKENS as f64)
        );
        sink.put(&mut prov, "max_output_tokens", most as i64, comment, c);
    }
    if p.rate_limited > 0 {
        sink.assumed.push(format!(
            "{} answered 429 {} times: the check can only show them with its limits given",
            p.name,
            fmt_num(p.rate_limited as f64)
        ));
    }
    prov
}

/// The provider's `rpm` and `tpm` from its rate-limit headers, each a limit the scenario can
/// hold (from 1 to 1e12 a minute; a `tpm` at least the `request` of the most tokens that was
/// served under it), and what the input does not say.
fn limits(prov: &mut Table, p: &ProviderFit, request: u64, sink: &mut Sink) {
    let headers = "from the rate-limit headers the provider answered with";
    let mut given = [false, false];
    for (i, key, limit) in [(0, "rpm", p.limits.0), (1, "tpm", p.limits.1)] {
        let Some(v) = limit else { continue };
        if !(v.is_finite() && v > 0.0) {
            sink.assumed.push(format!(
                "{}'s {key}: the input's {} is not a limit; none written (unlimited)",
                p.name,
                fmt_num(v)
            ));
            continue;
        }
        let mut c = Clamped::default();
        let why = "a limit a minute";
        let mut v = c.within(key, sig(v), 1.0, MAX_PER_MINUTE, why);
        if key == "tpm" && v < request as f64 {
            c.note(format!(
                "{key} = {} is below the {} tokens of one request, which was served: the request's \
                 tokens written",
                fmt_num(v),
                fmt_num(request as f64)
            ));
            v = request as f64;
        }
        sink.put(prov, key, v, headers, c);
        given[i] = true;
    }
    if given != [true, true] {
        prov.say(format!(
            "{}: not in the input: none here (unlimited). Give them with --set \
             providers.{}.rpm=N (and tpm, itpm, otpm)",
            match given {
                [false, false] => "rpm, tpm",
                [true, _] => "tpm",
                _ => "rpm",
            },
            p.name
        ));
        sink.assumed.push(format!(
            "{}'s rate limits: not in the input; unlimited unless given with --set",
            p.name
        ));
    }
}

#[cfg(test)]
mod tests;
