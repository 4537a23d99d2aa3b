//! `timeseries.csv`: a run's per-bin series, for plotting elsewhere (`capsize run
//! --timeseries`).
//!
//! One row per bin of model time, from 0 to the end of the run (work left running after its
//! caller gave up included). Bins are one second wide; a run longer than 4096 s has its
//! neighbouring bins merged, doubling their width as often as needed, so `bin_s` says the
//! width. Every value is recorded, none sampled or estimated, in model time (a real-time run's
//! figures are converted back from its time scale). Columns:
//!
//! - `t_s`: the bin's start, in seconds of model time from the run's start.
//! - `bin_s`: the bin's width in seconds (the same on every row).
//! - `requests`: requests the provider received in the bin (sent attempts, whatever their
//!   fate); the column adds up to summary.json's `provider.received` for the in-process
//!   provider.
//! - `charged`: of those, requests the provider charged against its quota.
//! - `rate_limited`: of those, requests refused with 429.
//! - `tokens`: tokens charged in the bin.
//! - `completed`, `failed`, `cancelled`: calls (through the scheduler) that ended in the bin:
//!   succeeded, failed for good (retries spent, or an error not retried), stopped (cancel,
//!   deadline, spent budget). Calls answered "not run" are not counted.
//! - `in_flight_mean`: the mean number of calls holding a concurrency permit over the bin
//!   (waiting for the rate limiter, sent and waiting for the answer, or backing off before a
//!   retry), three decimals.
//! - `queue_len_mean`: the mean number of calls waiting for a concurrency permit over the bin.
//! - `concurrency_limit_mean`: the mean adaptive concurrency limit (every replica's added up)
//!   over the bin; empty with a fixed `max_concurrency`.
//! - `limiter_balance`: the client's request bucket (its RPM limiter) in requests, as the
//!   last call that ended in the bin left it (read without refilling it, so reading it
//!   changes nothing of the run); negative while reservations wait for credit. With a fleet,
//!   that call's replica's bucket. Empty when the client has no RPM limiter (or keeps it on
//!   Redis), or no call ended in the bin.
//! - `call_p50_ms`, `call_p95_ms`, `call_p99_ms`: percentiles of the latency (from
//!   submission) of the calls that succeeded and ended in the bin, in milliseconds, to 2
//!   significant digits (an HDR histogram per bin; each is the highest value its bucket
//!   holds); empty when none did.
//!
//! Means are over the part of the bin the run covered: the last bin's over the time up to the
//! end of the run. The same scenario and seed give the same file, byte for byte, in virtual
//! time.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::engine::recorder::{CallBin, Recording};
use crate::output::files::OutputSet;

/// The file's name, beside summary.json.
pub const FILE: &str = "timeseries.csv";

/// The header row.
pub const HEADER: &str = "t_s,bin_s,requests,charged,rate_limited,tokens,completed,failed,\
cancelled,in_flight_mean,queue_len_mean,concurrency_limit_mean,limiter_balance,call_p50_ms,\
call_p95_ms,call_p99_ms";

/// Declares `timeseries.csv` in `dir` as an output of `set`, named by `--timeseries`.
pub fn declare(set: &mut OutputSet, dir: &Path) {
    set.output(dir.join(FILE), "--timeseries");
}

/// Gives `timeseries.csv` in `dir` its content, from a run's recording and its span (model
/// time from the start to the end of the run).
pub fn put(set: &mut OutputSet, dir: &Path, recording: &Recording, span: Duration) {
    set.put(dir.join(FILE), csv(recording, span));
}

/// `total / us` with three decimals; empty when `us` is zero.
fn mean(total: u64, us: u64) -> String {
    if us == 0 {
        String::new()
    } else {
        format!("{:.3}", total as f64 / us as f64)
    }
}

/// The latency percentiles of a bin's calls, in ms, or empty cells.
fn percentiles(calls: Option<&CallBin>) -> String {
    match calls.map(|c| &c.latency) {
        Some(h) if !h.is_empty() => [0.50, 0.95, 0.99]
            .map(|q| format!("{:.3}", h.value_at_quantile(q) as f64 / 1000.0))
            .join(","),
        _ => ",,".to_string(),
    }
}

/// The CSV text: [`HEADER`], then one row per bin up to the end of the run (`span`).
pub fn csv(rec: &Recording, span: Duration) -> String {
    let series = &rec.series;
    let width = series.bin_s.max(1) * 1_000_000;
    let span_us = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
    let rows = usize::try_from(span_us.div_ceil(width))
        .unwrap_or(usize::MAX)
        .max(series.bins.len());
    // Without the calls' bins (a run that did not ask for a time series) their cells are empty.
    let kept = series.calls.is_some();
    let calls = series.calls.as_deref().unwrap_or_default();
    let mut out = String::with_capacity(64 * (rows + 1));
    out.push_str(HEADER);
    out.push('\n');
    for i in 0..rows {
        let start = i as u64 * width;
        // The part of the bin the run covered (all of it, but for the last).
        let covered = span_us.clamp(start, start + width) - start;
        let bin = series.bins.get(i).copied().unwrap_or_default();
        let c = calls.get(i);
        let count = |f: fn(&CallBin) -> u64| c.map_or(0, f);
        let cell = |v: u64| if kept { v.to_string() } else { String::new() };
        let per_us = |v: u64| {
            if kept {
                mean(v, covered)
            } else {
                String::new()
            }
        };
        let limit = rec.limits_until_us.map_or(String::new(), |until| {
            mean(bin.limit_us, until.clamp(start, start + width) - start)
        });
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            start / 1_000_000,
            series.bin_s,
            bin.requests,
            bin.charged,
            bin.rate_limited,
            bin.tokens,
            cell(count(|c| c.completed)),
            cell(count(|c| c.failed)),
            cell(count(|c| c.cancelled)),
            per_us(count(|c| c.in_flight_us)),
            per_us(count(|c| c.queued_us)),
            limit,
            c.and_then(|c| c.balance)
                .map_or(String::new(), |(_, b)| format!("{b:.3}")),
            percentiles(c),
        );
    }
    out
}
