//! A limiter's buckets on Redis, shared by every replica of a fleet (feature `redis`).
//!
//! Both buckets of a limit live under one key named by the limit (`{prefix:name}:buckets`,
//! hash-tagged like the rest of a limit's keys, so a Redis Cluster runs the script too): a
//! string of four little-endian `f64`s, the requests bucket's balance and the instant its
//! credit counts from (`t`, in seconds on the Redis server's clock), then the tokens bucket's
//! (a bucket the limit does not have keeps what it held). One Lua script, run by `EVALSHA`
//! (loaded once, `EVAL` again if Redis lost it), does each operation on both buckets at once,
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
//! scheduler's clock; one dropped before it went is refunded on Redis in a task of its own; a
//! Retry-After pauses the shared buckets too. **When Redis does not answer** (an error, or no
//! answer within the timeout), the reservation falls back to in-process buckets at 1/K of the
//! limits, K the replicas sharing them: each replica keeps to its share, so the fleet stays
//! under the limit while Redis is away; the connection reconnects by itself, and reservations
//! go back to Redis once it answers. [`RedisBuckets::failures`] counts the fallbacks. A
//! reservation that waited in line and was charged after its caller gave up is refunded in
//! the next round trip. Known gap: one that made its own round trip and was dropped during it,
//! or answered after the timeout, stays charged on Redis (its cost is lost to the fleet for
//! one refill). Needs Redis 5 or later
//! (scripts that read `TIME` and then write). (A retry's place at the front of the line
//! is kept only in the fallback: Redis serves in arrival order.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use thiserror::Error;
use tokio::time::Instant;

mod link;

use self::link::{Link, Op};
use super::{Limit, LimiterConfig, Place, RateLimiter, Reservation};
use crate::clock::Clock;
use crate::error::ConfigError;

/// The one script: `KEYS[1]` the limit's buckets; `ARGV[1]` the operations, one letter each
/// (`r` reserve, `f` refund, `p` pause), in order; `ARGV[2]` four little-endian `f64`s: per
/// bucket, requests first, its rate (per second; negative: the limit has no such bucket) and
/// capacity; `ARGV[3]` one little-endian `f64` per operation: its tokens (reserve, refund; a
/// request costs 1) or the pause in seconds. Returns per operation its wait in microseconds,
/// rounded up (0 but for a reservation; a wait of a billion seconds or more, which no integer
/// reply would carry exactly, comes back as seconds in a string, as `%.6f`).
///
/// A bucket never written counts from ever ago (`t` = -inf), so it is full; stored values are
/// the doubles the script computed, read back bit for bit.
const SCRIPT: &str = r#"
local now_t = redis.call('TIME')
local now = tonumber(now_t[1]) + tonumber(now_t[2]) / 1000000
local ops, vals = ARGV[1], ARGV[3]
local min, ceil, byte, unpack = math.min, math.ceil, string.byte, struct.unpack
local R, F, P = byte('rfp', 1, 3)
local r1, c1, r2, c2 = unpack('<dddd', ARGV[2])
local b1, t1, b2, t2 = 0, -math.huge, 0, -math.huge
local raw = redis.call('GET', KEYS[1])
if raw then b1, t1, b2, t2 = unpack('<dddd', raw) end
local function step(op, v, rate, cap, cost, b, t, ready)
  if rate < 0 then return b, t, ready end
  if now > t then
    b = min(cap, b + (now - t) * rate)
    t = now
  end
  if op == R then
    b = b - cost
    local at = t
    if b < 0 then at = t + (-b) / rate end
    if at > ready then ready = at end
  elseif op == F then
    b = min(cap, b + cost)
  elseif op == P then
    local untl = now + v
    if untl > t then t = untl end
    if b > 0 then b = 0 end
  end
  return b, t, ready
end
local waits, pos = {}, 1
for i = 1, #ops do
  local op = byte(ops, i)
  local v
  v, pos = unpack('<d', vals, pos)
  local ready = now
  b1, t1, ready = step(op, v, r1, c1, 1, b1, t1, ready)
  b2, t2, ready = step(op, v, r2, c2, v, b2, t2, ready)
  local wait = ready - now
  if wait < 1e9 then waits[i] = ceil(wait * 1000000)
  else waits[i] = string.format('%.6f', wait) end
end
local full = 0
if r1 >= 0 then full = math.max(full, (c1 - b1) / r1 + (t1 - now)) end
if r2 >= 0 then full = math.max(full, (c2 - b2) / r2 + (t2 - now)) end
redis.call('SET', KEYS[1], struct.pack('<dddd', b1, t1, b2, t2),
  'PX', ceil(full * 1000) + 60000)
return waits
"#;

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
            .map_err(|e| SharedLimitError::Config(format!("{url}: {e}")))?;
        // Its own bound on a reconnection (which may run in the background while callers have
        // already fallen back at `timeout`): twice ours.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(timeout.saturating_mul(2)));
        let conn = within(timeout, ConnectionManager::new_with_config(client, config)).await?;
        let link = key.clone().map(|key| {
            // Each bucket's rate (negative: none) and capacity.
            let mut limits = [0u8; 32];
            for (bytes, b) in limits.chunks_exact_mut(16).zip(&buckets) {
                let (rate, capacity) = b.map_or((-1.0, 0.0), |b| (b.rate, b.capacity));
                bytes[..8].copy_from_slice(&f64::to_le_bytes(rate));
                bytes[8..].copy_from_slice(&f64::to_le_bytes(capacity));
            }
            Arc::new(Link::new(conn, Script::new(SCRIPT), key, limits, timeout))
        });
        Ok(RedisBuckets {
            link,
            key,
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

    /// The Redis keys the buckets are kept under: one (both buckets together), or none for a
    /// limit without buckets.
    pub fn keys(&self) -> Vec<&str> {
        self.key.iter().map(String::as_str).collect()
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
