//! The engine: one run of a scenario, from the file to its recording.
//!
//! Data flows one way through it: a [`scenario`] (read and validated) gives a [`workload`]
//! (sessions, model turns, tool calls); [`sim`] runs the workload through the real
//! [scheduler](crate::scheduler) against a [`provider`] (the mock's model in virtual time, or
//! HTTP in real time), and a [`recorder`] turns the scheduler's and provider's events into
//! histograms and counts, and a [`summary`] is the run's record (summary.json) that every
//! later layer reads. [`timescale`] converts between model time and the clock a run uses.
//! [`exec`] runs someone else's agent against the mock instead of capsize's workload.

pub mod exec;
pub mod observed;

/// The capsize version that writes a file: summary.json, reports, a shard's manifest, a
/// replica's record (one version for the workspace, CHANGELOG.md's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub mod provider;
pub mod recorder;
pub mod routes;
pub mod scenario;
pub mod sim;
pub mod summary;
pub mod timescale;
pub mod workload;
