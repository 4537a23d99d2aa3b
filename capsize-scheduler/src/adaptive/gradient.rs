//! A latency gradient, after the description of Netflix concurrency-limits' Gradient2: the
//! limit follows the ratio of the long-run round trip to the short-run one. While answers come
//! as fast as usual each step moves it `smoothing` of the way to `limit + sqrt(limit)` (the
//! queue it allows itself: `smoothing x sqrt(limit)` a step); slower answers pull the target
//! down, by at most half the limit, and the limit settles where the two balance
//! (`limit = 1 / (1 - gradient)^2`; at 4 or below latency alone cannot shrink it). Unlike
//! Gradient2, a drop (a 429, a timeout) also cuts it by `backoff`, as AIMD does: against a
//! rate limit the round trip says nothing until it is too late. Known limit: a provider that
//! becomes slower for good, while the limit is above `min`, is taken for our own queue and
//! not learnt, so the limit settles low and stays there.
//!
//! One step, from a call that succeeded in `rtt` with `in_flight` calls holding permits
//! (`short` is the short-run round trip, an exponential average over ten samples, where
//! Gradient2 takes one sample alone: with long-tailed answers one sample is noise):
//!
//! 1. the long-run round trip `long` takes the sample (the mean of the first ten, then an
//!    exponential average over `long_window` samples), unless `short` is slower than
//!    `tolerance x long` while the limit is above `min`: that is our own queue, and Gradient2,
//!    which learns it, drifts up with sustained load until only drops stop it (at `min` a
//!    slow answer is the provider's own pace, and is learnt); if `long > 2 x short` (load went
//!    away) it decays by 5 %, so the limit recovers without waiting out the average;
//! 2. for the first ten samples (while `long` is learnt at the starting limit), and while
//!    fewer than half the limit are in flight (the caller is not using it), no change;
//! 3. `gradient = clamp(tolerance x long / short, 0.5, 1)`,
//!    `target = limit x gradient + sqrt(limit)`, and the limit moves `smoothing` of the way
//!    to `target`.

use std::time::Duration;

use super::Bounds;

/// A latency-gradient limit on calls in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gradient {
    /// The limit at the start.
    pub initial: usize,
    /// The lowest it goes.
    pub min: usize,
    /// The highest it goes.
    pub max: usize,
    /// What a drop (a 429 or a timeout) multiplies it by, in (0, 1).
    pub backoff: f64,
    /// How much slower than the long-run average an answer may be before the limit shrinks
    /// (at least 1; Gradient2's default 1.5).
    pub tolerance: f64,
    /// The share of the way to its target the limit moves each step, in (0, 1] (0.2).
    pub smoothing: f64,
    /// Samples the long-run round trip averages over (600).
    pub long_window: u32,
}

impl Gradient {
    /// A gradient limit from `initial` within [`min`, `max`], with the default `backoff` 0.5,
    /// `tolerance` 1.5, `smoothing` 0.2 and `long_window` 600.
    pub fn new(initial: usize, min: usize, max: usize) -> Self {
        Gradient {
            initial,
            min,
            max,
            backoff: 0.5,
            tolerance: 1.5,
            smoothing: 0.2,
            long_window: 600,
        }
    }

    /// Whether the settings hold together: the bounds as [`super::Aimd::is_valid`] says,
    /// `tolerance >= 1`, `smoothing` in (0, 1] and `long_window >= 1`.
    pub fn is_valid(&self) -> bool {
        self.bounds().is_valid(self.backoff)
            && self.tolerance >= 1.0
            && self.tolerance.is_finite()
            && self.smoothing > 0.0
            && self.smoothing <= 1.0
            && self.long_window >= 1
    }

    pub(super) fn bounds(&self) -> Bounds {
        Bounds {
            initial: self.initial,
            min: self.min,
            max: self.max,
        }
    }
}

/// Samples averaged plainly before the exponential average takes over.
const WARMUP: u64 = 10;

/// Samples the short-run round trip averages over: one answer alone is noise.
const SHORT_WINDOW: f64 = 10.0;

/// What a gradient limit remembers between steps: the short-run and long-run round trips.
#[derive(Debug, Clone, Default)]
pub(super) struct Rtts {
    /// The long-run average, in seconds.
    long: f64,
    /// Samples it has taken.
    samples: u64,
    /// The short-run average, in seconds (0 before the first sample).
    short: f64,
}

impl Rtts {
    fn learn(&mut self, rtt: f64, window: u32) {
        self.samples += 1;
        let n = self.samples as f64;
        if self.samples <= WARMUP.min(u64::from(window)) {
            self.long += (rtt - self.long) / n;
        } else {
            let alpha = 2.0 / (f64::from(window) + 1.0);
            self.long += (rtt - self.long) * alpha;
        }
    }

