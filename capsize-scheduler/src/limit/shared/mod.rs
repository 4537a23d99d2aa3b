//! A limiter's buckets on Redis, shared by every replica of a fleet (feature `redis`).
//!
//! Both buckets of a limit live under one key named by the limit (`{prefix:name}:buckets`,
//! hash-tagged like the rest of a limit's keys, so a Redis Cluster runs the script too): a
//! string of five little-endian `f64`s, per bucket (requests, then tokens) its balance `b` and
//! the instant `t` its credit counts from (in seconds on the Redis server's clock), then the
//! buckets' generation (Redis's clock, in microseconds, when they were created); a bucket the
//! limit does not have holds zeros. One Lua script (`script.rs`), run by `EVALSHA` (loaded
//! once, `EVAL` again if Redis lost it), does each operation on both buckets at once,
//! atomically, with the semantics of the in-process buckets:
//!
//! - **reserve**: refill since `t` up to the capacity, then debit the cost at once, even into a
//!   negative balance; the answer is how long until both buckets have paid for it (a caller
//!   waits only for its own share, and later callers, seeing the debt, wait longer: first come,
//!   first served across the fleet);
//! - **refund**: a reservation given up before it went credits its cost back (capped at the
//!   capacity); callers already waiting keep the wait they were given;
//! - **pause**: a Retry-After holds the whole fleet: credit starts again at its end (`t` moves
//!   there) and a positive balance is forfeited.
//!
//! A [`RedisBuckets`] (with its clones) makes one round trip at a time: an operation asked
//! while none is under way goes at once, alone; those asked meanwhile go together in the next,
//! one script call that runs them in the order they were asked, at one instant (as if they
//! had arrived together, which is what they did), in three Redis calls whatever their number
//! (`TIME`, `GET`, `SET ... PX`). An operation whose caller gave up (its timeout, or dropped)
//! before its round trip began is not sent.
//!
//! The key expires once both buckets would be full again plus a minute: an idle limit leaves
//! nothing behind. Time is the Redis server's (`TIME`), the one clock every replica shares;
//! the wait comes back (in whole microseconds, rounded up) as a duration the caller sleeps on
//! its own clock. The numbers travel and are stored as binary doubles: no decimal formatting
//! or parsing on either side, and nothing rounded between two operations.
//!
//! [`RateLimiter::shared`] puts these buckets behind a scheduler's limiter. A reservation
//! then makes its round trip when it is first awaited, and sleeps the wait it was given on the
//! scheduler's clock (a real one: instants here are tokio's); one dropped before it went is
//! refunded on Redis in a task of its own; a Retry-After pauses the shared buckets too. **When
//! Redis does not answer** (an error, or no answer within the timeout), the reservation falls
//! back to in-process buckets at 1/K of the limits, K the replicas sharing them: each replica
//! keeps to its share, so the fleet stays under the limit while Redis is away; the connection
//! reconnects by itself, and reservations go back to Redis once it answers.
//! [`RedisBuckets::failures`] counts the fallbacks. A reservation that waited in line and was
//! charged after its caller gave up is refunded in the next round trip. Needs Redis 5 or later
//! (scripts that read `TIME` and then write). (A retry's place at the front of the line is kept
//! only in the fallback: Redis serves in arrival order.)
//!
//! # When Redis loses the buckets, stalls, or holds garbage
//!
//! The promise is the in-process limiter's: over any window of `w` seconds the fleet sends at
//! most `rate × w + burst`. It holds when Redis comes back empty (a restart without
//! persistence, a failover, `FLUSHALL`, an evicted key), when it stalls, and whatever the key
//! holds, thus:
//!
//! - **Horizons.** A bucket's *horizon* is the instant its balance is (or was) zero on the
//!   line it follows: `t - b / rate`, ahead of now while the fleet is in debt, behind it once
//!   credit has built up. Every answer carries each bucket's horizon relative to Redis's now.
//!   Each replica keeps two things of it: the latest horizon it heard, placed on its own clock
//!   at the instant it heard it plus what Redis measured (never earlier than the truth), and
//!   the debt of the last answer (the horizon relative to Redis's now then).
//! - **Recreation.** Every batch sends both, per bucket. When the key is missing, or its value
//!   fails the checks below, the script creates the buckets empty when the debt last heard by
//!   this replica is paid, counted from now (or at the latest horizon it heard, if later; full
//!   if it heard none: a first start), and a new generation (Redis's now) begins: the debt the
//!   fleet had queued is kept, not forgotten. Counting the debt from now, not from when it was
//!   heard, covers what the other replicas reserved meanwhile while the fleet is busy (its
//!   horizon then moves with the clock, a reservation per `1 / rate`); for a quieter fleet it
//!   costs at most that debt once.
//! - **Every replica adds what it knew.** Each batch also sends the generation its replica
//!   last heard; in the first batch of a replica that knew another one (the buckets were
//!   recreated since), the script clamps each bucket to no more than empty at the latest
//!   horizon this replica heard (`b = min(b, (t - h) × rate)`): the fleet owes at least the
//!   debt the best informed of its replicas knew of, and no more than there was.
//! - **Checks.** The stored value must be a string of 40 bytes (`GET` on another type errors:
//!   the script reads it with `redis.pcall`, and `SET` overwrites it), each bucket's `b` and
//!   `t` finite, `b` at most the capacity, `t` and the horizon at most an hour (`MAX_AHEAD`)
//!   after Redis's now, and the generation a whole positive number not that far ahead. Anything else is
//!   recreated as above: a NaN cannot turn the limiter off, nor a far-future instant stall the
//!   fleet. The script never stores a horizon or a pause past that bound either. The replica
//!   checks every number of the answer (a clock, a generation, horizons no further ahead than
//!   that bound, waits neither negative nor NaN): anything else is
//!   [`SharedLimitError::Answer`], and the batch's reservations fall back.
//! - **Stale batches expire.** Each answer also carries Redis's now, from which the replica
//!   knows Redis's clock (at connection, from `TIME`); each batch carries the instant on that
//!   clock when its replica will have given up on it (sent + timeout; the estimate is early by
//!   at most a round trip). A batch Redis runs after it changes nothing and says so
//!   ([`SharedLimitError::Expired`]): reservations that timed out in a stalled socket (a
//!   stopped Redis resumed) charge the fleet nothing they never sent.
//! - **The fallback starts empty.** The first reservation that falls back after Redis last
//!   answered drains the local buckets to empty when the fleet's debt as last heard is paid
//!   (now, if it had none): no burst on top of the debt the fleet already had queued. Back on
//!   Redis, the first batch that gets through carries the local share's own horizon (its
//!   debt) plus one reservation of each other share (the shares are paid in step, and the
//!   others may be one ahead of this one), and the script clamps the fleet's buckets to no
//!   more than empty at it: the K shares' traffic while Redis was away is not granted again.
//!   Only that batch clamps; refunds otherwise work as before.
//!
//! Why the two kinds of knowledge: recreating at the latest horizon heard (stale by what the
//! others reserved since) lost a few reservations of debt at each loss, which repeated
//! `FLUSHALL`s added up past the promise (`tests/redis_chaos.rs`); clamping every replica's
//! first batch with its debt last heard counted from its own now charged the stale debt of
//! the least recently answered replica, a quarter of the throughput of a fleet whose debt
//! comes and goes, under a `FLUSHALL` every ten seconds of its traffic.
//!
//! Known gaps: a reservation that made its own round trip and was dropped during it, or
//! answered after its caller's timeout but before the batch's expiry, stays charged on Redis
//! (its cost is lost to the fleet for one refill); a refund or a pause in an expired batch is
//! lost (the fleet waits a little more, or keeps only this replica's pause); when only some
//! replicas fall back (their own connection failed), their share is sent on top of what Redis
//! grants the others; the shares of a fleet in fallback may each send one request on the same
//! instant (a burst of K, which the promise covers when the burst is at least K); what the
//! others reserved between the recreating replica's last answer and the loss is covered only
//! as far as the fleet's debt did not grow meanwhile (reservations granted before a better
//! informed replica's clamp may overlap the debt it knew of); while Redis does not answer,
//! every reservation waits the timeout before it falls back; a stored value that is corrupt
//! but plausible (every check passed) is used as it is, for an hour at most.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use thiserror::Error;
use tokio::time::Instant;

