//! Tool dispatch for one model turn: reads in parallel, writes one at a time, under a hard cap.
//!
//! Every tool is declared [`Access::Read`] or [`Access::Write`] where it is defined. In a turn,
//! the reads run in parallel, then the writes run one after another in the order the model gave
//! them, so two writes never race. A turn may run at most `max_parallel` calls: beyond that the
//! policy either answers the rest with an explicit "not run" error the model can see
//! ([`CapPolicy::Truncate`]), or runs the turn in sequential batches of at most the cap
//! ([`CapPolicy::Batch`]). Results come back in the order the calls were given.

use std::future::Future;

use futures_util::future::join_all;

use super::error::CallError;
use super::observe::NotRunReason;
use super::{Clock, Scheduler};

/// Whether a tool only reads shared state or changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// Safe to run beside other calls.
    Read,
    /// Changes shared state: runs alone, in order.
    Write,
}

/// A tool as defined: its name and access.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// Read or write.
    pub access: Access,
}

impl Tool {
    /// A read-only tool.
    pub fn read(name: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            access: Access::Read,
        }
    }

    /// A tool that writes.
    pub fn write(name: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            access: Access::Write,
        }
    }
}

/// Anything dispatched in a turn: it knows its tool's access.
pub trait ToolCall {
    /// The access of the tool called.
    fn access(&self) -> Access;
}

impl ToolCall for Tool {
    fn access(&self) -> Access {
        self.access
    }
}

impl<T: ToolCall + ?Sized> ToolCall for &T {
    fn access(&self) -> Access {
        (**self).access()
    }
}

/// What happens to the calls of a turn beyond its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CapPolicy {
    /// Run the first `max_parallel` calls; answer the rest "not run".
    #[default]
    Truncate,
    /// Run every call, in sequential batches of at most `max_parallel`.
    Batch,
}

/// The per-turn cap on parallel tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnPolicy {
    /// The most calls one turn (or one batch) runs. 0: no cap.
    pub max_parallel: usize,
    /// What happens beyond the cap.
    pub over_cap: CapPolicy,
}

impl<K: Clock> Scheduler<K> {
    /// Runs one turn's tool calls by `policy`: `exec(i, &calls[i])` makes call `i` (usually
    /// through [`Scheduler::call`]). Returns one result per call, in the order given.
    pub async fn dispatch<C, T, E, F, Fut>(
        &self,
        policy: &TurnPolicy,
        calls: &[C],
        exec: F,
    ) -> Vec<Result<T, CallError<E>>>
    where
        C: ToolCall,
        F: Fn(usize, &C) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        let asked = calls.len();
        let cap = match policy.max_parallel {
            0 => asked.max(1),
            n => n,
        };
        let run = match policy.over_cap {
            CapPolicy::Truncate => asked.min(cap),
            CapPolicy::Batch => asked,
        };
        // The calls over the cap are answered first, so they take the first call ids.
        let reason = NotRunReason::OverCap { cap, asked };
        for _ in run..asked {
            self.not_run(reason.clone());
        }
        let mut results = Vec::with_capacity(asked);
        for (b, batch) in calls[..run].chunks(cap).enumerate() {
            let first = b * cap;
            let is_read = |c: &C| c.access() == Access::Read;
            // All reads (the common turn): one join over an exact-size iterator, so its
            // futures and results are allocated once (a filtered one grows as it collects).
            if batch.iter().all(is_read) {
                let ran = join_all(batch.iter().enumerate().map(|(j, c)| exec(first + j, c)));
                results.extend(ran.await);
                continue;
            }
            // Reads together, then writes one at a time in order; results in call order.
            let reads = join_all(
                (batch.iter().enumerate())
                    .filter(|(_, c)| is_read(c))
                    .map(|(j, c)| exec(first + j, c)),
            )
            .await;
            let mut writes = Vec::new();
            for (j, c) in batch.iter().enumerate().filter(|(_, c)| !is_read(c)) {
                writes.push(exec(first + j, c).await);
            }
            let (mut reads, mut writes) = (reads.into_iter(), writes.into_iter());
            // Each read and each write was run once above, so each pick finds its result.
            results.extend(batch.iter().filter_map(|c| {
                if is_read(c) {
                    reads.next()
                } else {
                    writes.next()
                }
            }));
        }
        results.extend((run..asked).map(|_| Err(CallError::NotRun(reason.clone()))));
        results
    }
}