    fn sample(&mut self, rtt: f64) {
        self.short = if self.short == 0.0 {
            rtt
        } else {
            self.short + (rtt - self.short) * 2.0 / (SHORT_WINDOW + 1.0)
        };
    }
}

impl Gradient {
    /// The limit after a success in `rtt` with `in_flight` calls holding permits.
    pub(super) fn step(&self, rtts: &mut Rtts, limit: f64, rtt: Duration, in_flight: usize) -> f64 {
        let rtt = rtt.as_secs_f64();
        rtts.sample(rtt);
        let short = rtts.short;
        let warm = WARMUP.min(u64::from(self.long_window));
        // Answers slow on the short run while the limit is above its floor are our own
        // queue: they do not become the norm. At the floor they are the provider's own pace,
        // and are learnt.
        let learnt = rtts.samples >= warm;
        let congested = learnt && short > self.tolerance * rtts.long && limit > self.min as f64;
        if !congested {
            rtts.learn(rtt, self.long_window);
            if rtts.long > 2.0 * short {
                rtts.long *= 0.95;
            }
        }
        // Until the long-run round trip is learnt, or while the caller does not use half
        // the limit, the limit holds.
        if !learnt || (in_flight as f64) < limit / 2.0 {
            return limit;
        }
        // Answers in no time (a virtual tool with no latency) say nothing about queueing.
        let gradient = if short > 0.0 {
            (self.tolerance * rtts.long / short).clamp(0.5, 1.0)
        } else {
            1.0
        };
        let target = limit * gradient + limit.sqrt();
        limit * (1.0 - self.smoothing) + target * self.smoothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn steady_answers_grow_the_limit_by_a_fifth_of_its_root() {
        let g = Gradient::new(16, 1, 100);
        let mut long = Rtts::default();
        // Ten answers learn the round trip and hold the limit; then 16 + 0.2 x sqrt(16).
        for _ in 0..10 {
            assert_eq!(g.step(&mut long, 16.0, ms(100), 16), 16.0);
        }
        let next = g.step(&mut long, 16.0, ms(100), 16);
        assert!((next - 16.8).abs() < 1e-12, "{next}");
    }

    #[test]
    fn slow_answers_shrink_it_by_at_most_half_a_step() {
        let g = Gradient::new(16, 1, 100);
        let mut long = Rtts::default();
        for _ in 0..10 {
            g.step(&mut long, 16.0, ms(100), 16);
        }
        // Ten answers of 100 ms, then one of 1 s: short = 0.1 + 0.9 x 2/11 = 0.2636 s, our
        // queue, not learnt (long stays 0.1 s); gradient = 1.5 x 0.1 / 0.2636 = 0.569;
        // target = 16 x 0.569 + 4; the limit moves a fifth of the way there.
        let next = g.step(&mut long, 16.0, ms(1000), 16);
        let short = 0.1 + 0.9 * 2.0 / 11.0;
        let want = 16.0 * 0.8 + (16.0 * (1.5 * 0.1 / short) + 4.0) * 0.2;
        assert!((next - want).abs() < 1e-12, "{next} {want}");
        assert!((long.long - 0.1).abs() < 1e-12, "{}", long.long);
        // At the floor the same answers are the provider's pace, and are learnt.
        let floor = Gradient::new(1, 1, 100);
        floor.step(&mut long, 1.0, ms(1000), 1);
        assert!(long.long > 0.1, "{}", long.long);
    }

    #[test]
    fn an_idle_limit_does_not_grow() {
        let g = Gradient::new(16, 1, 100);
        let mut long = Rtts::default();
        assert_eq!(g.step(&mut long, 16.0, ms(100), 7), 16.0);
    }

    #[test]
    fn the_long_average_decays_when_load_goes_away() {
        let g = Gradient::new(16, 1, 100);
        let mut long = Rtts::default();
        for _ in 0..10 {
            g.step(&mut long, 16.0, ms(1000), 16);
        }
        // Then answers of 100 ms: the short run falls below half the long run at the fifth
        // (0.1 + 0.9 x (9/11)^5 = 0.43 s), which takes 5 % off the long run at once.
        let alpha = 2.0 / 601.0;
        let mut want = 1.0;
        for _ in 0..4 {
            g.step(&mut long, 16.0, ms(100), 16);
            want += (0.1 - want) * alpha;
        }
        assert!((long.long - want).abs() < 1e-12, "{}", long.long);
        g.step(&mut long, 16.0, ms(100), 16);
        want = (want + (0.1 - want) * alpha) * 0.95;
        assert!((long.long - want).abs() < 1e-12, "{}", long.long);
    }
}