mod link;
mod memory;
mod redact;
mod script;

use self::link::{Link, Op};
use self::memory::Memory;
pub use self::redact::redact_url;
use super::{Limit, LimiterConfig, Place, RateLimiter, Reservation};
use crate::clock::{Clock, Moment};
use crate::error::ConfigError;

/// Why the shared buckets could not answer.
#[derive(Debug, Clone, Error)]
pub enum SharedLimitError {
    /// The URL is not a Redis URL, or the limits are invalid.
    #[error("{0}")]
    Config(String),
    /// Redis could not be reached, or answered with an error.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Redis did not answer within the timeout.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// Redis answered something the script never returns.
    #[error("redis answered {0:?}, not a wait")]
    Answer(String),
    /// Redis ran the operations after their replica would have given up on them (it had
    /// stalled): they changed nothing.
    #[error("redis ran the operations after the timeout of {0:?}: none was applied")]
    Expired(Duration),
}

/// One bucket: its refill rate (per second) and capacity.
#[derive(Debug, Clone, Copy)]
struct Remote {
    rate: f64,
    capacity: f64,
}

/// A limiter's request and token buckets on Redis, shared by whoever names the same limit.
#[derive(Clone)]
pub struct RedisBuckets {
    /// The way to Redis (none if the limit has no buckets).
    link: Option<Arc<Link>>,
    /// The key both buckets are kept under; none if the limit has neither.
    key: Option<String>,
    /// The requests bucket and the tokens bucket, if the limit has them.
    buckets: [Option<Remote>; 2],
    timeout: Duration,
    /// Reservations that fell back to the local share (shared by clones).
    failures: Arc<AtomicU64>,
    /// The replicas sharing the buckets, as [`RateLimiter::shared`] was told (1 until then).
    replicas: usize,
}

