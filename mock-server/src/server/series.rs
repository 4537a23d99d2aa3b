//! Model requests over time, as the server saw them: a per-second series (what was received,
//! charged, refused, and how many were in flight) and the busiest 60 s of requests and tokens
//! charged. Bounded: at most [`MAX_BINS`] bins; a longer run merges neighbouring bins, so a bin
//! then covers 2, 4, ... seconds. The busiest 60 s is kept exactly, at one-second resolution,
//! whatever the length of the run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The most bins a series holds (a day of seconds); past it, pairs merge.
pub const MAX_BINS: usize = 86_400;

/// One bin of the series: what happened in its seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    /// Model requests decided (received by the model).
    pub received: u64,
    /// Requests charged against the quota.
    pub charged: u64,
    /// Requests refused with 429.
    pub rate_limited: u64,
    /// Requests failed with 5xx by the model.
    pub errored: u64,
    /// Tokens charged.
    pub tokens: u64,
    /// The most model requests in flight at once during the bin.
    pub in_flight_peak: u64,
    /// The mean in flight over the bin (over its elapsed part, for the last one).
    pub in_flight_mean: f64,
}

/// The series at some instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Seconds each bin covers (1, or a power of two for a run over [`MAX_BINS`] seconds).
    pub bin_s: u64,
    /// The bins, the first starting when the server started.
    pub bins: Vec<Bin>,
}

/// What one decided request adds to the series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decided {
    /// Its HTTP status.
    pub(crate) status: u16,
    /// Whether it was charged.
    pub(crate) charged: bool,
    /// Tokens charged (0 if not charged).
    pub(crate) tokens: u64,
}

/// A bin as it grows: request-seconds in flight instead of their mean.
#[derive(Debug, Clone, Copy, Default)]
struct Open {
    bin: Bin,
    area: f64,
}

/// The growing series, and the busiest minute.
#[derive(Debug)]
pub(crate) struct Tally {
    bins: Vec<Open>,
    width: u64,
    cap: usize,
    busiest: Busiest,
}

impl Default for Tally {
    fn default() -> Self {
        Tally::with_cap(MAX_BINS)
    }
}

impl Tally {
    /// A series of at most `cap` bins (at least 2).
    pub(crate) fn with_cap(cap: usize) -> Self {
        Tally {
            bins: Vec::new(),
            width: 1,
            cap: cap.max(2),
            busiest: Busiest::default(),
        }
    }

    /// The bin holding second `sec`, created (with `in_flight` as its peak) if need be.
    fn bin(&mut self, sec: u64, in_flight: u64) -> &mut Open {
        let mut idx = sec / self.width;
        while idx >= self.cap as u64 {
            self.coarsen();
            idx = sec / self.width;
        }
        let idx = usize::try_from(idx).unwrap_or(usize::MAX);
        while self.bins.len() <= idx {
            let mut open = Open::default();
            open.bin.in_flight_peak = in_flight;
            self.bins.push(open);
        }
        &mut self.bins[idx]
    }

    /// Merges neighbouring bins: each covers twice as long.
    fn coarsen(&mut self) {
        let merged = self
            .bins
            .chunks(2)
            .map(|pair| {
                pair.iter().fold(Open::default(), |mut a, b| {
                    a.bin.received += b.bin.received;
                    a.bin.charged += b.bin.charged;
                    a.bin.rate_limited += b.bin.rate_limited;
                    a.bin.errored += b.bin.errored;
                    a.bin.tokens = a.bin.tokens.saturating_add(b.bin.tokens);
                    a.bin.in_flight_peak = a.bin.in_flight_peak.max(b.bin.in_flight_peak);
                    a.area += b.area;
                    a
                })
            })
            .collect();
        self.bins = merged;
        self.width *= 2;
    }

    /// `in_flight` requests were in flight from `from` to `to` (times since the start).
    pub(crate) fn held(&mut self, from: Duration, to: Duration, in_flight: u64) {
        if in_flight == 0 {
            self.bin(to.as_secs(), 0);
            return;
        }
        let mut at = from;
        while at < to {
            // Made first: it may merge bins, which moves the next boundary.
            self.bin(at.as_secs(), in_flight);
            let w = self.width;
            let upto =
                Duration::from_secs((at.as_secs() / w).saturating_add(1).saturating_mul(w)).min(to);
            let area = in_flight as f64 * (upto - at).as_secs_f64();
            self.bin(at.as_secs(), in_flight).area += area;
            at = upto;
        }
    }

    /// The number in flight rose to `in_flight` at `now`.
    pub(crate) fn entered(&mut self, now: Duration, in_flight: u64) {
        let open = self.bin(now.as_secs(), in_flight);
        open.bin.in_flight_peak = open.bin.in_flight_peak.max(in_flight);
    }

