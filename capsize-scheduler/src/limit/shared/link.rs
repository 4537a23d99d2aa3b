//! The way from a limit's [`super::RedisBuckets`] to Redis: one round trip at a time; the
//! operations asked while one is under way wait in line and go together in the next (one
//! script call, in the order they were asked), carried by a task of their own. Each round trip
//! carries what this replica remembers of the fleet's buckets and brings back what Redis
//! answered to it ([`Memory`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Script, Value};
use tokio::sync::oneshot;

use super::memory::Memory;
use super::script::{self, Reply};
use super::{real_now, within, SharedLimitError};

/// The most operations one script call carries.
const MAX_BATCH: usize = 128;

/// An operation on the buckets: its letter in the script.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Reserve,
    Refund,
    Pause,
}

impl Op {
    fn letter(self) -> u8 {
        match self {
            Op::Reserve => b'r',
            Op::Refund => b'f',
            Op::Pause => b'p',
        }
    }
}

/// An operation waiting for the round trip that carries it: the operation, its tokens or pause
/// (in seconds), and where its wait goes (none: a refund the carrier queued itself).
pub(super) struct Queued {
    op: Op,
    value: f64,
    reply: Option<oneshot::Sender<Result<Duration, SharedLimitError>>>,
}

/// The error for an operation dropped unanswered (the runtime that would carry it shut down).
fn carrier_gone() -> SharedLimitError {
    SharedLimitError::Redis(redis::RedisError::from((
        redis::ErrorKind::Io,
        "the task that carries operations to Redis is gone",
    )))
}

/// A limit's way to Redis: one round trip at a time, and the operations asked meanwhile, which
/// go together in the next, in order.
pub(super) struct Link {
    /// Reconnects by itself after a lost connection (a Redis restart): the round trip that
    /// found it lost fails, the ones after it go through again.
    conn: ConnectionManager,
    script: Script,
    key: String,
    /// The script's `ARGV[2]`: each bucket's rate and capacity.
    limits: [u8; 32],
    timeout: Duration,
    /// Where the task that carries the operations asked meanwhile runs.
    runtime: tokio::runtime::Handle,
    line: Mutex<Line>,
    /// Which of the two buckets the limit has.
    present: [bool; 2],
    /// What this replica knows of the fleet's buckets.
    memory: Mutex<Memory>,
}

/// Whether a round trip is under way (or about to be), and the operations waiting for the next.
#[derive(Default)]
struct Line {
    busy: bool,
    waiting: VecDeque<Queued>,
}

impl Link {
    /// A link to the buckets under `key` (their rates and capacities `limits`, the script's
    /// `ARGV[2]`) through `conn`; the operations asked meanwhile are carried by a task on the
    /// runtime this is called on.
    pub(super) fn new(
        conn: ConnectionManager,
        key: String,
        limits: [u8; 32],
        timeout: Duration,
        memory: Memory,
    ) -> Self {
        let rate = |at: usize| {
            let bytes: [u8; 8] = limits[at..at + 8].try_into().unwrap_or([0; 8]);
            f64::from_le_bytes(bytes)
        };
        Link {
            conn,
            script: Script::new(&script::script()),
            key,
            limits,
            timeout,
            runtime: tokio::runtime::Handle::current(),
            line: Mutex::default(),
            present: [rate(0) >= 0.0, rate(16) >= 0.0],
            memory: Mutex::new(memory),
        }
    }

    /// What this replica knows of the fleet's buckets.
    pub(super) fn memory(&self) -> MutexGuard<'_, Memory> {
        // Plain data, consistent after every statement: a poisoned lock is safe to reuse.
        self.memory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `op` at once if no round trip is under way, else in the next one; its wait, within
    /// the timeout.
    pub(super) async fn run(
        link: &Arc<Link>,
        op: Op,
        value: f64,
    ) -> Result<Duration, SharedLimitError> {
        let queued = {
            let mut line = link.lock();
            if line.busy {
                let (reply, answer) = oneshot::channel();
                line.waiting.push_back(Queued {
                    op,
                    value,
                    reply: Some(reply),
                });
                Some(answer)
            } else {
                line.busy = true;
                None
            }
        };
        let Some(answer) = queued else {
            // Alone: this caller makes the round trip. When it ends (or is dropped), what was
            // asked meanwhile goes in the next.
            let _done = Done(link);
            let mut waits = link.send(&[(op, value)]).await?;
            return waits.pop().unwrap_or_else(|| Err(carrier_gone()));
        };
        #[allow(clippy::disallowed_methods)] // a network round trip: real time by nature
        let answer = tokio::time::timeout(link.timeout, answer).await;
        answer
            .map_err(|_| SharedLimitError::Timeout(link.timeout))?
            .map_err(|_| carrier_gone())?
    }