impl std::fmt::Debug for RedisBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBuckets")
            .field("key", &self.key)
            .field("requests", &self.buckets[0])
            .field("tokens", &self.buckets[1])
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisBuckets {
    /// Connects to the Redis at `url` (`redis://host:port/db`) and keeps the buckets of
    /// `config` under `{prefix:name}:buckets`; every call gives up after `timeout`. The rates
    /// and capacities are those of the in-process limiter for `config`. Operations asked while
    /// a round trip is under way go to Redis from a task on the runtime this is called on.
    pub async fn connect(
        url: &str,
        prefix: &str,
        name: &str,
        config: &LimiterConfig,
        timeout: Duration,
    ) -> Result<Self, SharedLimitError> {
        let local = RateLimiter::new(config)
            .map_err(|e: ConfigError| SharedLimitError::Config(e.to_string()))?;
        let (rates, capacities) = (local.rates(), local.capacities());
        let bucket = |rate: Option<f64>, capacity: Option<f64>| {
            Some(Remote {
                rate: rate?,
                capacity: capacity?,
            })
        };
        let buckets = [bucket(rates.0, capacities.0), bucket(rates.1, capacities.1)];
        let key = buckets
            .iter()
            .any(Option::is_some)
            .then(|| format!("{{{prefix}:{name}}}:buckets"));
        let client = redis::Client::open(url)
            .map_err(|e| SharedLimitError::Config(format!("{}: {e}", redact_url(url))))?;
        // Its own bound on a reconnection (which may run in the background while callers have
        // already fallen back at `timeout`): twice ours.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(timeout.saturating_mul(2)));
        let mut conn = within(timeout, ConnectionManager::new_with_config(client, config)).await?;
        // Redis's clock, so that the first batch can expire too (a Redis too old for TIME
        // would fail every script anyway).
        let mut memory = Memory::default();
        let time = redis::cmd("TIME");
        if let Ok((secs, micros)) = within(timeout, time.query_async::<(i64, i64)>(&mut conn)).await
        {
            memory.clock(
                real_now(),
                secs.saturating_mul(1_000_000).saturating_add(micros),
            );
        }
        let link = key.clone().map(|key| {
            // Each bucket's rate (negative: none) and capacity.
            let mut limits = [0u8; 32];
            for (bytes, b) in limits.chunks_exact_mut(16).zip(&buckets) {
                let (rate, capacity) = b.map_or((-1.0, 0.0), |b| (b.rate, b.capacity));
                bytes[..8].copy_from_slice(&f64::to_le_bytes(rate));
                bytes[8..].copy_from_slice(&f64::to_le_bytes(capacity));
            }
            Arc::new(Link::new(conn, key, limits, timeout, memory))
        });
        Ok(RedisBuckets {
            link,
            key,
            buckets,
            timeout,
            failures: Arc::new(AtomicU64::new(0)),
            replicas: 1,
        })
    }

    /// Reservations a [`RateLimiter::shared`] on these buckets made locally because Redis did
    /// not answer.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Reserves one request and `tokens` tokens; returns how long to wait before sending.
    pub async fn reserve(&self, tokens: u64) -> Result<Duration, SharedLimitError> {
        self.run(Op::Reserve, tokens as f64).await
    }

    /// Gives back a reservation of `tokens` that was never sent.
    pub async fn refund(&self, tokens: u64) -> Result<(), SharedLimitError> {
        self.run(Op::Refund, tokens as f64).await.map(|_| ())
    }

    /// Holds the whole fleet for `wait` (a provider's Retry-After): credit starts again after
    /// it, and a positive balance is forfeited.
    pub async fn pause_for(&self, wait: Duration) -> Result<(), SharedLimitError> {
        self.run(Op::Pause, wait.as_secs_f64()).await.map(|_| ())
    }

    /// Runs `op` through the link (at once, or in the next round trip); its wait.
    async fn run(&self, op: Op, value: f64) -> Result<Duration, SharedLimitError> {
        match &self.link {
            Some(link) => Link::run(link, op, value).await,
            None => Ok(Duration::ZERO),
        }
    }

    /// A reservation falls back to the local share at `now`: for the first since Redis last
    /// answered, when the fleet's debt as last heard is paid (see the module comment).
    fn fall_back<I: Moment>(&self, now: I) -> Option<[Option<I>; 2]> {
        self.link
            .as_ref()
            .and_then(|link| link.memory().fall_back(now))
    }

    /// The local share is empty at `local`: the next batch that gets through clamps the
    /// fleet's buckets to that.
    fn floor(&self, local: [Option<Instant>; 2]) {
        if let Some(link) = &self.link {
            link.memory().floor(local);
        }
    }

    /// The Redis keys the buckets are kept under: one (both buckets together), or none for a
    /// limit without buckets.
    pub fn keys(&self) -> Vec<&str> {
        self.key.iter().map(String::as_str).collect()
    }
}

