//! capsize: how many tool calls may an LLM agent run at once, and how hard may it push the rate
//! limit, before latency or 429s hurt?
//!
//! The heart of the crate is [`scheduler`], the library an agent embeds: bounded fan-out, RPM/TPM
//! token buckets, retry with jitter and Retry-After, cancellation, read/write tool dispatch and
//! subagent budgets. It reads time only through its `Clock` (tokio's by default), so the same
//! code runs in virtual time (on capsize-des, a discrete-event executor with a virtual clock)
//! and in real time. The command-line tool ([`cli`]) drives it
//! through the [`engine`] (one run of a scenario), the [`analysis`] (closed forms, objectives,
//! the CI gate) and the [`output`] (reports and files).
//!
//! capsize grew out of an article on running LLM tool calls concurrently (semaphores, RPM/TPM
//! budgets, retries, cancellation, subagent budgets). "The article" in these docs is that one:
//! its worked numbers are test oracles, and `capsize article` reproduces each of them, with the
//! closed form, the simulated value and a verdict.

// The layers, in the order data flows: scenario -> workload -> scheduler -> provider ->
// recorder -> report. ARCHITECTURE.md walks through them.
pub use capsize_scheduler as scheduler;

pub mod analysis;
pub mod cli;
pub mod engine;
pub mod fmt;
pub mod output;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
