//! Model time and runtime time.
//!
//! A scenario is written in model time (what a user means by "900 ms" or "600 RPM"). The virtual
//! clock reads model time itself; a real-time run may run F times faster (so a long scenario
//! runs in seconds). [`TimeScale`] converts both ways, exactly, in integer arithmetic.

use std::time::Duration;

/// Runtime duration = model duration × `mul` ÷ `div`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeScale {
    mul: u32,
    div: u32,
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl TimeScale {
    /// The virtual-time simulator's scale: its clock reads model time.
    pub const VIRTUAL: TimeScale = TimeScale { mul: 1, div: 1 };

    /// Model time itself (a real-time run at its natural pace).
    #[cfg(test)]
    const REAL: TimeScale = TimeScale { mul: 1, div: 1 };

    /// A runtime `factor` times faster than model time, to a thousandth. `factor` must be
    /// finite and between 0.001 and 1,000,000 (callers validate user input first).
    pub fn faster(factor: f64) -> TimeScale {
        let div = (factor * 1000.0).round().clamp(1.0, 1e9) as u32;
        let g = gcd(1000, div);
        TimeScale {
            mul: 1000 / g,
            div: div / g,
        }
    }

    /// How many times faster than model time the runtime runs (below 1: slower).
    #[cfg(test)]
    fn factor(self) -> f64 {
        f64::from(self.div) / f64::from(self.mul)
    }

    /// A model duration on the runtime's clock.
    pub fn to_runtime(self, model: Duration) -> Duration {
        if self.mul == self.div {
            return model;
        }
        model * self.mul / self.div
    }

    /// A runtime duration in model time.
    pub fn to_model(self, runtime: Duration) -> Duration {
        if self.mul == self.div {
            return runtime;
        }
        runtime * self.div / self.mul
    }

    /// A rate per model unit of time as a rate per runtime unit.
    pub fn rate_to_runtime(self, per_model: f64) -> f64 {
        per_model * f64::from(self.div) / f64::from(self.mul)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_exactly_both_ways() {
        let d = Duration::from_micros(822_222);
        let v = TimeScale::VIRTUAL;
        assert_eq!(v.to_runtime(d), d);
        assert_eq!(v.to_model(v.to_runtime(d)), d);
        let slow = TimeScale::faster(0.001);
        assert_eq!(slow.to_runtime(d), Duration::from_micros(822_222_000));
        assert_eq!(slow.to_model(slow.to_runtime(d)), d);
        let f = TimeScale::faster(100.0);
        assert_eq!(
            f.to_runtime(Duration::from_secs(60)),
            Duration::from_millis(600)
        );
        assert_eq!(
            f.to_model(Duration::from_millis(600)),
            Duration::from_secs(60)
        );
        assert_eq!(f.rate_to_runtime(10.0), 1000.0);
        assert_eq!(TimeScale::faster(1.0), TimeScale::REAL);
        assert_eq!(
            TimeScale::faster(2.5).to_runtime(Duration::from_secs(5)),
            Duration::from_secs(2)
        );
        assert_eq!(v.factor(), 1.0);
        assert_eq!(slow.factor(), 0.001);
    }
}
