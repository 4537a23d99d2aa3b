//! The recorder's per-second series: provider arrivals per bin of model time, and, when a run
//! asks for a time series (`capsize run --timeseries`), what the scheduler's calls did in each
//! bin. Bins start one second wide and double in width whenever more than [`MAX_BINS`] would be
//! needed, so memory stays fixed however long the run.

use std::sync::OnceLock;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Requests and tokens the provider received in one bin of model time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Second {
    /// Requests received (whatever their fate).
    pub requests: u64,
    /// Requests the provider charged (not refused).
    pub charged: u64,
    /// Tokens charged.
    pub tokens: u64,
    /// Of `tokens`, those charged as output at admission (the model turns' `max_tokens`;
    /// the rest are input).
    pub output: u64,
    /// Requests refused with 429.
    pub rate_limited: u64,
    /// The adaptive concurrency limits (every replica's, added up) integrated over the bin,
    /// in limit x microseconds: divided by the bin's width, their mean in it.
    pub limit_us: u64,
}

impl Second {
    fn merge(self, o: Second) -> Second {
        Second {
            requests: self.requests + o.requests,
            charged: self.charged + o.charged,
            tokens: self.tokens + o.tokens,
            output: self.output + o.output,
            rate_limited: self.rate_limited + o.rate_limited,
            limit_us: self.limit_us + o.limit_us,
        }
    }
}

/// What the scheduler's calls did in one bin of model time (kept only for a run that asks for
/// a time series). Every call is folded in once, when it ends, from its submission, the time
/// it waited for a permit and its end: nothing is sampled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallBin {
    /// Calls that succeeded and ended in the bin.
    pub completed: u64,
    /// Calls that failed for good and ended in the bin.
    pub failed: u64,
    /// Calls stopped (cancel, deadline, budget) that ended in the bin.
    pub cancelled: u64,
    /// Calls holding a concurrency permit (waiting for the rate limiter, sent, or backing off
    /// before a retry), integrated over the bin, in calls x microseconds.
    pub in_flight_us: u64,
    /// Calls waiting for a concurrency permit, integrated over the bin, in calls x µs.
    pub queued_us: u64,
    /// Latency (µs, from submission) of the calls that succeeded and ended in the bin, to 2
    /// significant digits.
    pub latency: BinLatency,
    /// The request bucket's balance at the last call end in the bin that read one, and when
    /// (model µs): `None` while none did.
    pub balance: Option<(u64, f64)>,
}

impl CallBin {
    fn merge(mut self, o: &CallBin) -> CallBin {
        self.completed += o.completed;
        self.failed += o.failed;
        self.cancelled += o.cancelled;
        self.in_flight_us += o.in_flight_us;
        self.queued_us += o.queued_us;
        if let Some((at, b)) = o.balance {
            self.balance(at, b);
        }
        self.latency.add(&o.latency);
        self
    }

    /// Keeps `balance`, read at `at_us`, if it is the bin's latest (of two at one instant, the
    /// one recorded last: call ends are recorded in the order they happen).
    pub(super) fn balance(&mut self, at_us: u64, balance: f64) {
        if self.balance.is_none_or(|(t, _)| at_us >= t) {
            self.balance = Some((at_us, balance));
        }
    }

    /// Records the latency (µs) of a call that succeeded and ended in the bin.
    pub(super) fn latency(&mut self, micros: u64) {
        self.latency.record(micros);
    }
}

/// The bucketing of a bin's latencies: an HDR histogram's of two significant digits (its
/// configuration alone; it holds no counts).
fn buckets() -> &'static Histogram<u64> {
    static BUCKETS: OnceLock<Histogram<u64>> = OnceLock::new();
    BUCKETS.get_or_init(|| Histogram::new(2).expect("2 significant digits are valid"))
}

/// One bin's latencies to two significant digits: an HDR histogram's counts, kept sparse (the
/// buckets that hold a value, in order, 8 bytes each, no spare capacity), so a bin costs what
/// its distinct latencies need, not the ~20 KB of a whole histogram. Its quantiles are the
/// histogram's, value for value. A bucket counts up to 4,294,967,295 calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinLatency {
    /// (a bucket's key, see [`key`], how many values it holds), by key (so by value).
    counts: Vec<(u16, u32)>,
    total: u64,
}

