//! capsize-mock: the provider side of capsize.
//!
//! [`ProviderModel`] is a rate-limited LLM API as a pure state machine with no clock: it is told
//! the time of each request and answers with a [`Decision`] (serve after a latency, 429 with
//! Retry-After and rate-limit headers, or an error). The virtual-time simulator calls it
//! in-process; the HTTP face (coming) calls it with real time. One model, two faces.

pub mod config;
pub mod error;
pub mod headers;
pub mod latency;
pub mod model;
pub mod window;

pub use config::{ProviderConfig, RawProvider};
pub use error::ConfigError;
pub use latency::{Latency, RawLatency};
pub use model::{Counters, Decision, Outcome, ProviderModel};