    /// A request was decided at `now`.
    pub(crate) fn decided(&mut self, now: Duration, in_flight: u64, d: Decided) {
        let sec = now.as_secs();
        let bin = &mut self.bin(sec, in_flight).bin;
        bin.received += 1;
        match d.status {
            429 => bin.rate_limited += 1,
            500..=599 => bin.errored += 1,
            _ => {}
        }
        if d.charged {
            bin.charged += 1;
            bin.tokens = bin.tokens.saturating_add(d.tokens);
            self.busiest.add(sec, d.tokens);
        }
    }

    /// The series at `now` (the last bin's mean over its elapsed part).
    pub(crate) fn series(&self, now: Duration) -> Series {
        let width = self.width as f64;
        let last = self.bins.len().saturating_sub(1);
        let bins = self
            .bins
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let span = if i == last {
                    (now.as_secs_f64() - (i as f64) * width).clamp(f64::MIN_POSITIVE, width)
                } else {
                    width
                };
                Bin {
                    in_flight_mean: o.area / span,
                    ..o.bin
                }
            })
            .collect();
        Series {
            bin_s: self.width,
            bins,
        }
    }

    /// The most requests and the most tokens charged in any 60 whole seconds (each its own
    /// busiest window).
    pub(crate) fn busiest(&self) -> (u64, u64) {
        (self.busiest.requests.best, self.busiest.tokens.best)
    }
}

/// A 60-second sliding sum, and its largest value.
#[derive(Debug)]
struct Window {
    ring: [u64; 60],
    sum: u64,
    best: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            ring: [0; 60],
            sum: 0,
            best: 0,
        }
    }
}

/// The busiest 60 s of requests and of tokens charged.
#[derive(Debug, Default)]
struct Busiest {
    /// The second of the last charge.
    sec: u64,
    requests: Window,
    tokens: Window,
}

impl Busiest {
    /// A charge of one request and `tokens` in second `sec` (never earlier than the last).
    fn add(&mut self, sec: u64, tokens: u64) {
        let sec = sec.max(self.sec);
        // Seconds that left the window since the last charge.
        let gone = (sec - self.sec).min(60);
        for w in [&mut self.requests, &mut self.tokens] {
            for k in 1..=gone {
                let slot = usize::try_from((self.sec + k) % 60).unwrap_or(0);
                w.sum = w.sum.saturating_sub(w.ring[slot]);
                w.ring[slot] = 0;
            }
        }
        self.sec = sec;
        let slot = usize::try_from(sec % 60).unwrap_or(0);
        for (w, x) in [(&mut self.requests, 1), (&mut self.tokens, tokens)] {
            w.ring[slot] = w.ring[slot].saturating_add(x);
            w.sum = w.sum.saturating_add(x);
            w.best = w.best.max(w.sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    fn charge(t: &mut Tally, at: f64, tokens: u64) {
        let d = Decided {
            status: 200,
            charged: true,
            tokens,
        };
        t.decided(s(at), 1, d);
    }

    #[test]
    fn the_busiest_minute_slides_over_whole_seconds() {
        let mut t = Tally::default();
        // 3 in second 0, 2 in second 59, 4 in second 60: the window 1..=60 holds 6.
        for at in [0.1, 0.2, 0.3, 59.5, 59.6, 60.1, 60.2, 60.3, 60.4] {
            charge(&mut t, at, 10);
        }
        assert_eq!(t.busiest(), (6, 60));
        // A charge long after: the old seconds are gone.
        charge(&mut t, 500.0, 1000);
        assert_eq!(t.busiest(), (6, 1000));
        // A 429 is received and refused, not charged.
        t.decided(
            s(500.5),
            1,
            Decided {
                status: 429,
                charged: false,
                tokens: 0,
            },
        );
        let series = t.series(s(501.0));
        assert_eq!(series.bins.len(), 501);
        assert_eq!(series.bins[500].received, 2);
        assert_eq!(series.bins[500].rate_limited, 1);
        assert_eq!(series.bins[60].charged, 4);
    }

    #[test]
    fn requests_in_flight_are_split_over_the_seconds_they_span() {
        let mut t = Tally::default();
        t.entered(s(0.5), 1);
        t.held(s(0.5), s(2.5), 1);
        t.entered(s(2.5), 2);
        t.held(s(2.5), s(3.0), 2);
        let series = t.series(s(3.0));
        let means: Vec<f64> = series.bins.iter().map(|b| b.in_flight_mean).collect();
        assert_eq!(means, [0.5, 1.0, 1.5]);
        let peaks: Vec<u64> = series.bins.iter().map(|b| b.in_flight_peak).collect();
        assert_eq!(peaks, [1, 1, 2]);
    }

    #[test]
    fn a_long_series_merges_bins_and_stays_bounded() {
        let mut t = Tally::with_cap(4);
        for sec in 0..9 {
            charge(&mut t, sec as f64 + 0.5, 1);
        }
        let series = t.series(s(9.0));
        // 9 seconds in at most 4 bins: 4 s each.
        assert_eq!(series.bin_s, 4);
        let charged: Vec<u64> = series.bins.iter().map(|b| b.charged).collect();
        assert_eq!(charged, [4, 4, 1]);
        assert_eq!(t.busiest(), (9, 9));
    }
}
