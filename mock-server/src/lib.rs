//! capsize-mock: the provider side of capsize.
//!
//! [`ProviderModel`] is a rate-limited LLM API as a pure state machine with no clock: it is told
//! the time of each request and answers with a [`Decision`] (serve after a latency, 429 with
//! Retry-After and rate-limit headers, an error, or a 429 without Retry-After for a request
//! no wait could ever admit). The virtual-time simulator calls it in-process; [`server::MockProvider`] serves it
//! over HTTP with real time (a hyper server on a thread of its own), and [`cli`] is the
//! `capsize-mock` command line. One model, two faces.
//!
//! [`limits`] holds the bounds every input is validated against (one year for any duration,
//! 1e12 per minute for `rpm`/`tpm`, 16 MiB for a file, 1 MiB for a request body): whatever
//! passes validation cannot make the model or the server panic.

pub mod cli;
pub mod config;
pub mod error;
pub mod headers;
pub mod latency;
pub mod limits;
pub mod model;
pub mod phases;
pub mod price;
pub mod server;
pub mod split;
pub mod tokens;
pub mod window;

pub use config::{ClockFrom, Generation, ProviderConfig, RawProvider};
pub use error::ConfigError;
pub use latency::{Latency, RawLatency};
pub use model::{Counters, Decision, Generated, Outcome, ProviderModel, Service};
pub use price::{Bill, Price, RawPrice};
pub use server::{MockProvider, ServerConfig, ServerError};
pub use tokens::{FixedOr, RawTokens, Tokens};
pub use window::Limit;
