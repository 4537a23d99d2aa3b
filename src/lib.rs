//! capsize: how many tool calls may an LLM agent run at once, and how hard may it push the rate
//! limit, before latency or 429s hurt?
//!
//! The heart of the crate is [`scheduler`], the library an agent embeds: bounded fan-out, RPM/TPM
//! token buckets, retry with jitter and Retry-After, cancellation, read/write tool dispatch and
//! subagent budgets. It reads time only through its `Clock` (tokio's by default), so the same
//! code runs in virtual time (on capsize-des, a discrete-event executor with a virtual clock)
//! and in real time. The command line drives it through four layers, each reading only those
//! after it: `cli` (flags, exit codes) → `output` (what a command writes) → `analysis` (the
//! capacity answer, closed forms, the CI gate) → `engine` (one run of a scenario, and its
//! record). They are private: [`api`] is what Rust code outside the command line may use.
//!
//! capsize grew out of the article "Concurrency in Agent Systems: Parallel Tools, Fan-Out, and
//! Rate Limits" (semaphores, RPM/TPM budgets, retries, cancellation, subagent budgets). "The
//! article" in these docs is that one:
//! its worked numbers are test oracles, and `capsize article` reproduces each of them, with the
//! closed form, the simulated value and a verdict.

// The layers, in the order data flows: scenario -> workload -> scheduler -> provider ->
// recorder -> report. ARCHITECTURE.md walks through them.
pub use capsize_scheduler as scheduler;

mod analysis;
pub mod api;
mod cli;
mod engine;
mod fmt;
mod output;

pub use cli::main;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
