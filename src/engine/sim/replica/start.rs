//! The start line of a run's replicas on Redis: each agrees the run's [`Terms`] with the first
//! to arrive, joins, and waits for the others; all start at one instant on Redis's clock.

#![allow(clippy::disallowed_methods)] // real time: tokio's clock for the wait at the start line

use std::time::Duration;

use super::{ReplicaOf, Terms};
use crate::engine::sim::SimError;

/// How far ahead of the last replica's arrival the start is set (room for each to hear it).
const LEAD: Duration = Duration::from_millis(500);
/// How long the start line's keys live on Redis.
const KEYS_TTL_S: u64 = 86_400;

fn redis_error(url: &str) -> impl Fn(redis::RedisError) -> SimError + '_ {
    move |e| {
        SimError::Unreachable(format!(
            "--fleet-redis {}: {e}",
            capsize_scheduler::limit::shared::redact_url(url)
        ))
    }
}

/// Joins the run on the Redis at `url` and returns at the instant the run starts: once all K
/// replicas have joined, `LEAD` after the first to see them all, on Redis's clock (each
/// process measures its own wait against it, so the machines' clocks need not agree). A
/// replica already joined (a run id used twice, or two processes given the same `--replica`),
/// a replica count another replica disagrees with, and replicas missing after `join_wait`
/// are errors naming them. The start line's keys expire after a day.
pub async fn start_together(url: &str, me: &ReplicaOf) -> Result<(), SimError> {
    let fail = redis_error(url);
    let client = redis::Client::open(url).map_err(&fail)?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(&fail)?;
    let (count, joined, start) = (me.key("replicas"), me.key("joined"), me.key("start"));
    let theirs = first_said(&mut conn, &count, me.count)
        .await
        .map_err(&fail)?;
    if theirs != me.count {
        return Err(SimError::Mismatch(format!(
            "run {}: replica {}, but another replica of the run said {theirs} replicas",
            me.run_id,
            me.label()
        )));
    }
    agree(&mut conn, me).await.map_err(&fail)??;
    let added: u64 = redis::cmd("SADD")
        .arg(&joined)
        .arg(me.index)
        .query_async(&mut conn)
        .await
        .map_err(&fail)?;
    let _: u64 = redis::cmd("EXPIRE")
        .arg(&joined)
        .arg(KEYS_TTL_S)
        .query_async(&mut conn)
        .await
        .map_err(&fail)?;
    if added == 0 {
        return Err(SimError::Mismatch(format!(
            "run {}: replica {} has already joined it: give each run its own --run-id, and each process its own --replica",
            me.run_id,
            me.label()
        )));
    }
    let since = tokio::time::Instant::now();
    loop {
        let members: Vec<u64> = redis::cmd("SMEMBERS")
            .arg(&joined)
            .query_async(&mut conn)
            .await
            .map_err(&fail)?;
        if members.len() as u64 >= me.count {
            break;
        }
        if since.elapsed() >= me.join_wait {
            let missing: Vec<String> = (0..me.count)
                .filter(|i| !members.contains(i))
                .map(|i| format!("{}/{}", i + 1, me.count))
                .collect();
            return Err(SimError::Unreachable(format!(
                "run {}: {} of {} replicas joined within {} s (missing {}): start each with the same --run-id and --fleet-redis",
                me.run_id,
                members.len(),
                me.count,
                me.join_wait.as_secs(),
                missing.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let now = redis_now(&mut conn).await.map_err(&fail)?;
    let lead = u64::try_from(LEAD.as_micros()).unwrap_or(u64::MAX);
    let at = first_said(&mut conn, &start, now + lead)
        .await
        .map_err(&fail)?;
    let now = redis_now(&mut conn).await.map_err(&fail)?;
    tokio::time::sleep(Duration::from_micros(at.saturating_sub(now))).await;
    Ok(())
}

/// Agrees `me`'s [`Terms`] with the first replica's to reach the start line: `Err` (inside)
/// names what differs, before this replica has joined.
async fn agree(
    conn: &mut redis::aio::MultiplexedConnection,
    me: &ReplicaOf,
) -> redis::RedisResult<Result<(), SimError>> {
    let mine = serde_json::to_string(&me.terms).unwrap_or_default();
    let said: String = first_said(conn, &me.key("terms"), mine.clone()).await?;
    if said == mine {
        return Ok(Ok(()));
    }
    let what = match serde_json::from_str::<Terms>(&said) {
        Ok(theirs) => me
            .terms
            .differs(&theirs)
            .unwrap_or_else(|| "their terms".into()),
        Err(_) => "terms this capsize cannot read".into(),
    };
    Ok(Err(SimError::Mismatch(format!(
        "run {}: replica {} is not the run the replicas before it started: {what} (this replica's first); start every replica with the same scenario, files, --set and --seed",
        me.run_id,
        me.label()
    ))))
}

/// Sets `key` to `value` unless a replica set it first, and returns what it holds: the first
/// replica's word (the key expires with the run's others).
async fn first_said<V>(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    value: V,
) -> redis::RedisResult<V>
where
    V: redis::ToRedisArgs + redis::FromRedisValue + Send + Sync,
{
    let _: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("NX")
        .arg("EX")
        .arg(KEYS_TTL_S)
        .query_async(conn)
        .await?;
    redis::cmd("GET").arg(key).query_async(conn).await
}

/// Redis's clock, in µs since the epoch.
async fn redis_now(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs * 1_000_000 + micros)
}
