//! Recordings of one run's replicas added into the fleet's: what K processes, each running one
//! replica from the same start, recorded apart, as one recorder would have recorded them
//! together. Histograms and counters add; the per-second series add bin by bin, and the
//! busiest minute is found again in the sum (replicas' busiest minutes need not coincide).

use hdrhistogram::Histogram;

use super::{CallCounts, Generation, Recording, Syntheses};

/// `a += b`, or why the two cannot be added.
fn add(a: &mut Histogram<u64>, b: &Histogram<u64>, what: &str) -> Result<(), String> {
    a.add(b)
        .map_err(|e| format!("the {what} histograms cannot be added: {e:?}"))
}

/// `a + b`, or an error: counts that add past 2^64 are not one run's.
fn sum(a: u64, b: u64) -> Result<u64, String> {
    a.checked_add(b)
        .ok_or_else(|| format!("the replicas' counts ({a} and {b}) add up past 2^64"))
}

impl CallCounts {
    /// Both counts added.
    fn plus(self, o: CallCounts) -> Result<CallCounts, String> {
        Ok(CallCounts {
            calls: sum(self.calls, o.calls)?,
            completed: sum(self.completed, o.completed)?,
            failed: sum(self.failed, o.failed)?,
            cancelled: sum(self.cancelled, o.cancelled)?,
            not_run: sum(self.not_run, o.not_run)?,
            attempts: sum(self.attempts, o.attempts)?,
            timed_out: sum(self.timed_out, o.timed_out)?,
            rate_limited: sum(self.rate_limited, o.rate_limited)?,
            retries: sum(self.retries, o.retries)?,
            budget_exhausted: sum(self.budget_exhausted, o.budget_exhausted)?,
        })
    }
}

impl Syntheses {
    /// Both added (the fewest tokens left is the fewer of the two).
    fn plus(self, o: Syntheses) -> Result<Syntheses, String> {
        Ok(Syntheses {
            attempted: sum(self.attempted, o.attempted)?,
            refused: sum(self.refused, o.refused)?,
            left_sum: sum(self.left_sum, o.left_sum)?,
            left_min: self.left_min.min(o.left_min),
        })
    }
}

impl Generation {
    fn absorb(&mut self, o: &Generation) -> Result<(), String> {
        self.calls = sum(self.calls, o.calls)?;
        self.output_tokens = sum(self.output_tokens, o.output_tokens)?;
        add(&mut self.end_to_end, &o.end_to_end, "end-to-end")?;
        add(&mut self.first_token, &o.first_token, "first-token")?;
        add(&mut self.per_token, &o.per_token, "per-token")
    }
}

impl Recording {
    /// Whether a replica's recording (read back from its record) keeps the identities every
    /// run's does, with `started` queries: calls ended at most once each, every success timed,
    /// every finished query started. `Err` names the one that fails.
    pub fn holds(&self, started: u64) -> Result<(), String> {
        let c = &self.calls;
        let ended = [c.completed, c.failed, c.cancelled]
            .into_iter()
            .try_fold(0u64, u64::checked_add);
        let checks = [
            (
                ended.is_some_and(|n| n <= c.calls),
                format!(
                    "calls {} fewer than completed {} + failed {} + cancelled {}",
                    c.calls, c.completed, c.failed, c.cancelled
                ),
            ),
            (
                self.call.len() == c.completed,
                format!(
                    "{} call latencies for {} completed calls",
                    self.call.len(),
                    c.completed
                ),
            ),
            (
                c.budget_exhausted <= c.cancelled,
                format!(
                    "budget_exhausted {} above cancelled {}",
                    c.budget_exhausted, c.cancelled
                ),
            ),
            (
                c.retries <= c.attempts
                    && c.timed_out <= c.attempts
                    && c.rate_limited <= c.attempts,
                format!(
                    "retries {}, timed out {} or 429s {} above attempts {}",
                    c.retries, c.timed_out, c.rate_limited, c.attempts
                ),
            ),
            (
                self.queries_failed <= self.queries_completed
                    && self.query.len() <= self.queries_completed
                    && self
                        .queries_completed
                        .checked_add(self.queries_abandoned)
                        .is_some_and(|n| n <= started),
                format!(
                    "queries completed {} (failed {}) + abandoned {} above started {started}",
                    self.queries_completed, self.queries_failed, self.queries_abandoned
                ),
            ),
        ];
        match checks.into_iter().find(|(holds, _)| !holds) {
            Some((_, what)) => Err(format!("recording: {what}")),
            None => Ok(()),
        }
    }

