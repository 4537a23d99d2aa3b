//! Configuration errors of the provider model, naming the scenario key at fault.

use thiserror::Error;

/// A provider setting that cannot work: the key (dotted path, as in the scenario file) and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// The key, e.g. `provider.latency.p95_ms`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error for `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }
}
