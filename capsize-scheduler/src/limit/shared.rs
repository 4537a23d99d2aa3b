//! A limiter's buckets on Redis, shared by every replica of a fleet (feature `redis`).
//!
//! Each bucket is a Redis hash (`b`: balance, `t`: the instant its credit counts from, on the
//! Redis server's clock) under a key named by the limit (`{prefix:name}:requests`,
//! `...:tokens`: one hash slot, so a Redis Cluster runs the script too). One Lua script, run by `EVALSHA` (loaded once, `EVAL` again if Redis lost it),
//! does each operation on both buckets at once, atomically, with the semantics of the
//! in-process buckets:
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
//! Each key expires once its bucket would be full again plus a minute: an idle limit leaves
//! nothing behind. Time is the Redis server's (`TIME`), the one clock every replica shares;
//! the wait comes back as a duration the caller sleeps on its own clock.
//!
//! [`RateLimiter::shared`] puts these buckets behind a scheduler's limiter. A reservation
//! then makes its round trip when it is first awaited, and sleeps the wait it was given on the
//! scheduler's clock; one dropped before it went is refunded on Redis in a task of its own; a
//! Retry-After pauses the shared buckets too. **When Redis does not answer** (an error, or no
//! answer within the timeout), the reservation falls back to in-process buckets at 1/K of the
//! limits, K the replicas sharing them: each replica keeps to its share, so the fleet stays
//! under the limit while Redis is away; the connection reconnects by itself, and reservations
//! go back to Redis once it answers. [`RedisBuckets::failures`] counts the fallbacks. Known
//! gap: a reservation dropped during its round trip, or answered after the timeout, stays
//! charged on Redis (its cost is lost to the fleet for one refill). Needs Redis 5 or later
//! (scripts that read `TIME` and then write). (A retry's place at the front of the line
//! is kept only in the fallback: Redis serves in arrival order.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use thiserror::Error;
use tokio::time::Instant;

use super::{Limit, LimiterConfig, Place, RateLimiter, Reservation};
use crate::clock::Clock;
use crate::error::ConfigError;