    /// Adds `o`, another replica's recording of the same run (same scenario, same start).
    /// The busiest 60 s, whole and per endpoint, is found again in the added series; where a
    /// long run has widened its bins past one second, it is the sum of the two (a bound).
    pub fn absorb(&mut self, o: &Recording) -> Result<(), String> {
        for (a, b, what) in [
            (&mut self.query, &o.query, "query"),
            (&mut self.call, &o.call, "call"),
            (&mut self.queue, &o.queue, "queue"),
            (&mut self.limiter, &o.limiter, "limiter"),
            (&mut self.backoff, &o.backoff, "backoff"),
            (&mut self.service, &o.service, "service"),
            (
                &mut self.provider_queue,
                &o.provider_queue,
                "provider queue",
            ),
            (
                &mut self.start_lateness,
                &o.start_lateness,
                "start lateness",
            ),
        ] {
            add(a, b, what)?;
        }
        self.calls = self.calls.plus(o.calls)?;
        self.queries_completed = sum(self.queries_completed, o.queries_completed)?;
        self.queries_failed = sum(self.queries_failed, o.queries_failed)?;
        self.queries_abandoned = sum(self.queries_abandoned, o.queries_abandoned)?;
        self.orphaned_requests = sum(self.orphaned_requests, o.orphaned_requests)?;
        self.used_by_failed = self.used_by_failed.plus(o.used_by_failed);
        self.transport_errors = self.transport_errors.plus(o.transport_errors);
        if self.used.len() != o.used.len() {
            return Err("the replicas' runs have different endpoints".into());
        }
        for (a, b) in self.used.iter_mut().zip(&o.used) {
            *a = a.plus(*b);
        }
        self.syntheses = self.syntheses.plus(o.syntheses)?;
        self.charged_requests = sum(self.charged_requests, o.charged_requests)?;
        self.series.absorb(&o.series);
        (self.peak_requests_60s, self.peak_tokens_60s) = self.series.peak_60s().unwrap_or((
            self.peak_requests_60s.saturating_add(o.peak_requests_60s),
            self.peak_tokens_60s.saturating_add(o.peak_tokens_60s),
        ));
        if self.endpoints.len() != o.endpoints.len()
            || self.endpoint_series.len() != o.endpoint_series.len()
        {
            return Err("the replicas' runs have different endpoints".into());
        }
        for (a, b) in self.endpoint_series.iter_mut().zip(&o.endpoint_series) {
            a.absorb(b);
        }
        for (i, (a, b)) in self.endpoints.iter_mut().zip(&o.endpoints).enumerate() {
            a.charged_requests = sum(a.charged_requests, b.charged_requests)?;
            let both = (
                a.peak_requests_60s.saturating_add(b.peak_requests_60s),
                a.peak_tokens_60s.saturating_add(b.peak_tokens_60s),
            );
            (a.peak_requests_60s, a.peak_tokens_60s) = self
                .endpoint_series
                .get(i)
                .and_then(|s| s.peak_60s())
                .unwrap_or(both);
        }
        for (a, b, what) in [
            (&mut self.model_turns, &o.model_turns, "model turn"),
            (&mut self.client, &o.client, "client"),
        ] {
            match (a, b) {
                (Some(a), Some(b)) => add(a, b, what)?,
                (a @ None, Some(b)) => *a = Some(b.clone()),
                _ => {}
            }
        }
        match (&mut self.generation, &o.generation) {
            (Some(a), Some(b)) => a.absorb(b)?,
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
        self.limits_until_us = self.limits_until_us.max(o.limits_until_us);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::super::{Arrival, Recorder};
    use crate::engine::timescale::TimeScale;

    /// The two replicas' recordings added, what one recorder given everything recorded, and
    /// each replica's own busiest minute.
    fn apart_and_together(arrivals: u64) -> (serde_json::Value, serde_json::Value, [u64; 2]) {
        let new = || Recorder::<Instant>::new(TimeScale::VIRTUAL, 2).with_timeseries(true);
        let (whole, apart) = (new(), [new(), new()]);
        for n in 0..arrivals {
            // Unevenly split, and each replica's busiest minute not the fleet's.
            let replica = &apart[usize::from(n % 3 == 0 || (n > 400 && n % 2 == 0))];
            let arrival = Arrival {
                at: Duration::from_millis(n * 370),
                tokens: n % 7 * 100,
                output: 0,
                charged: n % 5 != 0,
                rate_limited: n % 5 == 0,
                queued: Some(Duration::from_micros(n * 31)),
                endpoint: (n % 2) as usize,
            };
            let (late, latency) = (Duration::ZERO, Duration::from_micros(1_000 + n * 977));
            for r in [&whole, replica] {
                r.arrival(arrival);
                r.query_done(late, latency, n % 11 == 0, Default::default());
                r.synthesis(n * 3, n % 13 == 0);
            }
        }
        let (mut merged, other) = (apart[0].finish(), apart[1].finish());
        let own = [merged.peak_requests_60s, other.peak_requests_60s];
        merged.absorb(&other).expect("the same shape");
        let value = |r| serde_json::to_value(r).expect("a recording is data");
        (value(&merged), value(&whole.finish()), own)
    }

    #[test]
    fn replicas_recorded_apart_add_up_to_one_recorder_of_them_all() {
        let (merged, whole, own) = apart_and_together(1_000);
        assert_eq!(merged, whole);
        // The busiest minute found again, not added: 162 or 163 arrivals in any 60 s (one
        // every 370 ms), four in five charged, at most 131; each replica's own is lower, and
        // their sum higher.
        assert_eq!(whole["peak_requests_60s"], 131);
        assert!(
            own.iter().all(|&p| p < 131) && own.iter().sum::<u64>() > 131,
            "{own:?}"
        );
    }

    #[test]
    fn a_recording_reads_back_as_written() {
        let rec = {
            let r = Recorder::<Instant>::new(TimeScale::VIRTUAL, 1);
            r.query_done(
                Duration::ZERO,
                Duration::from_millis(1_234),
                false,
                Default::default(),
            );
            r.finish()
        };
        let text = serde_json::to_string(&rec).expect("write");
        let back: super::Recording = serde_json::from_str(&text).expect("read");
        assert_eq!(back.query, rec.query);
        assert_eq!(serde_json::to_string(&back).expect("write"), text);
    }

    #[test]
    fn replicas_bills_past_a_u64_add_up_exactly_through_their_text() {
        // Each replica books one answer of 10¹² prompt tokens at 10¹² picodollars a token
        // (the bounds) and a failed query that used it: 10²⁴ picodollars, past a u64.
        let bill = capsize_mock::Bill {
            requests: 1,
            input_tokens: 1_000_000_000_000,
            input_picodollars: 1_000_000_000_000_000_000_000_000,
            ..Default::default()
        };
        let replica = || {
            let r = Recorder::<Instant>::new(TimeScale::VIRTUAL, 1);
            r.used(0, &bill);
            let spent = super::super::Spent {
                tokens: bill.tokens(),
                picodollars: bill.picodollars(),
            };
            r.query_done(Duration::ZERO, Duration::from_millis(1), true, spent);
            // As replica.json carries it.
            let text = serde_json::to_string(&r.finish()).expect("write");
            serde_json::from_str::<super::Recording>(&text).expect("read")
        };
        let mut fleet = replica();
        fleet.absorb(&replica()).expect("the same shape");
        assert_eq!(
            fleet.used[0].input_picodollars,
            2_000_000_000_000_000_000_000_000
        );
        assert_eq!(fleet.used[0].input_tokens, 2_000_000_000_000);
        assert_eq!(fleet.used[0].requests, 2);
        assert_eq!(
            fleet.used_by_failed.picodollars,
            2_000_000_000_000_000_000_000_000
        );
    }
}