/// The real clock, which Redis keeps too: the instants a round trip is sent and answered at.
fn real_now() -> Instant {
    #[allow(clippy::disallowed_methods)] // a network round trip: real time by nature
    Instant::now()
}

/// `work`'s answer, or a timeout after `limit`.
async fn within<T>(
    limit: Duration,
    work: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, SharedLimitError> {
    #[allow(clippy::disallowed_methods)] // a network round trip: real time by nature
    let answer = tokio::time::timeout(limit, work).await;
    answer
        .map_err(|_| SharedLimitError::Timeout(limit))?
        .map_err(SharedLimitError::from)
}

/// A limiter's buckets on Redis, and how its local share's floor reaches them: a step made
/// on instants of tokio's clock (the real one, which Redis keeps), the only kind
/// [`RateLimiter::shared`] takes, named here so the limiter's other code can be generic.
#[derive(Debug)]
pub(crate) struct Shared<I> {
    pub(crate) buckets: RedisBuckets,
    floor: fn(&RedisBuckets, [Option<I>; 2]),
}

impl<C: Clock<Instant = Instant>> RateLimiter<C> {
    /// A limiter whose buckets are `buckets` on Redis, shared by `replicas` replicas that name
    /// the same limit, on `clock` (a real one: Redis keeps real time). `config` is the whole
    /// limit; while Redis does not answer, this replica keeps to 1/`replicas` of it in process.
    pub fn shared(
        buckets: RedisBuckets,
        config: &LimiterConfig,
        replicas: usize,
        clock: C,
    ) -> Result<Self, ConfigError> {
        let k = replicas.max(1) as f64;
        let share = |l: Option<Limit>| {
            l.map(|l| Limit {
                per_minute: l.per_minute / k,
                burst: Some(
                    l.burst
                        .unwrap_or((l.per_minute * config.headroom / 60.0).max(1.0))
                        / k,
                ),
            })
        };
        let fallback = LimiterConfig {
            requests: share(config.requests),
            tokens: share(config.tokens),
            headroom: config.headroom,
        };
        let mut limiter = RateLimiter::with_clock(&fallback, clock)?;
        limiter.remote = Some(Shared {
            buckets: RedisBuckets {
                replicas: replicas.max(1),
                ..buckets
            },
            floor: RedisBuckets::floor,
        });
        Ok(limiter)
    }
}

/// A shared limiter's reservation: what it asks for, and, once Redis has answered, when it
/// may go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending<I> {
    tokens: u64,
    place: Place,
    due: Option<I>,
}

