//! The calibrated scenario as a person reads it: every fitted value with a comment giving its
//! source (how many observations) and its fit (family, KS distance); what the traces do not
//! say written at capsize's defaults and said to be assumed; empirical distributions as files
//! beside it.

use crate::analysis::calibrate::fit::Family;
use crate::analysis::calibrate::model::CountFit;
use crate::analysis::calibrate::{Arrival, Calibration, Fitted, Shape};
use crate::fmt::fmt_num;

use super::doc::{Doc, Table};

/// A scenario and the files it names.
#[derive(Debug, Clone)]
pub struct Written {
    /// The document (before `--set`).
    pub doc: Doc,
    /// Files beside it: name and contents.
    pub files: Vec<(String, String)>,
    /// What was assumed, one line each.
    pub assumed: Vec<String>,
}

/// Why no scenario can be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unwritable(pub String);

/// `x` to 4 significant digits.
pub(super) fn sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 3 - x.abs().log10().floor() as i32;
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// How a fit is described in a comment: "lognormal, KS 0.012 (n 3,150; p50 2,010 ms, p95 4,700 ms)".
fn source(f: &Fitted, what: &str, unit: &str) -> String {
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

/// A latency fit as a scenario's latency table; an empirical one's values go to `file`.
fn latency(f: &Fitted, file: &str, files: &mut Vec<(String, String)>) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert("dist".into(), f.fit.family.name().into());
    match &f.fit.family {
        Family::Constant(c) => {
            t.insert("ms".into(), sig(*c).into());
        }
        Family::Uniform(a, b) => {
            t.insert("min_ms".into(), sig(*a).into());
            t.insert("max_ms".into(), sig(*b).into());
        }
        Family::Normal(m, s) => {
            t.insert("mean_ms".into(), sig(*m).into());
            t.insert("sd_ms".into(), sig(*s).into());
        }
        Family::LogNormal(mu, s) => {
            t.insert("mu".into(), sig(*mu).into());
            t.insert("sigma".into(), sig(*s).into());
        }
        Family::Exponential(m) => {
            t.insert("mean_ms".into(), sig(*m).into());
        }
        Family::Empirical(values) => {
            let mut text = String::from("ms\n");
            for v in values {
                text.push_str(&format!("{}\n", sig(*v)));
            }
            files.push((file.to_string(), text));
            t.insert("file".into(), file.into());
        }
    }
    toml::Value::Table(t)
}

/// A token-count fit as a scenario's token count.
fn tokens(f: &Fitted) -> toml::Value {
    let int = |x: f64| toml::Value::Integer(x.round().max(1.0) as i64);
    let mut t = toml::Table::new();
    match &f.fit.family {
        Family::Constant(c) => return int(*c),
        Family::Uniform(a, b) => {
            t.insert("dist".into(), "uniform".into());
            t.insert("min".into(), int(*a));
            t.insert("max".into(), int(*b));
        }
        Family::LogNormal(..) => {
            t.insert("dist".into(), "lognormal".into());
            t.insert("mean".into(), int(f.fit.family.mean()));
            t.insert("p95".into(), int(f.fit.family.p95()));
        }
        family => {
            let values = match family {
                Family::Empirical(v) => v.clone(),
                _ => (0..100)
                    .map(|k| family.quantile((k as f64 + 0.5) / 100.0))
                    .collect(),
            };
            t.insert("dist".into(), "empirical".into());
            t.insert(
                "values".into(),
                toml::Value::Array(values.iter().map(|v| int(*v)).collect()),
            );
        }
    }
    toml::Value::Table(t)
}

fn count(c: &CountFit) -> toml::Value {
    if c.min == c.max {
        return toml::Value::Integer(c.min as i64);
    }
    let mut t = toml::Table::new();
    t.insert("dist".into(), "uniform_int".into());
    t.insert("min".into(), toml::Value::Integer(c.min as i64));
    t.insert("max".into(), toml::Value::Integer(c.max as i64));
    toml::Value::Table(t)
}

/// The share `part / whole` as a scenario's rate, with its comment.
fn rate(part: u64, whole: u64, what: &str) -> (f64, String) {
    let r = if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    };
    (
        sig(r),
        format!(
            "{} of {} calls {what}",
            fmt_num(part as f64),
            fmt_num(whole as f64)
        ),
    )
}

