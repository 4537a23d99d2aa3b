//! capsize: how many tool calls may an LLM agent run at once, and how hard may it push the rate
//! limit, before latency or 429s hurt?
//!
//! The heart of the crate is [`scheduler`], the library an agent embeds: bounded fan-out, RPM/TPM
//! token buckets, retry with jitter and Retry-After, cancellation, read/write tool dispatch and
//! subagent budgets. It reads time only through `tokio::time`, so the same code runs in virtual
//! time (tokio's paused clock) and in real time. The command-line tool ([`cli`]) drives it.
//!
//! capsize grew out of an article on running LLM tool calls concurrently (semaphores, RPM/TPM
//! budgets, retries, cancellation, subagent budgets). "The article" in these docs is that one:
//! its worked numbers are test oracles, and [`article`] reproduces each of them, with the
//! closed form, the simulated value and a verdict (`capsize article`).

pub mod article;
pub mod cli;
pub mod demo;
pub mod gate;
pub mod outputs;
pub mod plan;
pub mod provider;
pub mod recorder;
pub mod report;
pub mod scenario;
pub use capsize_scheduler as scheduler;
pub mod sim;
pub mod slo;
pub mod sweep;
pub mod timescale;
pub mod workload;