impl<I: Moment> Pending<I> {
    pub(crate) fn new(tokens: u64, place: Place) -> Self {
        Pending {
            tokens,
            place,
            due: None,
        }
    }

    /// When it may go, once reserved on Redis.
    pub(crate) fn due(&self) -> Option<I> {
        self.due
    }

    /// Gives it back on Redis (in a task of its own), if it was reserved there.
    pub(crate) fn refund(&self, buckets: &RedisBuckets) {
        if self.due.is_some() {
            let tokens = self.tokens;
            spawn(
                buckets.clone(),
                move |b| async move { b.refund(tokens).await },
            );
        }
    }
}

/// The local buckets' rates (requests, tokens).
fn limiter_rates<I: Moment>(queue: &super::queue::Queue<I>) -> [Option<f64>; 2] {
    let (r, t) = queue.parts();
    [r.map(|b| b.rate()), t.map(|b| b.rate())]
}

/// Pauses `buckets` for `wait`, in a task of its own.
pub(crate) fn pause(buckets: &RedisBuckets, wait: Duration) {
    spawn(
        buckets.clone(),
        move |b| async move { b.pause_for(wait).await },
    );
}

/// Runs `op` on `buckets` in a task of its own, if there is a runtime to run it (its failure
/// only costs the fleet a refund or a pause it would have shared).
fn spawn<F, Fut>(buckets: RedisBuckets, op: F)
where
    F: FnOnce(RedisBuckets) -> Fut,
    Fut: std::future::Future<Output = Result<(), SharedLimitError>> + Send + 'static,
{
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let work = op(buckets);
        handle.spawn(async move {
            let _ = work.await;
        });
    }
}

impl<C: Clock> Reservation<'_, C> {
    /// A shared limiter's reservation: reserves it on Redis (once) and sleeps until it may go;
    /// true when it may. If Redis does not answer, it becomes a reservation in the local share
    /// (false: the caller waits for that one as usual, unless it went at once).
    pub(super) async fn ready_remote(&mut self) -> bool {
        let limiter = self.limiter;
        let (Some(remote), Some(pending)) = (&limiter.remote, self.remote) else {
            return false;
        };
        let buckets = &remote.buckets;
        let at = match pending.due {
            Some(at) => at,
            None => match buckets.reserve(pending.tokens).await {
                Ok(wait) => {
                    // A wait past what an Instant can name (a cost far over the rate) is a
                    // year: never, for a run.
                    let now = limiter.clock.now();
                    let at = now
                        .checked_add(wait)
                        .unwrap_or(now + Duration::from_secs(365 * 24 * 3600));
                    self.remote = Some(Pending {
                        due: Some(at),
                        ..pending
                    });
                    at
                }
                Err(_) => {
                    buckets.failures.fetch_add(1, Ordering::Relaxed);
                    let now = limiter.clock.now();
                    let mut queue = limiter.lock();
                    if let Some(debt_paid) = buckets.fall_back(now) {
                        // No burst on top of the debt the fleet had queued.
                        queue.empty_at(debt_paid, now);
                    }
                    let (ticket, waits) = queue.reserve(pending.tokens, pending.place, now);
                    // Back on Redis, the fleet starts no earlier than the shares' debt: this
                    // one's, and each other share one such reservation ahead of it (the
                    // shares are paid in step, one reservation per share at a time).
                    let k = buckets.replicas as f64;
                    let (rates, costs) = (limiter_rates(&queue), [1.0, pending.tokens as f64]);
                    let floor = queue.horizons(now);
                    (remote.floor)(
                        buckets,
                        std::array::from_fn(|i| {
                            let ahead = (k - 1.0) / k * costs[i] / rates[i]?;
                            floor[i]?.checked_add(Duration::try_from_secs_f64(ahead).ok()?)
                        }),
                    );
                    drop(queue);
                    self.remote = None;
                    self.ticket = Some(ticket);
                    self.admitted = !waits;
                    return !waits;
                }
            },
        };
        limiter.clock.sleep_until(at).await;
        // A Retry-After this replica heard while it waited holds it too (the shared pause
        // reaches Redis in a task of its own, after the wait Redis had given).
        loop {
            let now = limiter.clock.now();
            let Some(until) = limiter.lock().paused_until(now) else {
                return true;
            };
            limiter.clock.sleep_until(until).await;
        }
    }
}