/// The key of the bucket whose lowest value is `low` (a lowest equivalent value of a 2-digit
/// HDR histogram: `sub << shift`, `sub` < 256): `shift × 256 + sub`, in value order.
fn key(low: u64) -> u16 {
    let shift = (63 - (low | 255).leading_zeros()).saturating_sub(7);
    (shift * 256 + (low >> shift) as u32) as u16
}

/// The lowest value of the bucket of `key`.
fn low(key: u16) -> u64 {
    u64::from(key % 256) << (key / 256)
}

impl BinLatency {
    /// Counts `micros`.
    fn record(&mut self, micros: u64) {
        self.add_count(key(buckets().lowest_equivalent(micros)), 1);
    }

    /// Adds `n` to the bucket of `key`.
    fn add_count(&mut self, key: u16, n: u32) {
        match self.counts.binary_search_by_key(&key, |&(k, _)| k) {
            Ok(i) => self.counts[i].1 = self.counts[i].1.saturating_add(n),
            Err(i) => {
                self.counts.reserve_exact(1);
                self.counts.insert(i, (key, n));
            }
        }
        self.total += u64::from(n);
    }

    /// Adds every value of `other`.
    fn add(&mut self, other: &BinLatency) {
        for &(key, n) in &other.counts {
            self.add_count(key, n);
        }
    }

    /// Whether no value was recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The value at `quantile` (0 < q ≤ 1) as an HDR histogram of two significant digits
    /// gives it: the highest value of the bucket where the count reaches ⌈q × total⌉.
    pub fn value_at_quantile(&self, quantile: f64) -> u64 {
        let wanted = ((quantile.min(1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        let at = self.counts.iter().find(|&&(_, n)| {
            seen += u64::from(n);
            seen >= wanted
        });
        at.or(self.counts.last())
            .map_or(0, |&(key, _)| buckets().highest_equivalent(low(key)))
    }
}

/// The most bins a [`Series`] keeps.
pub const MAX_BINS: usize = 4096;

/// Provider arrivals over time: bins of `bin_s` seconds, starting at one second and doubling
/// in width whenever more than [`MAX_BINS`] would be needed, so memory stays fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Width of a bin, in seconds of model time.
    pub bin_s: u64,
    /// The bins, from time 0.
    pub bins: Vec<Second>,
    /// What the calls did per bin, bin for bin beside `bins` (`None`: the run did not ask for
    /// a time series).
    pub calls: Option<Vec<CallBin>>,
}

impl Series {
    /// An empty series of one-second bins; `calls` keeps what the calls did per bin too.
    pub(super) fn new(calls: bool) -> Series {
        Series {
            bin_s: 1,
            bins: Vec::new(),
            calls: calls.then(Vec::new),
        }
    }

    /// The index of the bin holding second `at_s`, widening every bin first if needed.
    fn index(&mut self, at_s: u64) -> usize {
        while at_s / self.bin_s >= MAX_BINS as u64 {
            self.widen();
        }
        let i = (at_s / self.bin_s) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, Second::default());
        }
        if let Some(calls) = &mut self.calls {
            if calls.len() <= i {
                calls.resize(i + 1, CallBin::default());
            }
        }
        i
    }

    /// Doubles the bins' width, each new bin the sum of two.
    fn widen(&mut self) {
        self.bins = self
            .bins
            .chunks(2)
            .map(|p| p.iter().fold(Second::default(), |a, b| a.merge(*b)))
            .collect();
        if let Some(calls) = &mut self.calls {
            *calls = calls
                .chunks(2)
                .map(|p| p.iter().fold(CallBin::default(), CallBin::merge))
                .collect();
        }
        self.bin_s *= 2;
    }

    /// Adds `other`, a series of the same run seen by another replica from the same start, bin
    /// by bin (the finer of the two widened to the coarser's width). Call bins are kept only
    /// if both have them.
    pub fn absorb(&mut self, other: &Series) {
        let mut other = other.clone();
        while other.bin_s < self.bin_s {
            other.widen();
        }
        while self.bin_s < other.bin_s {
            self.widen();
        }
        if self.bins.len() < other.bins.len() {
            self.bins.resize(other.bins.len(), Second::default());
        }
        for (a, b) in self.bins.iter_mut().zip(&other.bins) {
            *a = a.merge(*b);
        }
        self.calls = match (self.calls.take(), &other.calls) {
            (Some(mut a), Some(b)) => {
                if a.len() < b.len() {
                    a.resize(b.len(), CallBin::default());
                }
                for (x, y) in a.iter_mut().zip(b) {
                    *x = std::mem::take(x).merge(y);
                }
                Some(a)
            }
            _ => None,
        };
    }

