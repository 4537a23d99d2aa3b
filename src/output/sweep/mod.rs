//! What `capsize sweep` and `capsize search` write: `sweep.csv` ([`csv`]), the capacity report
//! with its charts ([`report`]), why nothing passes ([`why`]), a search's table
//! and answer in words ([`search`]), a shard's runs for `capsize merge` ([`shard`]), the adaptive limit's charts
//! ([`limit`]). The points and the answer they render come from
//! [`analysis::sweep`](crate::analysis::sweep).

mod charts;
pub mod csv;
pub mod limit;
mod phases;
pub mod report;
pub mod search;
pub mod shard;
mod usage;
pub mod why;