/// Builds the scenario `name` from `cal`.
pub fn scenario(cal: &Calibration, name: &str, inputs: &str) -> Result<Written, Unwritable> {
    let p = cal.provider.as_ref().ok_or_else(|| {
        Unwritable(
            "no model call could be read (spans with gen_ai.operation.name chat, \
             text_completion or generate_content, or a log's rows): nothing to calibrate"
                .into(),
        )
    })?;
    let mut files = Vec::new();
    let mut assumed = Vec::new();
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
    let mut top = Table::new(None);
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

    // The model's provider.
    let mut prov = Table::new(Some(&format!("providers.{}", p.name)));
    prov.note.push(format!(
        "{}model {}: {} calls seen, {} answered, {} 429s, {} failed, {} timed out",
        if p.said.is_empty() {
            "the provider is not named in the input; ".to_string()
        } else {
            format!("{} ", p.said)
        },
        if p.model.is_empty() {
            "(not named)"
        } else {
            &p.model
        },
        fmt_num(p.calls as f64),
        fmt_num(p.answered as f64),
        fmt_num(p.rate_limited as f64),
        fmt_num(p.errors as f64),
        fmt_num(p.timeouts as f64),
    ));
    match &p.latency {
        Some(f) => {
            let v = latency(f, &format!("{}-latency.csv", p.name), &mut files);
            let retried = if p.retried > 0 {
                format!(
                    "; {} answered after retries left out (their time holds the client's waits)",
                    fmt_num(p.retried as f64)
                )
            } else {
                String::new()
            };
            prov.put(
                "latency",
                v,
                format!("{}{retried}", source(f, "answered calls", " ms")),
            );
        }
        None => {
            prov.put(
                "latency",
                latency_constant(1000.0),
                "ASSUMED: the input has no call times (a log without latency); 1 s",
            );
            assumed.push(format!(
                "{}'s latency: the input has no call times; 1 s written",
                p.name
            ));
        }
    }
    if let (Some(ttft), Some(tpot), Some(out)) = (&p.ttft, &p.tpot, &p.output) {
        prov.put(
            "ttft",
            latency(ttft, &format!("{}-ttft.csv", p.name), &mut files),
            source(ttft, "streamed answers' first chunk", " ms"),
        );
        prov.put(
            "tpot",
            latency(tpot, &format!("{}-tpot.csv", p.name), &mut files),
            source(tpot, "answers' time per output token", " ms"),
        );
        prov.put(
            "output_tokens",
            tokens(out),
            source(out, "answers' output tokens", ""),
        );
    }
    let failed = p.errors + p.timeouts + p.answered;
    if p.errors > 0 {
        let (r, c) = rate(p.errors, failed, "failed (not 429, not a timeout)");
        prov.put("error_rate", r, c);
    }
    if p.timeouts > 0 {
        let (r, c) = rate(p.timeouts, failed, "timed out");
        prov.put("timeout_rate", r, c);
    }
    let headers = "from the rate-limit headers the provider answered with";
    if let Some(rpm) = p.limits.0 {
        prov.put("rpm", sig(rpm), headers);
    }
    if let Some(tpm) = p.limits.1 {
        prov.put("tpm", sig(tpm), headers);
    }
    if p.limits.0.is_none() || p.limits.1.is_none() {
        prov.say(format!(
            "{}: not in the input: none here (unlimited). Give them with --set \
             providers.{}.rpm=N (and tpm, itpm, otpm)",
            match p.limits {
                (None, None) => "rpm, tpm",
                (Some(_), _) => "tpm",
                _ => "rpm",
            },
            p.name
        ));
        assumed.push(format!(
            "{}'s rate limits: not in the input; unlimited unless given with --set",
            p.name
        ));
    }
    if p.rate_limited > 0 {
        assumed.push(format!(
            "{} answered 429 {} times: the check can only show them with its limits given",
            p.name,
            fmt_num(p.rate_limited as f64)
        ));
    }
    doc.tables.push(prov);

    doc.tables.push(workload(cal, p, &mut files, &mut assumed));

    let mut sched = Table::new(Some("scheduler"));
    sched.note.push(
        "The client's settings are not in the input: capsize's defaults, as the check ran \
         them. Give the ones the input was recorded under with --set scheduler.KEY=VALUE"
            .into(),
    );
    sched.put("max_concurrency", 0, "ASSUMED: unbounded");
    sched.put("rate_limit", false, "ASSUMED: no client-side buckets");
    assumed.push(
        "the client's settings (max_concurrency, rate_limit, headroom, retry): capsize's \
         defaults unless given with --set"
            .into(),
    );
    doc.tables.push(sched);
    Ok(Written {
        doc,
        files,
        assumed,
    })
}

