//! The recommended point's use of each provider's limits over time, and where its calls' time
//! went: requests and tokens charged per minute per provider (input and output apart where its
//! token limits are split), each limit drawn as it was in force (stepping through the
//! provider's phases) and, for the limits the client's buckets hold (RPM, TPM), at headroom;
//! and the percentiles of a call's waits beside its service time, which say why the latency
//! is what it is.

use capsize_mock::ProviderConfig;
use hdrhistogram::Histogram;

use crate::engine::recorder::{Recording, Second, Series as Bins};
use crate::engine::scenario::Scenario;
use crate::fmt::fmt_num;
use crate::output::report::charts::{self, Chart, Reference, Series, TimeUnit, XAxis};

/// Stems of the charts [`charts`] draws, in its order.
pub(super) const CHARTS: [&str; 3] = ["rpm_over_time", "tokens_over_time", "call_time"];

/// One provider of the run: its name (`None` in the one-provider form, whose labels need none),
/// its table, and what it was charged over time.
struct Used<'a> {
    name: Option<&'a str>,
    config: &'a ProviderConfig,
    bins: &'a Bins,
}

/// The scenario's providers with their series. Endpoints list the providers first, in the
/// scenario's order; a run of several endpoints keeps a series per endpoint.
fn used<'a>(rec: &'a Recording, s: &'a Scenario) -> Vec<Used<'a>> {
    let several = s.providers.len() > 1;
    s.providers
        .iter()
        .enumerate()
        .map(|(i, p)| Used {
            name: several.then_some(p.name.as_str()),
            config: &p.config,
            bins: rec.endpoint_series.get(i).unwrap_or(&rec.series),
        })
        .collect()
}

/// `field` of each bin summed over the last 60 s, at each bin's end, per minute.
fn per_minute(bins: &Bins, field: impl Fn(&Second) -> u64) -> Vec<(f64, f64)> {
    let counts: Vec<u64> = bins.bins.iter().map(field).collect();
    charts::per_minute(bins.bin_s, &counts)
}

/// The limit `of` a provider's table in force over the run when its phases change it: `(from
/// s, limit)` steps from 0 (`None`: one limit all along, or none).
pub(super) fn limit_steps(
    p: &ProviderConfig,
    of: impl Fn(&ProviderConfig) -> Option<f64>,
) -> Option<Vec<(f64, f64)>> {
    let base = of(p)?;
    if p.phases.iter().all(|ph| of(&ph.config) == Some(base)) {
        return None;
    }
    let mut steps = vec![(0.0, base)];
    for (i, ph) in p.phases.iter().enumerate() {
        steps.push((ph.from.as_secs_f64(), of(&ph.config).unwrap_or(f64::NAN)));
        if let Some(to) = ph.to {
            if p.phases.get(i + 1).map(|n| n.from) != Some(to) {
                steps.push((to.as_secs_f64(), base));
            }
        }
    }
    // A step to the value already in force is no step.
    steps.dedup_by(|b, a| a.1 == b.1);
    Some(steps)
}

/// The reference lines of one limit (`kind`, "RPM") of `u`: the limit, stepping if its phases
/// change it, and the limit x `headroom` when given and below 1.
fn limit_lines(
    u: &Used,
    kind: &str,
    of: impl Fn(&ProviderConfig) -> Option<f64>,
    headroom: Option<f64>,
) -> Vec<Reference> {
    let Some(limit) = of(u.config) else {
        return Vec::new();
    };
    let steps = limit_steps(u.config, &of);
    // The limit's label, and what its line at headroom is called.
    let (label, scaled) = match (&steps, u.name) {
        (Some(_), None) => (format!("{kind} limit in force"), "limit in force".into()),
        (Some(_), Some(n)) => (
            format!("{n} {kind} in force"),
            format!("{n} {kind} in force"),
        ),
        (None, None) => (
            format!("ceiling {} {kind}", fmt_num(limit)),
            "ceiling".into(),
        ),
        (None, Some(n)) => (
            format!("{n} {kind} {}", fmt_num(limit)),
            format!("{n} {kind}"),
        ),
    };
    let line = |label: String, factor: f64| match &steps {
        Some(st) => Reference::steps(label, st.iter().map(|&(t, r)| (t, r * factor)).collect()),
        None => Reference::new(label, limit * factor),
    };
    let mut out = vec![line(label, 1.0)];
    if let Some(h) = headroom.filter(|h| *h < 1.0) {
        out.push(line(format!("{scaled} x headroom {h}"), h));
    }
    out
}

