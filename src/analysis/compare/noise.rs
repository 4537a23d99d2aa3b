//! How far a figure moves by chance: the 95 % intervals `capsize compare` holds a change
//! against, and the `.hgrm` percentile distributions the percentiles' intervals are read from.
//!
//! Each treats a run's queries (calls, requests) as independent samples: a simulated run's
//! samples share queues and limits, so a verdict close to its line is a hint, not a proof.

use serde::Serialize;

/// The two-sided 95 % point of the normal distribution.
pub const Z95: f64 = 1.959_964;

/// How a row's noise was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// A percentile: the order statistics around its rank, read off the `.hgrm` beside
    /// summary.json.
    OrderStatistics,
    /// A mean: ± 1.96 standard deviations of the samples over √n (the `.hgrm`'s).
    Mean,
    /// A count as Poisson (± 1.96 √count), for a rate or a count per query started.
    Poisson,
    /// Two proportions (pooled): a share of requests or queries.
    Binomial,
    /// A sweep point's mean over its repeats, with its 95 % half-width from sweep.csv.
    Repeats,
    /// No interval: no `.hgrm` beside summary.json, or one run per sweep point.
    None,
    /// Not judged: a figure with no way that is worse.
    Info,
}

impl Method {
    /// A short tag for a table's column.
    pub fn tag(self) -> &'static str {
        match self {
            Method::OrderStatistics => "order stats",
            Method::Mean => "mean ± sd/√n",
            Method::Poisson => "Poisson",
            Method::Binomial => "binomial",
            Method::Repeats => "repeats",
            Method::None => "none",
            Method::Info => "",
        }
    }

    /// What the tag means, in a sentence (`None` for a figure not judged).
    pub fn legend(self) -> Option<&'static str> {
        Some(match self {
            Method::OrderStatistics => "a percentile's 95 % interval is the pair of order statistics at ranks n·p ± 1.96·√(n·p·(1−p)), read off the .hgrm beside summary.json (conservatively, at its rows); it moved when the change exceeds the two intervals' sides toward each other, combined (√(a² + b²))",
            Method::Mean => "the mean ± 1.96·sd/√n of each run, sd and n from its .hgrm, combined (√(a² + b²))",
            Method::Poisson => "the count behind the figure as Poisson (± 1.96·√count: queries finished for a rate, requests for requests and tokens, retries for retries, answers served for dollars), combined (√(a² + b²))",
            Method::Binomial => "two proportions, pooled: moved when |pB − pA| > 1.96·√(p·(1−p)·(1/nA + 1/nB))",
            Method::Repeats => "each point's mean over its repeats ± its 95 % half-width from sweep.csv, combined (√(a² + b²))",
            Method::None => "no interval (no .hgrm beside summary.json, or one run per sweep point): the change is shown without a verdict",
            Method::Info => return None,
        })
    }
}

/// Half-widths `a` and `b` of two independent intervals, combined: √(a² + b²).
pub fn combined(a: f64, b: f64) -> f64 {
    a.hypot(b)
}

/// The 95 % half-width of a rate `rate` measured from `count` events (Poisson).
pub fn poisson_rate(rate: f64, count: f64) -> f64 {
    if count > 0.0 {
        // Divided first: a rate near f64::MAX keeps a finite half-width.
        Z95 * (rate / count.sqrt())
    } else {
        0.0
    }
}

/// The change two proportions `ka / na` and `kb / nb` may show by chance (pooled, 95 %);
/// `None` when either has no trials.
pub fn two_proportions(ka: f64, na: f64, kb: f64, nb: f64) -> Option<f64> {
    if na <= 0.0 || nb <= 0.0 {
        return None;
    }
    let p = ((ka + kb) / (na + nb)).clamp(0.0, 1.0);
    Some(Z95 * (p * (1.0 - p) * (1.0 / na + 1.0 / nb)).sqrt())
}

/// One histogram's percentile distribution, as HdrHistogram's `.hgrm` text holds it: rows of
/// (value in ms, samples at or below it), the sample count, mean and standard deviation.
#[derive(Debug, Clone, PartialEq)]
pub struct Hgrm {
    /// (value, cumulative count), both non-decreasing.
    pub rows: Vec<(f64, u64)>,
    /// Samples.
    pub count: u64,
    /// Their mean (ms).
    pub mean: f64,
    /// Their standard deviation (ms).
    pub sd: f64,
}