    /// The most requests and tokens charged in any 60 consecutive seconds, when the bins are
    /// one second wide (`None` once a long run has widened them).
    pub fn peak_60s(&self) -> Option<(u64, u64)> {
        if self.bin_s != 1 {
            return None;
        }
        let (mut sum, mut peak) = ((0u64, 0u64), (0u64, 0u64));
        for (i, b) in self.bins.iter().enumerate() {
            sum = (sum.0 + b.charged, sum.1 + b.tokens);
            if let Some(old) = i.checked_sub(60).map(|j| self.bins[j]) {
                sum = (sum.0 - old.charged, sum.1 - old.tokens);
            }
            peak = (peak.0.max(sum.0), peak.1.max(sum.1));
        }
        Some(peak)
    }

    /// Adds `one` (an arrival's counts) to the bin holding second `at_s`.
    pub(super) fn add(&mut self, at_s: u64, one: Second) {
        let i = self.index(at_s);
        self.bins[i] = self.bins[i].merge(one);
    }

    /// What the calls did in the bin holding second `at_s` (`None` without a time series).
    pub(super) fn calls_at(&mut self, at_s: u64) -> Option<&mut CallBin> {
        self.calls.as_ref()?;
        let i = self.index(at_s);
        self.calls.as_mut().map(|c| &mut c[i])
    }

    /// Calls `add(series, bin, µs)` for each bin that `[from_us, to_us)` (model µs) spans, with
    /// the µs of the span inside it.
    fn spread(&mut self, from_us: u64, to_us: u64, mut add: impl FnMut(&mut Series, usize, u64)) {
        let mut at = from_us;
        while at < to_us {
            // The bin first: making room may widen every bin.
            let i = self.index(at / 1_000_000);
            let width = self.bin_s * 1_000_000;
            let upto = ((at / width + 1) * width).min(to_us);
            add(self, i, upto - at);
            at = upto;
        }
    }

    /// Adds `limit` held from `from_us` to `to_us` (model µs) to the bins it spans.
    pub(super) fn hold(&mut self, limit: u64, from_us: u64, to_us: u64) {
        self.spread(from_us, to_us, |s, i, us| s.bins[i].limit_us += limit * us);
    }

    /// A call waited for a permit over `[from_us, to_us)` (model µs).
    pub(super) fn queued(&mut self, from_us: u64, to_us: u64) {
        self.spread(from_us, to_us, |s, i, us| {
            if let Some(c) = &mut s.calls {
                c[i].queued_us += us;
            }
        });
    }

    /// A call held a permit over `[from_us, to_us)` (model µs).
    pub(super) fn in_flight(&mut self, from_us: u64, to_us: u64) {
        self.spread(from_us, to_us, |s, i, us| {
            if let Some(c) = &mut s.calls {
                c[i].in_flight_us += us;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bins_latencies_give_a_histograms_quantiles_value_for_value() {
        // The sparse counts against a whole HDR histogram of 2 digits, on values from 0 to a
        // day spread over many buckets, merged from two halves as bins are.
        let mut whole = Histogram::<u64>::new(2).unwrap();
        let (mut a, mut b) = (BinLatency::default(), BinLatency::default());
        let mut x: u64 = 7;
        for i in 0..5_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = ((x >> 33) % 86_400_000_000) >> (i % 30);
            whole.record(v).unwrap();
            if i % 2 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
        }
        a.add(&b);
        assert_eq!(a.total, 5_000);
        for q in [0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(a.value_at_quantile(q), whole.value_at_quantile(q), "q {q}");
        }
        assert!(a.counts.len() < 5_000, "one entry per bucket in use");
        // Every bucket's key gives back its lowest value.
        for v in [
            0,
            1,
            255,
            256,
            257,
            511,
            512,
            1_000_000,
            86_400_000_000,
            u64::MAX / 2,
        ] {
            let lowest = buckets().lowest_equivalent(v);
            assert_eq!(low(key(lowest)), lowest, "value {v}");
        }
        assert!(BinLatency::default().is_empty());
    }
}
