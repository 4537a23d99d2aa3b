//! The live view of a real-time run on a terminal: one status line on stderr, redrawn every
//! second of wall time, with the model time done out of the run's total (or the queries ended
//! out of its count), the share done, an ETA, and the current rates per second of model time
//! (requests sent to the provider, 429s) and the calls holding a concurrency permit now.
//!
//! Only `capsize run --mode realtime` shows it, and only when stderr is a terminal (the caller
//! decides); otherwise a real-time run prints today's progress line every 10 s. A virtual run
//! shows none: it reads no wall clock, and is usually done in seconds.

#![allow(clippy::disallowed_methods)] // real time only: the wall clock paces a display, never the model

use std::io::Write;
use std::time::Duration;

use tokio::time::Instant;

use super::runtime::RealClock;
use crate::engine::recorder::Recorder;
use crate::engine::scenario::Stop;
use crate::engine::timescale::TimeScale;
use crate::scheduler::Scheduler;

/// How far a run is towards its end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// A run stopped by time: `total_s` seconds of model time (the last queries then finish).
    Seconds {
        /// Model seconds done.
        done_s: f64,
        /// Model seconds the run starts queries for.
        total_s: f64,
    },
    /// A run stopped by a count of queries.
    Queries {
        /// Queries ended (finished or abandoned).
        ended: u64,
        /// Queries the run starts.
        total: u64,
        /// Model seconds done.
        done_s: f64,
    },
}

impl Goal {
    /// The share done, from 0 to 1.
    fn fraction(self) -> f64 {
        let f = match self {
            Goal::Seconds { done_s, total_s } if total_s > 0.0 => done_s / total_s,
            Goal::Queries { ended, total, .. } if total > 0 => ended as f64 / total as f64,
            _ => 1.0,
        };
        f.clamp(0.0, 1.0)
    }
}

/// What the status line shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Status {
    /// How far the run is.
    pub goal: Goal,
    /// Wall seconds since the run started.
    pub wall_s: f64,
    /// Requests sent to the provider per second of model time, over the last update.
    pub requests_per_s: f64,
    /// 429s per second of model time, over the last update.
    pub limited_per_s: f64,
    /// Calls holding a concurrency permit now (`None`: not known, e.g. an adaptive limit).
    pub in_flight: Option<u64>,
}

/// A duration of wall time, as `1h02m`, `2m05s` or `12s`.
fn clock(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// The status line, without escape codes.
pub fn status_line(st: &Status) -> String {
    let f = st.goal.fraction();
    let progress = match st.goal {
        Goal::Seconds { done_s, total_s } => {
            format!("{done_s:.0}/{total_s:.0} s of model time")
        }
        Goal::Queries {
            ended,
            total,
            done_s,
        } => format!("{ended}/{total} queries, {done_s:.0} s of model time"),
    };
    let eta = if f >= 1.0 {
        "finishing".to_string()
    } else if f > 0.0 {
        format!("ETA {}", clock(st.wall_s * (1.0 - f) / f))
    } else {
        "ETA -".to_string()
    };
    let in_flight = st
        .in_flight
        .map_or(String::new(), |n| format!(", {n} in flight"));
    format!(
        "capsize run: {progress} ({:.1} %), {eta}, {:.1} req/s, {:.1} 429/s{in_flight}",
        f * 100.0,
        st.requests_per_s,
        st.limited_per_s
    )
}

/// Clears the status line when the display ends (the run finished or failed).
struct Clear;

impl Drop for Clear {
    fn drop(&mut self) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

/// Redraws the status line every second of wall time; never ends. `schedulers` are the
/// replicas' (clones share everything), read for the permits they hold; `max_concurrency`
/// is each one's fixed limit.
pub(super) async fn show(
    recorder: &Recorder,
    scale: TimeScale,
    stop: Stop,
    schedulers: &[Scheduler<RealClock>],
    max_concurrency: usize,
) {
    let _clear = Clear;
    let start = Instant::now();
    let every = Duration::from_secs(1);
    let (mut last_at, mut last) = (start, recorder.live());
    loop {
        tokio::time::sleep_until(last_at + every).await;
        let now = Instant::now();
        let live = recorder.live();
        let span = scale.to_model(now - last_at).as_secs_f64().max(1e-9);
        let done_s = scale.to_model(now - start).as_secs_f64();
        let goal = match stop {
            Stop::Duration(d) => Goal::Seconds {
                done_s,
                total_s: d.as_secs_f64(),
            },
            Stop::Queries(total) => Goal::Queries {
                ended: live.queries_ended,
                total,
                done_s,
            },
        };
        let in_flight = schedulers.iter().try_fold(0u64, |sum, s| {
            let free = s.available_permits()?;
            Some(sum + max_concurrency.saturating_sub(free) as u64)
        });
        let line = status_line(&Status {
            goal,
            wall_s: (now - start).as_secs_f64(),
            requests_per_s: (live.requests - last.requests) as f64 / span,
            limited_per_s: (live.rate_limited - last.rate_limited) as f64 / span,
            in_flight,
        });
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        (last_at, last) = (now, live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_run_shows_its_share_eta_and_rates() {
        let line = status_line(&Status {
            goal: Goal::Seconds {
                done_s: 150.0,
                total_s: 600.0,
            },
            wall_s: 30.0,
            requests_per_s: 12.0,
            limited_per_s: 0.5,
            in_flight: Some(8),
        });
        assert_eq!(
            line,
            "capsize run: 150/600 s of model time (25.0 %), ETA 1m30s, 12.0 req/s, 0.5 429/s, 8 in flight"
        );
    }

    #[test]
    fn a_counted_run_shows_queries_and_no_unknown_in_flight() {
        let line = status_line(&Status {
            goal: Goal::Queries {
                ended: 1000,
                total: 4000,
                done_s: 42.4,
            },
            wall_s: 1200.0,
            requests_per_s: 3.3,
            limited_per_s: 0.0,
            in_flight: None,
        });
        assert_eq!(
            line,
            "capsize run: 1000/4000 queries, 42 s of model time (25.0 %), ETA 1h00m, 3.3 req/s, 0.0 429/s"
        );
    }

    #[test]
    fn the_start_and_the_drain_have_no_eta() {
        let at = |done_s| Status {
            goal: Goal::Seconds {
                done_s,
                total_s: 60.0,
            },
            wall_s: 5.0,
            requests_per_s: 0.0,
            limited_per_s: 0.0,
            in_flight: Some(0),
        };
        assert!(status_line(&at(0.0)).contains("(0.0 %), ETA -,"));
        assert!(status_line(&at(75.0)).contains("(100.0 %), finishing,"));
    }
}
