//! Retry policies of the clients people run, as presets: capsize's own, and the official
//! Python SDKs' (read in `_base_client.py` and `_constants.py` of openai 3.57.0 and anthropic
//! 2.16.0). Each is a [`RetryPolicy`] like any other; a field set after the preset overrides it.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use super::{Jitter, RetryAfterMode, RetryPolicy};

/// A client's retry rules, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RetryPreset {
    /// capsize's scheduler ([`RetryPolicy::default`]): 4 retries, full-jitter backoff from 1 s
    /// to 60 s, Retry-After a minimum wait (cut to 60 s) that pauses the whole limiter, retries
    /// back through the limiter; 429, 500, 502, 503, 504, 529 and timeouts retried.
    #[default]
    Capsize,
    /// The `openai` Python SDK: 2 retries, backoff `min(0.5 s·2^n, 8 s)·(1 − U/4)`; a
    /// Retry-After (`retry-after-ms`, else `retry-after`) of up to 2 minutes is waited
    /// *instead* of the backoff, and a longer one is not retried at all; no pause for other
    /// callers; its retries go around any limiter in front of it; 408, 409, 429, 5xx and
    /// timeouts retried.
    OpenAiPython,
    /// The `anthropic` Python SDK: as `openai-python`, but a Retry-After of any length is waited
    /// (cut only at 4,294,967 s, the longest sleep it allows).
    AnthropicPython,
}

impl RetryPreset {
    /// Every preset, in the order the docs list them.
    pub const ALL: [RetryPreset; 3] = [
        RetryPreset::Capsize,
        RetryPreset::OpenAiPython,
        RetryPreset::AnthropicPython,
    ];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            RetryPreset::Capsize => "capsize",
            RetryPreset::OpenAiPython => "openai-python",
            RetryPreset::AnthropicPython => "anthropic-python",
        }
    }

    /// The preset named `name`.
    pub fn from_name(name: &str) -> Result<RetryPreset, UnknownPreset> {
        RetryPreset::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| UnknownPreset(name.to_string()))
    }

    /// The policy.
    pub fn policy(self) -> RetryPolicy {
        let sdk = RetryPolicy {
            max_retries: 2,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            jitter: Jitter::Reduce,
            honor_retry_after: true,
            retry_after_mode: RetryAfterMode::Instead,
            // The anthropic SDK's longest sleep; never reached by openai's, which stops at 120 s.
            retry_after_cap: Duration::from_secs(4_294_967),
            retry_after_max: None,
            pause_limiter: false,
            retries_through_limiter: false,
            retries_jump_queue: false,
            retry_on: [408, 409].into_iter().chain(500..=599).collect(),
            retry_timeouts: true,
            retry_after_whole_seconds: false,
        };
        match self {
            RetryPreset::Capsize => RetryPolicy::default(),
            RetryPreset::OpenAiPython => RetryPolicy {
                retry_after_max: Some(Duration::from_secs(120)),
                ..sdk
            },
            // Anthropic's API sends its Retry-After in whole seconds only.
            RetryPreset::AnthropicPython => RetryPolicy {
                retry_after_whole_seconds: true,
                ..sdk
            },
        }
    }
}

impl fmt::Display for RetryPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A preset name that is not one of [`RetryPreset::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown retry preset {0:?}: the presets are \"capsize\", \"openai-python\" and \"anthropic-python\"")]
pub struct UnknownPreset(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::FailureKind;

    #[test]
    fn names_round_trip_and_capsize_is_the_default_policy() {
        for p in RetryPreset::ALL {
            assert_eq!(RetryPreset::from_name(p.name()), Ok(p));
        }
        assert_eq!(RetryPreset::Capsize.policy(), RetryPolicy::default());
        let err = RetryPreset::from_name("openai").unwrap_err();
        assert!(err.to_string().contains("\"openai-python\""), "{err}");
    }

    #[test]
    fn the_anthropic_sdk_reads_a_retry_after_in_whole_seconds() {
        let asked = |preset: RetryPreset, ms: u64| {
            let kind = FailureKind::RateLimited {
                retry_after: Some(Duration::from_millis(ms)),
            };
            preset.policy().retry_after(&kind)
        };
        let anthropic = RetryPreset::AnthropicPython;
        assert_eq!(asked(anthropic, 1_200), Some(Duration::from_secs(2)));
        assert_eq!(asked(anthropic, 3_000), Some(Duration::from_secs(3)));
        assert_eq!(
            asked(RetryPreset::OpenAiPython, 1_200),
            Some(Duration::from_millis(1_200))
        );
    }
}
