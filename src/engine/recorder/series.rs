//! The recorder's per-second series: provider arrivals per bin of model time, and, when a run
//! asks for a time series (`capsize run --timeseries`), what the scheduler's calls did in each
//! bin. Bins start one second wide and double in width whenever more than [`MAX_BINS`] would be
//! needed, so memory stays fixed however long the run.

use hdrhistogram::Histogram;

/// Requests and tokens the provider received in one bin of model time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Second {
    /// Requests received (whatever their fate).
    pub requests: u64,
    /// Requests the provider charged (not refused).
    pub charged: u64,
    /// Tokens charged.
    pub tokens: u64,
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
            rate_limited: self.rate_limited + o.rate_limited,
            limit_us: self.limit_us + o.limit_us,
        }
    }
}

/// What the scheduler's calls did in one bin of model time (kept only for a run that asks for
/// a time series). Every call is folded in once, when it ends, from its submission, the time
/// it waited for a permit and its end: nothing is sampled.
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// significant digits; `None` while there are none.
    pub latency: Option<Histogram<u64>>,
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
        if let Some(h) = &o.latency {
            match &mut self.latency {
                // Both auto-resize: adding cannot run out of range.
                Some(mine) => {
                    let _ = mine.add(h);
                }
                None => self.latency = Some(h.clone()),
            }
        }
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
        let h = self.latency.get_or_insert_with(|| {
            // Two significant digits, growing to the largest value seen: a bin costs a few
            // kilobytes, not the ~0.5 MB a fixed 3-digit histogram to a day would.
            Histogram::new(2).expect("2 significant digits are valid")
        });
        // It grows to fit (saturating_record would clamp to its current top instead).
        if h.record(micros).is_err() {
            h.saturating_record(micros);
        }
    }
}

/// The most bins a [`Series`] keeps.
pub const MAX_BINS: usize = 4096;

/// Provider arrivals over time: bins of `bin_s` seconds, starting at one second and doubling
/// in width whenever more than [`MAX_BINS`] would be needed, so memory stays fixed.
#[derive(Debug, Clone, PartialEq)]
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

    /// The bin holding second `at_s`.
    pub(super) fn bin(&mut self, at_s: u64) -> &mut Second {
        let i = self.index(at_s);
        &mut self.bins[i]
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