impl Hgrm {
    /// Reads `.hgrm` text; the error says what is wrong, in one line.
    pub fn parse(text: &str) -> Result<Hgrm, String> {
        let mut rows: Vec<(f64, u64)> = Vec::new();
        let (mut count, mut mean, mut sd) = (None, None, None);
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("Value") {
                continue;
            }
            if let Some(inner) = line.strip_prefix("#[").and_then(|l| l.strip_suffix(']')) {
                for pair in inner.split(',') {
                    let Some((k, v)) = pair.split_once('=') else {
                        continue;
                    };
                    let (k, v) = (k.trim(), v.trim());
                    let bad = || format!("line {}: {k} = {v:?} is not a number", i + 1);
                    match k {
                        "Mean" => mean = Some(v.parse::<f64>().map_err(|_| bad())?),
                        "StdDeviation" => sd = Some(v.parse::<f64>().map_err(|_| bad())?),
                        "Total count" => count = Some(v.parse::<u64>().map_err(|_| bad())?),
                        _ => {}
                    }
                }
                continue;
            }
            let mut cells = line.split_whitespace();
            let row = (|| {
                let value: f64 = cells.next()?.parse().ok()?;
                let _quantile: f64 = cells.next()?.parse().ok()?;
                let total: u64 = cells.next()?.parse().ok()?;
                Some((value, total))
            })();
            let Some((value, total)) = row.filter(|(v, _)| v.is_finite()) else {
                return Err(format!(
                    "line {}: not a row of value, percentile and total count",
                    i + 1
                ));
            };
            if let Some(&(v, t)) = rows.last() {
                if value < v || total < t {
                    return Err(format!("line {}: values or counts go down", i + 1));
                }
            }
            rows.push((value, total));
        }
        let (Some(count), Some(mean), Some(sd)) = (count, mean, sd) else {
            return Err("no #[Mean, StdDeviation, Total count] lines: not an .hgrm".into());
        };
        if rows.last().map_or(0, |r| r.1) != count {
            return Err(format!(
                "its rows count {} samples, its Total count says {count}",
                rows.last().map_or(0, |r| r.1)
            ));
        }
        Ok(Hgrm {
            rows,
            count,
            mean,
            sd,
        })
    }

    /// The 95 % interval of the `p` quantile: the order statistics at ranks n·p ± 1.96·√(n·p·(1−p)),
    /// bounded outward by the rows (the largest value with fewer samples than the lower rank,
    /// the smallest with at least the upper). `None` for an empty histogram.
    pub fn quantile_interval(&self, p: f64) -> Option<(f64, f64)> {
        let (first, last) = (self.rows.first()?, self.rows.last()?);
        let n = self.count as f64;
        let centre = n * p;
        let k = Z95 * (centre * (1.0 - p)).max(0.0).sqrt();
        let low = (centre - k).floor().max(1.0) as u64;
        let high = ((centre + k).ceil().min(n) as u64).max(1);
        let lower = self
            .rows
            .iter()
            .rev()
            .find(|(_, c)| *c < low)
            .map_or(first.0, |r| r.0);
        let upper = self
            .rows
            .iter()
            .find(|(_, c)| *c >= high)
            .map_or(last.0, |r| r.0);
        Some((lower, upper))
    }

    /// The 95 % half-width of the mean: 1.96·sd/√n (`None` for an empty histogram).
    pub fn mean_half_width(&self) -> Option<f64> {
        (self.count > 0).then(|| Z95 * self.sd / (self.count as f64).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HGRM: &str = "       Value     Percentile TotalCount 1/(1-Percentile)

     100.000 0.000000000000          1           1.00
     200.000 0.500000000000         50           2.00
     300.000 0.900000000000         90          10.00
     400.000 0.950000000000         95          20.00
     500.000 0.990000000000         99         100.00
     600.000 1.000000000000        100
#[Mean    =      250.000, StdDeviation   =       50.000]
#[Max     =      600.000, Total count    =          100]
#[Buckets =           27, SubBuckets     =        28672]
";

    #[test]
    fn an_hgrm_reads_back_and_gives_order_statistic_intervals() {
        let h = Hgrm::parse(HGRM).unwrap();
        assert_eq!(h.count, 100);
        assert_eq!(h.rows.len(), 6);
        // p95 of 100: ranks 95 ± 1.96·√4.75 = 95 ± 4.27 -> 90..100: below rank 90 the
        // largest row is 200 (50 samples); rank 100 is first reached at 600.
        assert_eq!(h.quantile_interval(0.95), Some((200.0, 600.0)));
        // p50: 50 ± 9.8 -> ranks 40..60: rows 100 (1 < 40) and 300 (90 >= 60).
        assert_eq!(h.quantile_interval(0.5), Some((100.0, 300.0)));
        assert!((h.mean_half_width().unwrap() - Z95 * 5.0).abs() < 1e-12);
    }

    #[test]
    fn a_malformed_hgrm_says_what_is_wrong() {
        assert!(Hgrm::parse("hello").unwrap_err().starts_with("line 1:"));
        assert!(Hgrm::parse("").unwrap_err().contains("not an .hgrm"));
        let short = HGRM.replace("=          100]", "=          101]");
        assert!(Hgrm::parse(&short)
            .unwrap_err()
            .contains("Total count says 101"));
        let empty = "#[Mean = 0.000, StdDeviation = 0.000]\n#[Max = 0.000, Total count = 0]\n";
        let h = Hgrm::parse(empty).unwrap();
        assert_eq!(h.quantile_interval(0.95), None);
        assert_eq!(h.mean_half_width(), None);
    }

    #[test]
    fn two_equal_proportions_of_nothing_have_no_room_and_no_trials_no_interval() {
        assert_eq!(two_proportions(0.0, 100.0, 0.0, 100.0), Some(0.0));
        assert_eq!(two_proportions(0.0, 0.0, 1.0, 10.0), None);
        // 10 % of 1,000 each: 1.96 · √(0.09 · 0.002) = 0.0263.
        let t = two_proportions(100.0, 1000.0, 100.0, 1000.0).unwrap();
        assert!((t - 0.026_296).abs() < 1e-5, "{t}");
    }
}