/// A series' label: `what` alone for the one provider, else after its name.
fn label(u: &Used, what: &str) -> String {
    match u.name {
        None => what.to_string(),
        Some(n) => format!("{n}: {what}"),
    }
}

/// Requests charged per minute per provider, against each one's RPM.
fn requests(providers: &[Used], headroom: f64) -> Chart {
    let mut chart = Chart::new(
        "Recommended point: requests per minute",
        "time",
        "requests charged in the last 60 s",
        XAxis::Linear,
    );
    for u in providers {
        let what = match u.name {
            None => "achieved RPM (60 s window)",
            Some(_) => "requests (60 s window)",
        };
        chart.series.push(Series::new(
            label(u, what),
            per_minute(u.bins, |b| b.charged),
        ));
        chart
            .references
            .extend(limit_lines(u, "RPM", |c| c.rpm, Some(headroom)));
    }
    chart.x_time = Some(TimeUnit::S);
    chart.y_from_zero = true;
    chart
}

/// Tokens charged per minute per provider, against its TPM, or its input and output apart
/// against its ITPM and OTPM where those are set.
fn tokens(providers: &[Used], headroom: f64) -> Chart {
    let mut chart = Chart::new(
        "Recommended point: tokens per minute",
        "time",
        "tokens charged in the last 60 s",
        XAxis::Linear,
    );
    for u in providers {
        let c = u.config;
        let split = c.itpm.is_some() || c.otpm.is_some();
        let any = u.bins.bins.iter().any(|b| b.tokens > 0);
        if !any && c.tpm.is_none() && !split {
            continue;
        }
        if split {
            chart.series.push(Series::new(
                label(u, "input tokens (60 s window)"),
                per_minute(u.bins, |b| b.tokens - b.output),
            ));
            chart.series.push(Series::new(
                label(u, "output charged at admission, max_tokens (60 s window)"),
                per_minute(u.bins, |b| b.output),
            ));
            chart
                .references
                .extend(limit_lines(u, "ITPM", |c| c.itpm, None));
            chart
                .references
                .extend(limit_lines(u, "OTPM", |c| c.otpm, None));
        }
        if !split || c.tpm.is_some() {
            chart.series.push(Series::new(
                label(u, "tokens charged (60 s window)"),
                per_minute(u.bins, |b| b.tokens),
            ));
        }
        chart
            .references
            .extend(limit_lines(u, "TPM", |c| c.tpm, Some(headroom)));
    }
    if chart.series.is_empty() {
        chart.note = Some("no tokens charged".into());
    }
    chart.x_time = Some(TimeUnit::S);
    chart.y_from_zero = true;
    chart
}

/// A histogram of µs as `(quantile, ms)` points for a percentile axis, below the 100th.
pub(super) fn quantiles(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(5)
        .map(|v| {
            (
                v.quantile_iterated_to(),
                v.value_iterated_to() as f64 / 1000.0,
            )
        })
        .filter(|(q, _)| *q < 1.0)
        .collect()
}

/// Where a successful call's time went: the percentiles of its waits for a slot, for the rate
/// limiter and backing off before retries, beside its time at the provider and the whole call.
fn call_time(rec: &Recording) -> Chart {
    let mut chart = Chart::new(
        "Recommended point: where a call's time went",
        "percentile of calls",
        "time per successful call",
        XAxis::Percentile,
    );
    for (name, h) in [
        ("whole call", &rec.call),
        ("at the provider (sent, answering)", &rec.service),
        ("waiting for a slot (max_concurrency)", &rec.queue),
        ("waiting for the rate limiter", &rec.limiter),
        ("backing off before retries", &rec.backoff),
    ] {
        chart.series.push(Series::new(name, quantiles(h)));
    }
    chart.y_time = Some(TimeUnit::Ms);
    chart.y_from_zero = true;
    chart
}

/// The recommended point's usage charts, with their stems ([`CHARTS`]).
pub(super) fn charts(rec: &Recording, s: &Scenario) -> Vec<(&'static str, Chart)> {
    let providers = used(rec, s);
    let headroom = s.scheduler.headroom;
    let [r, t, c] = CHARTS;
    vec![
        (r, requests(&providers, headroom)),
        (t, tokens(&providers, headroom)),
        (c, call_time(rec)),
    ]
}