fn latency_constant(ms: f64) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert("dist".into(), "constant".into());
    t.insert("ms".into(), ms.into());
    toml::Value::Table(t)
}

fn workload(
    cal: &Calibration,
    p: &crate::analysis::calibrate::ProviderFit,
    files: &mut Vec<(String, String)>,
    assumed: &mut Vec<String>,
) -> Table {
    let mut w = Table::new(Some("workload"));
    let s = &cal.structure;
    match &cal.arrival {
        Some(Arrival::Closed {
            seen,
            active,
            per_session,
            think,
        }) => {
            w.put(
                "mode",
                "closed",
                "queries came in sessions (gen_ai.conversation.id or session.id)",
            );
            w.put(
                "sessions",
                (active.round().max(1.0)) as i64,
                format!(
                    "{} alive at once on average over the middle half of the input; {} sessions \
                     seen, {} queries each",
                    fmt_num(sig(*active)),
                    fmt_num(*seen as f64),
                    fmt_num(sig(*per_session))
                ),
            );
            if let Some(t) = think {
                w.put(
                    "think_time",
                    latency(t, "think-time.csv", files),
                    source(t, "gaps between a session's queries", " ms"),
                );
            }
        }
        Some(Arrival::Open {
            rate_per_s,
            cv,
            poisson_distance,
            accept,
        }) => {
            w.put(
                "mode",
                "open",
                "no sessions in the input: queries arrive by themselves",
            );
            w.put(
                "arrival_rate",
                sig(*rate_per_s),
                format!(
                    "queries per second over the input's {} s",
                    fmt_num(sig(cal.window_s))
                ),
            );
            let fits = poisson_distance <= accept;
            w.put(
                "arrival",
                "poisson",
                if fits {
                    format!("gaps fit an exponential: KS {poisson_distance:.3}, CV {cv:.2}")
                } else {
                    format!(
                        "gaps do NOT fit an exponential (KS {poisson_distance:.3} > {accept:.3}, \
                         CV {cv:.2}: {}); capsize draws Poisson arrivals",
                        if *cv > 1.0 { "burstier" } else { "more even" }
                    )
                },
            );
            if !fits {
                assumed.push(format!(
                    "arrivals: Poisson, though the gaps do not fit it (CV {cv:.2})"
                ));
            }
        }
        None => {
            w.put(
                "mode",
                "closed",
                "ASSUMED: fewer than two queries seen; one session",
            );
            w.put("sessions", 1, "");
            assumed.push("arrivals: fewer than two queries seen; one session".into());
        }
    }
    w.put(
        "duration_s",
        sig(cal.window_s.max(1.0)),
        "as long as the input: its first query's start to its last one's",
    );
    let shares = |n: u64| {
        let total: u64 = s.shapes.values().sum();
        format!(
            "{:.0} % of {} queries",
            100.0 * n as f64 / total.max(1) as f64,
            fmt_num(total as f64)
        )
    };
    let model_tokens = p
        .input
        .as_ref()
        .map_or(0, |f| f.observed.mean.round() as i64);
    let tokens_comment = match &p.input {
        Some(f) => format!(
            "mean input tokens of {} calls (p50 {}, p95 {}): a model turn sends a fixed prompt",
            fmt_num(f.observed.n as f64),
            fmt_num(sig(f.observed.p50)),
            fmt_num(sig(f.observed.p95))
        ),
        None => "ASSUMED: no token counts in the input".into(),
    };
    if p.input.is_none() {
        assumed.push("tokens: no token counts in the input; 0 written".into());
    }
    if s.shape == Shape::Single {
        let shape_n = s.shapes.get(&Shape::Single).copied().unwrap_or(0);
        w.put(
            "calls_per_query",
            1,
            format!("one model call a query ({})", shares(shape_n)),
        );
        let out = p
            .max_tokens
            .map(|m| m as f64)
            .or(p.output.as_ref().map(|o| o.observed.mean))
            .unwrap_or(0.0);
        w.put(
            "tokens_per_call",
            (model_tokens as f64 + out).round() as i64,
            format!(
                "input tokens and {} charged per call",
                if p.max_tokens.is_some() {
                    "max_tokens"
                } else {
                    "mean output tokens (no max_tokens recorded)"
                }
            ),
        );
        w.put("provider", p.name.as_str(), "");
        return w;
    }
    let (at, turns_note) = match s.shape {
        Shape::Between => ("between", "a model turn between each two rounds"),
        _ => ("around", "a model turn before each round and one to answer"),
    };
    let rounds_note: Vec<String> = s
        .rounds_seen
        .iter()
        .rev()
        .take(4)
        .map(|(r, n)| format!("{r}: {}", fmt_num(*n as f64)))
        .collect();
    w.put(
        "rounds",
        s.rounds as i64,
        format!(
            "the most common count (queries by rounds: {})",
            rounds_note.join(", ")
        ),
    );
    match &s.per_round {
        Some(c) => w.put(
            "calls_per_query",
            count(c),
            format!(
                "tool calls a round: {} to {}, mean {}{}",
                c.min,
                c.max,
                fmt_num(sig(c.mean)),
                if c.min == c.max {
                    String::new()
                } else {
                    format!("; a uniform draw, KS {:.3}", c.distance)
                }
            ),
        ),
        None => w.put("calls_per_query", 0, "no tool calls seen"),
    }
    w.put(
        "tokens_per_call",
        0,
        "tool calls run in the agent: no provider counts their tokens",
    );
    w.put(
        "provider",
        "none",
        "tool calls go to no rate-limited provider",
    );
    let mut turn = toml::Table::new();
    turn.insert("tokens".into(), toml::Value::Integer(model_tokens));
    if let Some(m) = p.max_tokens {
        turn.insert("max_tokens".into(), toml::Value::Integer(m as i64));
    }
    if p.ttft.is_some() {
        turn.insert("stream".into(), true.into());
    }
    turn.insert("provider".into(), p.name.as_str().into());
    turn.insert("at".into(), at.into());
    w.put(
        "model_turn",
        toml::Value::Table(turn),
        format!(
            "{turns_note} ({}); {tokens_comment}",
            shares(s.shapes.get(&s.shape).copied().unwrap_or(0))
        ),
    );
    if let Some((rounds, seq)) = s.sequential {
        if seq >= 0.5 {
            let share = if seq >= 0.9 { 1.0 } else { sig(seq) };
            w.put(
                "write_fraction",
                share,
                format!(
                    "{:.0} % of {} rounds of two or more calls ran them one after another (as \
                     writes run)",
                    100.0 * seq,
                    fmt_num(rounds as f64)
                ),
            );
        }
    }
    let tools: Vec<(toml::Value, String)> = cal
        .tools
        .iter()
        .map(|t| {
            let mut e = toml::Table::new();
            e.insert("name".into(), t.name.as_str().into());
            e.insert("weight".into(), toml::Value::Integer(t.calls as i64));
            e.insert("provider".into(), "none".into());
            let comment = match &t.latency {
                Some(f) => {
                    let file = format!("tool-{}-latency.csv", t.name);
                    e.insert("latency".into(), latency(f, &file, files));
                    source(f, "calls", " ms")
                }
                None => {
                    e.insert("latency".into(), latency_constant(0.0));
                    "ASSUMED: no call times".into()
                }
            };
            if t.errors > 0 {
                let (r, _) = rate(t.errors, t.calls, "failed");
                e.insert("error_rate".into(), r.into());
            }
            (toml::Value::Table(e), comment)
        })
        .collect();
    if !tools.is_empty() {
        w.put_items("tools", tools);
    }
    w
}
