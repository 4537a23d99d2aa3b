//! A real-time fleet whose replicas keep one limiter on Redis (`--fleet-redis`): each
//! replica's scheduler reserves on a Redis connection of its own, as separate processes would,
//! through `capsize_scheduler::limit::shared`; the replicas run in this one process (so one
//! recorder sees them all and one summary adds them up), sharing nothing in memory but the mock.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time: the wall clock names this run's keys (never an output)

use std::sync::Arc;
use std::time::Duration;

use capsize_scheduler::limit::shared::{redact_url, RedisBuckets, SharedLimitError};

use super::replica::ReplicaOf;
use super::runtime::RealClock;
use super::{scheduler_config, SimError};
use crate::engine::recorder::Recorder;
use crate::engine::scenario::{FleetLimiter, Scenario};
use crate::engine::timescale::TimeScale;
use crate::scheduler::{LimiterConfig, RateLimiter, Scheduler};

/// How long a replica waits for Redis before it keeps to its own share of the limit.
const REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// Whether a run of `s` keeps its limiter on Redis in real time: a fleet of two or more
/// replicas with `limiter = "shared"` (only Redis can share a limit between separate
/// schedulers). Every other run leaves `--fleet-redis` unused.
pub fn on_redis_needed(s: &Scenario) -> bool {
    s.fleet.limiter == FleetLimiter::Shared && s.fleet.replicas > 1
}

/// Refuses a real-time run of `s` with a shared limiter and no Redis to keep it on (`redis`
/// false).
pub(super) fn check_one(s: &Scenario, redis: bool) -> Result<(), SimError> {
    if on_redis_needed(s) && !redis {
        return Err(SimError::Mismatch(format!(
            "fleet.limiter = \"shared\" with {} replicas in real time needs --fleet-redis redis://HOST:PORT: the replicas keep their one limiter there",
            s.fleet.replicas
        )));
    }
    Ok(())
}

/// Refuses, before the first of them runs, what a real-time fleet cannot be: a point of
/// `points` with a shared limiter and no Redis (`redis` false), or `--fleet-redis` given to
/// runs none of which keeps a shared limiter. Points that do not share their limiter ignore
/// the URL, so one sweep runs `local`, `split` and `shared` fleets together.
pub fn check<'a>(
    points: impl IntoIterator<Item = &'a Scenario>,
    redis: bool,
) -> Result<(), SimError> {
    let mut any = false;
    for s in points {
        check_one(s, redis)?;
        any |= on_redis_needed(s);
    }
    if redis && !any {
        return Err(SimError::Mismatch(
            "--fleet-redis applies to a fleet of two or more replicas with limiter = \"shared\", and no run here has one".into(),
        ));
    }
    Ok(())
}

/// The replicas' schedulers, each with its limiters (one per provider) on Redis at `url`.
pub(super) async fn on_redis(
    s: &Scenario,
    scale: TimeScale,
    recorder: &Arc<Recorder>,
    url: &str,
    replica: Option<&ReplicaOf>,
) -> Result<Vec<Scheduler<RealClock>>, SimError> {
    let config = scheduler_config(s, scale);
    // This run's keys: a run never inherits another's buckets. The processes of a fleet
    // run as separate processes share theirs: the run id names them.
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let prefix = match replica {
        Some(r) => r.limiter_prefix(&s.name),
        None => format!(
            "capsize:{}:{}:{}",
            s.name,
            std::process::id(),
            since_epoch.as_nanos()
        ),
    };
    let k = s.fleet.replicas;
    let shared = |name: String, limits: LimiterConfig| {
        let prefix = prefix.clone();
        async move {
            let buckets = RedisBuckets::connect(url, &prefix, &name, &limits, REDIS_TIMEOUT)
                .await
                .map_err(|e| {
                    let url = redact_url(url);
                    match e {
                        // A URL redis cannot read is bad input, not a Redis that is away.
                        // (Its message names the URL, redacted.)
                        SharedLimitError::Config(_) => {
                            SimError::Mismatch(format!("--fleet-redis {e}"))
                        }
                        _ => SimError::Unreachable(format!("--fleet-redis {url}: {e}")),
                    }
                })?;
            let limiter = RateLimiter::shared(buckets, &limits, k, RealClock)?;
            Ok::<_, SimError>((name, limiter))
        }
    };
    // A replica in a process of its own builds only its own scheduler.
    let mine = match replica {
        Some(r) => {
            let i = usize::try_from(r.index).unwrap_or(0);
            i..i + 1
        }
        None => 0..k,
    };
    let mut all = Vec::with_capacity(mine.len());
    for i in mine {
        // Each replica's own connections, as separate processes would have.
        let default = match config.limits {
            Some(l) => Some(shared("provider".into(), l).await?.1),
            None => None,
        };
        let mut named = Vec::new();
        for (name, l) in &config.named_limits {
            named.push(shared(name.clone(), *l).await?);
        }
        all.push(
            super::replica(s, &config, i, recorder, RealClock)
                .limiters(default, named)
                .build()?,
        );
    }
    Ok(all)
}
