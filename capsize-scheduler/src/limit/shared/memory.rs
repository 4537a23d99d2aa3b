//! What a replica remembers of the fleet's buckets between round trips (shared by a
//! [`super::RedisBuckets`] and its clones): the latest horizon of each bucket it heard, the
//! debt last heard, the generation of the buckets it last talked to, Redis's clock, and the
//! floor its own share sets after a fallback. See the module comment of [`super`] for what each is for.

use std::time::Duration;

use tokio::time::Instant;

use super::script::{Context, Reply};
use crate::clock::Moment;

/// A replica's memory of the fleet's buckets.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// Per bucket, the latest instant, on our clock, it was heard to be empty at (its
    /// horizon), each placed at the instant we heard it plus what Redis measured from its own
    /// now: never earlier than the truth.
    horizons: [Option<Instant>; 2],
    /// Per bucket, its horizon in the last answer, in microseconds after Redis's now then
    /// (negative: the fleet had credit): the debt last heard.
    debts: [Option<i64>; 2],
    /// The generation of the buckets last heard from.
    generation: Option<i64>,
    /// Redis's clock (microseconds) and our instant when we heard it.
    clock: Option<(Instant, i64)>,
    /// The horizon of this replica's own share after a fallback, until a batch has carried it
    /// to Redis.
    floor: [Option<Instant>; 2],
    /// True from a batch Redis ran until the next fallback.
    on_redis: bool,
}

/// Signed seconds from `at` to `now` (+inf for no instant).
fn since(now: Instant, at: Option<Instant>) -> f64 {
    match at {
        None => f64::INFINITY,
        Some(at) if at <= now => (now - at).as_secs_f64(),
        Some(at) => -(at - now).as_secs_f64(),
    }
}

impl Memory {
    /// Redis's clock read at our instant `at` (microseconds).
    pub(super) fn clock(&mut self, at: Instant, now_us: i64) {
        self.clock = Some((at, now_us));
    }

    /// What a batch sent at `now` tells the script (see [`Context`]); the floor it carries. It
    /// must change nothing on Redis if it runs after `timeout` (measured on Redis's clock as
    /// last heard: an estimate that is early by at most the round trip it was heard in, so a
    /// batch this replica has given up on is always refused).
    pub(super) fn context(
        &self,
        now: Instant,
        timeout: Duration,
    ) -> (Context, [Option<Instant>; 2]) {
        let expiry = self.clock.map_or(f64::INFINITY, |(at, us)| {
            let elapsed = now.saturating_duration_since(at) + timeout;
            (us as f64 + elapsed.as_micros() as f64) / 1e6
        });
        let context = Context {
            debt: self
                .debts
                .map(|d| d.map_or(f64::NEG_INFINITY, |us| us as f64 / 1e6)),
            since: self.horizons.map(|h| since(now, h)),
            floor_since: self.floor.map(|h| since(now, h)),
            generation: self.generation.map_or(-1.0, |g| g as f64),
            expiry,
        };
        (context, self.floor)
    }

    /// A reply heard at our instant `at` to a batch that carried `floor`, from buckets of
    /// which the limit has those `present`.
    pub(super) fn heard(
        &mut self,
        at: Instant,
        reply: &Reply,
        present: [bool; 2],
        floor: [Option<Instant>; 2],
    ) {
        let (now_us, generation, horizons) = match *reply {
            Reply::Expired { now_us } => return self.clock(at, now_us),
            Reply::Done {
                now_us,
                generation,
                horizons,
                ..
            } => (now_us, generation, horizons),
        };
        self.clock(at, now_us);
        self.generation = Some(generation);
        for (i, micros) in horizons.into_iter().enumerate() {
            if !present[i] {
                continue;
            }
            let d = Duration::from_micros(micros.unsigned_abs());
            let h = if micros >= 0 {
                at.checked_add(d)
            } else {
                at.checked_sub(d)
            };
            self.horizons[i] = self.horizons[i].max(h);
            self.debts[i] = Some(micros);
        }
        // The floor went with this batch: done, unless a fallback since raised it.
        if self.floor == floor {
            self.floor = [None; 2];
        }
        self.on_redis = true;
    }

    /// A reservation falls back to the local share at `now`: for the first since a batch Redis
    /// ran, the instant the fleet's debt as last heard would be paid from now (now if it had
    /// none), per bucket: that debt is taken to be queued still, which it is while the fleet is
    /// busy (its horizon then moves with the clock); later ones get none.
    pub(super) fn fall_back<I: Moment>(&mut self, now: I) -> Option<[Option<I>; 2]> {
        if !std::mem::take(&mut self.on_redis) {
            return None;
        }
        Some(self.debts.map(|h| {
            let debt = Duration::from_micros(u64::try_from(h?).unwrap_or(0));
            Some(now.checked_add(debt).unwrap_or(now))
        }))
    }

    /// The local share is empty at `local` (per bucket): the next batch that gets through
    /// clamps the fleet's buckets to that.
    pub(super) fn floor(&mut self, local: [Option<Instant>; 2]) {
        for (floor, h) in self.floor.iter_mut().zip(local) {
            *floor = (*floor).max(h);
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // instants to compute with, on tokio's clock
mod tests {
    use super::*;

    #[test]
    fn horizons_are_the_latest_heard_and_debts_the_last() {
        let t0 = Instant::now();
        let mut m = Memory::default();
        let (c, _) = m.context(t0, Duration::from_millis(100));
        assert_eq!(c.since, [f64::INFINITY; 2]);
        assert_eq!(c.debt, [f64::NEG_INFINITY; 2]);
        assert_eq!((c.generation, c.expiry), (-1.0, f64::INFINITY));
        let reply = |h: i64| Reply::Done {
            now_us: 10_000_000,
            generation: 9_000_000,
            horizons: [h, 0],
            waits: Vec::new(),
        };
        m.heard(t0, &reply(2_000_000), [true, false], [None; 2]);
        m.heard(t0, &reply(1_500_000), [true, false], [None; 2]);
        let at = t0 + Duration::from_secs(1);
        let (c, _) = m.context(at, Duration::from_millis(100));
        assert_eq!(c.since, [-1.0, f64::INFINITY]);
        assert_eq!(c.debt, [1.5, f64::NEG_INFINITY]);
        assert_eq!(c.generation, 9_000_000.0);
        assert!((c.expiry - 11.1).abs() < 1e-9, "{}", c.expiry);
        // A fallback after a batch Redis ran starts after the last debt heard, from now, once.
        let later = at + Duration::from_millis(1500);
        assert_eq!(m.fall_back(at), Some([Some(later), None]));
        assert_eq!(m.fall_back(at), None);
        m.floor([Some(at), None]);
        let (c, floor) = m.context(at, Duration::from_millis(100));
        assert_eq!(c.floor_since, [0.0, f64::INFINITY]);
        m.heard(at, &reply(-3_000_000), [true, false], floor);
        let (c, _) = m.context(at, Duration::ZERO);
        assert_eq!(c.floor_since, [f64::INFINITY; 2]);
        assert_eq!(c.since, [-1.0, f64::INFINITY]);
        assert_eq!(c.debt, [-3.0, f64::NEG_INFINITY]);
        // Credit heard last: a fallback starts at once.
        assert_eq!(m.fall_back(at), Some([Some(at), None]));
    }
}
