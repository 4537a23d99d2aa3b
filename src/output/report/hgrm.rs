//! HdrHistogram's standard percentile-distribution text (`.hgrm`), values in milliseconds.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// The percentile distribution of a histogram of microseconds, in milliseconds, in the format
/// HdrHistogram's `outputPercentileDistribution` writes (5 ticks per half distance).
pub fn percentile_distribution(h: &Histogram<u64>) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let (value, q) = (ms(v.value_iterated_to()), v.quantile_iterated_to());
            if q < 1.0 {
                let inv = 1.0 / (1.0 - q);
                let _ = writeln!(out, "{value:>12.3} {q:>14.12} {total:>10} {inv:>14.2}");
            } else {
                let _ = writeln!(out, "{value:>12.3} {q:>14.12} {total:>10}");
            }
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean() / 1000.0, h.stdev() / 1000.0, ms(h.max()))
    };
    let _ = writeln!(
        out,
        "#[Mean    = {mean:>12.3}, StdDeviation   = {sd:>12.3}]"
    );
    let _ = writeln!(
        out,
        "#[Max     = {max:>12.3}, Total count    = {:>12}]",
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}