/// The one script: `ARGV[1]` the operation, then per key its rate (per second), capacity and
/// cost, then (pause) the pause in seconds. Returns the wait in seconds.
const SCRIPT: &str = r#"
local now_t = redis.call('TIME')
local now = tonumber(now_t[1]) + tonumber(now_t[2]) / 1000000
local op = ARGV[1]
local ready = now
for i = 1, #KEYS do
  local rate = tonumber(ARGV[2 + (i - 1) * 3])
  local cap = tonumber(ARGV[3 + (i - 1) * 3])
  local cost = tonumber(ARGV[4 + (i - 1) * 3])
  local s = redis.call('HMGET', KEYS[i], 'b', 't')
  local b = tonumber(s[1]) or cap
  local t = tonumber(s[2]) or now
  if now > t then
    b = math.min(cap, b + (now - t) * rate)
    t = now
  end
  if op == 'reserve' then
    b = b - cost
    local at = t
    if b < 0 then at = t + (-b) / rate end
    if at > ready then ready = at end
  elseif op == 'refund' then
    b = math.min(cap, b + cost)
  elseif op == 'pause' then
    local untl = now + tonumber(ARGV[#ARGV])
    if untl > t then t = untl end
    if b > 0 then b = 0 end
  end
  redis.call('HSET', KEYS[i], 'b', string.format('%.6f', b), 't', string.format('%.6f', t))
  local full_in = (cap - b) / rate + (t - now)
  redis.call('PEXPIRE', KEYS[i], math.ceil(full_in * 1000) + 60000)
end
return string.format('%.6f', ready - now)
"#;

/// Why the shared buckets could not answer.
#[derive(Debug, Error)]
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
    #[error("redis answered {0:?}, not a wait in seconds")]
    Answer(String),
}

/// One bucket: its key, refill rate (per second) and capacity.
#[derive(Debug, Clone)]
struct Remote {
    key: String,
    rate: f64,
    capacity: f64,
    /// Whether it counts tokens (else requests).
    tokens: bool,
}

/// A limiter's request and token buckets on Redis, shared by whoever names the same limit.
#[derive(Clone)]
pub struct RedisBuckets {
    /// Reconnects by itself after a lost connection (a Redis restart): the request that found
    /// it lost fails, the ones after it go through again.
    conn: ConnectionManager,
    script: Script,
    buckets: Vec<Remote>,
    timeout: Duration,
    /// Reservations that fell back to the local share (shared by clones).
    failures: Arc<AtomicU64>,
}

impl std::fmt::Debug for RedisBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBuckets")
            .field("buckets", &self.buckets)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisBuckets {
    /// Connects to the Redis at `url` (`redis://host:port/db`) and names the buckets of
    /// `config` `{prefix:name}:requests` and `...:tokens`; every call gives up after
    /// `timeout`. The rates and capacities are those of the in-process limiter for `config`.
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
        let mut buckets = Vec::new();
        for (kind, rate, capacity, tokens) in [
            ("requests", rates.0, capacities.0, false),
            ("tokens", rates.1, capacities.1, true),
        ] {
            if let (Some(rate), Some(capacity)) = (rate, capacity) {
                buckets.push(Remote {
                    key: format!("{{{prefix}:{name}}}:{kind}"),
                    rate,
                    capacity,
                    tokens,
                });
            }
        }
        let client = redis::Client::open(url)
            .map_err(|e| SharedLimitError::Config(format!("{url}: {e}")))?;
        // Its own bound on a reconnection (which may run in the background while callers have
        // already fallen back at `timeout`): twice ours.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(timeout.saturating_mul(2)));
        let conn = within(timeout, ConnectionManager::new_with_config(client, config)).await?;
        Ok(RedisBuckets {
            conn,
            script: Script::new(SCRIPT),
            buckets,
            timeout,
            failures: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Reservations a [`RateLimiter::shared`] on these buckets made locally because Redis did
    /// not answer.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Reserves one request and `tokens` tokens; returns how long to wait before sending.
    pub async fn reserve(&self, tokens: u64) -> Result<Duration, SharedLimitError> {
        self.run("reserve", tokens, None).await
    }

    /// Gives back a reservation of `tokens` that was never sent.
    pub async fn refund(&self, tokens: u64) -> Result<(), SharedLimitError> {
        self.run("refund", tokens, None).await.map(|_| ())
    }

    /// Holds the whole fleet for `wait` (a provider's Retry-After): credit starts again after
    /// it, and a positive balance is forfeited.
    pub async fn pause_for(&self, wait: Duration) -> Result<(), SharedLimitError> {
        self.run("pause", 0, Some(wait)).await.map(|_| ())
    }

    /// The bucket keys, requests first.
    pub fn keys(&self) -> Vec<&str> {
        self.buckets.iter().map(|b| b.key.as_str()).collect()
    }

    async fn run(
        &self,
        op: &str,
        tokens: u64,
        pause: Option<Duration>,
    ) -> Result<Duration, SharedLimitError> {
        if self.buckets.is_empty() {
            return Ok(Duration::ZERO);
        }
        let mut invocation = self.script.prepare_invoke();
        invocation.arg(op);
        for b in &self.buckets {
            let cost = if b.tokens { tokens as f64 } else { 1.0 };
            invocation.key(&b.key).arg(b.rate).arg(b.capacity).arg(cost);
        }
        if let Some(p) = pause {
            invocation.arg(p.as_secs_f64());
        }
        let mut conn = self.conn.clone();
        let answer: String = within(self.timeout, invocation.invoke_async(&mut conn)).await?;
        let secs: f64 = answer
            .parse()
            .map_err(|_| SharedLimitError::Answer(answer.clone()))?;
        Duration::try_from_secs_f64(secs.max(0.0)).map_err(|_| SharedLimitError::Answer(answer))
    }
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

impl<C: Clock> RateLimiter<C> {
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
        limiter.remote = Some(buckets);
        Ok(limiter)
    }
}

/// A shared limiter's reservation: what it asks for, and, once Redis has answered, when it
/// may go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    tokens: u64,
    place: Place,
    due: Option<Instant>,
}

impl Pending {
    pub(crate) fn new(tokens: u64, place: Place) -> Self {
        Pending {
            tokens,
            place,
            due: None,
        }
    }

    /// When it may go, once reserved on Redis.
    pub(crate) fn due(&self) -> Option<Instant> {
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
        let (Some(buckets), Some(pending)) = (&limiter.remote, self.remote) else {
            return false;
        };
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
                    let (ticket, waits) =
                        limiter.lock().reserve(pending.tokens, pending.place, now);
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
