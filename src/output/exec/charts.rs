//! The charts of `capsize exec`, from the mock's per-second series: requests and tokens per
//! minute against the provider's RPM and TPM, requests in flight, and 429s over time ("no
//! 429s" when there were none); time in s or min, whichever suits the run.

use capsize_mock::server::Series;
use capsize_mock::ProviderConfig;

use crate::fmt::fmt_num;
use crate::output::report::charts::{self, Chart, Reference, Series as Line, TimeUnit, XAxis};

/// The charts' file stems, in the order [`charts`] returns them.
pub const CHARTS: [&str; 4] = [
    "requests_per_minute",
    "tokens_per_minute",
    "in_flight",
    "rate_limited",
];

/// Each bin's end time in seconds, with `value` of the bin.
fn over_time(series: &Series, value: impl Fn(usize) -> f64) -> Vec<(f64, f64)> {
    let width = series.bin_s.max(1);
    (0..series.bins.len())
        .map(|i| (((i as u64 + 1) * width) as f64, value(i)))
        .collect()
}

/// `field` of each bin summed over the last 60 s, at each bin's end, per minute.
fn per_minute(
    series: &Series,
    field: impl Fn(&capsize_mock::server::Bin) -> u64,
) -> Vec<(f64, f64)> {
    let counts: Vec<u64> = series.bins.iter().map(field).collect();
    charts::per_minute(series.bin_s, &counts)
}

/// The charts, with their stems ([`CHARTS`]); the `provider`'s RPM and TPM are drawn as
/// ceilings.
pub fn charts(series: &Series, provider: &ProviderConfig) -> Vec<(&'static str, Chart)> {
    let [rpm_stem, tokens_stem, in_flight_stem, limited_stem] = CHARTS;
    let rpm = provider.rpm;
    let mut per_min = Chart::new(
        "Requests per minute",
        "time",
        "requests in the last 60 s",
        XAxis::Linear,
    );
    per_min
        .series
        .push(Line::new("charged", per_minute(series, |b| b.charged)));
    per_min.series.push(Line::new(
        "received (429s included)",
        per_minute(series, |b| b.received),
    ));
    if let Some(rpm) = rpm {
        per_min
            .references
            .push(Reference::new(format!("ceiling {} RPM", fmt_num(rpm)), rpm));
    }
    per_min.y_from_zero = true;
    per_min.x_time = Some(TimeUnit::S);

    let mut tokens = Chart::new(
        "Tokens per minute",
        "time",
        "tokens charged in the last 60 s",
        XAxis::Linear,
    );
    tokens
        .series
        .push(Line::new("charged", per_minute(series, |b| b.tokens)));
    if let Some(tpm) = provider.tpm {
        tokens
            .references
            .push(Reference::new(format!("ceiling {} TPM", fmt_num(tpm)), tpm));
    }
    if !series.bins.is_empty() && series.bins.iter().all(|b| b.tokens == 0) {
        tokens.series.clear();
        tokens.note = Some("no tokens charged".into());
    }
    tokens.y_from_zero = true;
    tokens.x_time = Some(TimeUnit::S);

    let width = series.bin_s.max(1);
    let mut in_flight = Chart::new(
        "Requests in flight",
        "time",
        "requests in flight at the provider",
        XAxis::Linear,
    );
    let bins = &series.bins;
    in_flight.series.push(Line::new(
        format!("peak in {width} s"),
        over_time(series, |i| bins[i].in_flight_peak as f64),
    ));
    in_flight.series.push(Line::new(
        format!("mean over {width} s"),
        over_time(series, |i| bins[i].in_flight_mean),
    ));
    in_flight.y_from_zero = true;
    in_flight.x_time = Some(TimeUnit::S);

    let mut limited = Chart::new(
        "Rate-limited requests (429)",
        "time",
        format!("429s per {width} s"),
        XAxis::Linear,
    );
    limited.series.push(Line::new(
        "429s",
        over_time(series, |i| bins[i].rate_limited as f64),
    ));
    limited.y_from_zero = true;
    limited.x_time = Some(TimeUnit::S);
    if !bins.is_empty() && bins.iter().all(|b| b.rate_limited == 0) {
        limited.series.clear();
        limited.note = Some("no 429s".into());
    }
    vec![
        (rpm_stem, per_min),
        (tokens_stem, tokens),
        (in_flight_stem, in_flight),
        (limited_stem, limited),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use capsize_mock::server::Bin;

    #[test]
    fn requests_per_minute_slide_over_the_last_60_s() {
        let bin = |charged| Bin {
            charged,
            ..Bin::default()
        };
        let series = Series {
            bin_s: 30,
            bins: vec![bin(10), bin(20), bin(30)],
        };
        let points = per_minute(&series, |b| b.charged);
        assert_eq!(points, [(30.0, 10.0), (60.0, 30.0), (90.0, 50.0)]);
    }
}