    fn lock(&self) -> MutexGuard<'_, Line> {
        // Plain data, consistent after every statement: a poisoned lock is safe to reuse.
        self.line
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One round trip: `ops` (each with its tokens or pause) in order; their waits. A batch
    /// Redis runs after this replica would have given up on it changes nothing there
    /// ([`SharedLimitError::Expired`]).
    async fn send(
        &self,
        ops: &[(Op, f64)],
    ) -> Result<Vec<Result<Duration, SharedLimitError>>, SharedLimitError> {
        let letters: Vec<u8> = ops.iter().map(|(op, _)| op.letter()).collect();
        let values: Vec<u8> = ops.iter().flat_map(|(_, v)| v.to_le_bytes()).collect();
        let (context, floor) = self.memory().context(real_now(), self.timeout);
        let mut invocation = self.script.key(self.key.as_str());
        invocation
            .arg(letters)
            .arg(&self.limits[..])
            .arg(values)
            .arg(context.bytes());
        let mut conn = self.conn.clone();
        let answer: Value = within(self.timeout, invocation.invoke_async(&mut conn)).await?;
        let reply = script::parse(answer, ops.len())?;
        self.memory().heard(real_now(), &reply, self.present, floor);
        match reply {
            Reply::Done { waits, .. } => Ok(waits.into_iter().map(Ok).collect()),
            Reply::Expired { .. } => Err(SharedLimitError::Expired(self.timeout)),
        }
    }

    /// Carries the waiting operations, a round trip at a time, until none wait.
    async fn carry(mut hold: Carrying) {
        let Some(link) = hold.0.clone() else {
            return;
        };
        loop {
            let batch: Vec<Queued> = {
                let mut line = link.lock();
                // Those given up on (a timeout, a dropped reservation) before they went stay
                // off Redis.
                line.waiting
                    .retain(|q| q.reply.as_ref().is_none_or(|r| !r.is_closed()));
                if line.waiting.is_empty() {
                    line.busy = false;
                    hold.done();
                    return;
                }
                let n = line.waiting.len().min(MAX_BATCH);
                line.waiting.drain(..n).collect()
            };
            let ops: Vec<(Op, f64)> = batch.iter().map(|q| (q.op, q.value)).collect();
            match link.send(&ops).await {
                Ok(waits) => {
                    for (q, wait) in batch.into_iter().zip(waits) {
                        let charged = matches!(q.op, Op::Reserve) && wait.is_ok();
                        let lost = q.reply.is_some_and(|r| r.send(wait).is_err());
                        // A reservation charged after its caller gave up (its timeout ran
                        // out during the round trip) is given back in the next.
                        if charged && lost {
                            link.lock().waiting.push_back(Queued {
                                op: Op::Refund,
                                value: q.value,
                                reply: None,
                            });
                        }
                    }
                }
                Err(e) => {
                    for q in batch {
                        if let Some(reply) = q.reply {
                            let _ = reply.send(Err(e.clone()));
                        }
                    }
                }
            }
        }
    }
}

/// A round trip made by its caller: when it ends (or is dropped), the operations asked
/// meanwhile go in the next, carried by a task; none waiting, the line is free.
struct Done<'a>(&'a Arc<Link>);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        let mut line = self.0.lock();
        if line.waiting.is_empty() {
            line.busy = false;
            return;
        }
        // Still busy: nobody overtakes those waiting.
        drop(line);
        let hold = Carrying(Some(self.0.clone()));
        self.0.runtime.spawn(Link::carry(hold));
    }
}

/// The carrier task's hold on the line. Dropped before the carrier saw the line empty (its
/// runtime shut down), it frees the line and drops what waits (those callers fall back).
struct Carrying(Option<Arc<Link>>);

impl Carrying {
    /// The carrier saw the line empty and freed it.
    fn done(&mut self) {
        self.0 = None;
    }
}

impl Drop for Carrying {
    fn drop(&mut self) {
        if let Some(link) = self.0.take() {
            let mut line = link.lock();
            line.busy = false;
            line.waiting.clear();
        }
    }
}
