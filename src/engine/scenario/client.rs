//! `[scheduler.client]`: the client's own time. Each attempt costs the client work before it
//! leaves (building and sending the request) and after its answer arrives (reading and parsing
//! it), spent on `threads` threads that requests queue for: one for an asyncio or Node event
//! loop, N for a thread pool. A Python SDK on one event loop with 50 tasks in flight spends
//! more time waiting for its own loop than a fast provider takes to answer.
//!
//! A preset (`openai-python`, `anthropic-python`) gives the official SDK's measured figures
//! (`scripts/sdk-client-cost.sh`); every key given beside it overrides its setting. Without the
//! table the client costs nothing, as before it existed.

use std::path::Path;

use capsize_mock::{Latency, RawLatency};
use serde::Deserialize;

use super::bounds::{bad, count, Invalid};

/// The most threads a client model may have.
pub const MAX_CLIENT_THREADS: u64 = 1024;

/// `client = { ... }` in `[scheduler]`, as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClient {
    /// A client whose measured figures to start from: `openai-python` or `anthropic-python`.
    pub preset: Option<String>,
    /// Work before an attempt leaves, in ms (a distribution).
    pub send: Option<RawLatency>,
    /// Work after its answer arrives, in ms (a distribution).
    pub parse: Option<RawLatency>,
    /// Threads the work is spent on (1: an event loop).
    pub threads: Option<u64>,
}

/// The client's own time, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientModel {
    /// The preset it started from, if any.
    pub preset: Option<&'static str>,
    /// Work before an attempt leaves (ms).
    pub send: Latency,
    /// Work after its answer arrives (ms).
    pub parse: Latency,
    /// Threads the work queues for.
    pub threads: usize,
}

/// The presets: name, mean send ms, mean parse ms, each exponential, on one event loop.
/// Measured with the versions pinned in `scripts/clients/requirements.txt` by
/// `scripts/sdk-client-cost.sh`: with 50 tasks against a 50 ms provider the loop is always
/// busy and the median request waits for the other 49, so the loop's time per request is the
/// median latency over 50; it is split between sending and parsing as the SDK's own time
/// divides it with one task. Exponential: the loop's time per request varies (its garbage
/// collections, the ready events it runs in one batch), and that spread is the tail.
const PRESETS: [(&str, f64, f64); 2] =
    [("openai-python", 1.0, 0.75), ("anthropic-python", 0.7, 0.8)];

/// The names of the presets, for messages and docs.
pub fn preset_names() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|p| p.0)
}

/// The validated client model, if `[scheduler.client]` is given; `base` is the folder an
/// empirical distribution's file is read from.
pub(super) fn client(raw: Option<&RawClient>, base: &Path) -> Result<Option<ClientModel>, Invalid> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let preset = match raw.preset.as_deref() {
        None => None,
        Some(name) => Some(PRESETS.iter().find(|p| p.0 == name).ok_or_else(|| {
            bad(
                "scheduler.client.preset",
                format!(
                    "must be {}, got {name:?}",
                    preset_names()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            )
        })?),
    };
    if preset.is_none() && raw.send.is_none() && raw.parse.is_none() {
        return Err(bad(
            "scheduler.client",
            "needs a preset, or send and/or parse (each a distribution in ms)",
        ));
    }
    let work = |key: &str, given: Option<&RawLatency>, preset_ms: Option<f64>| match given {
        Some(l) => l.build(key, base).map_err(Invalid::from),
        None => Ok(match preset_ms {
            Some(mean) => Latency::Exponential(mean),
            None => Latency::Constant(0.0),
        }),
    };
    let threads = raw.threads.unwrap_or(1);
    Ok(Some(ClientModel {
        preset: preset.map(|p| p.0),
        send: work(
            "scheduler.client.send",
            raw.send.as_ref(),
            preset.map(|p| p.1),
        )?,
        parse: work(
            "scheduler.client.parse",
            raw.parse.as_ref(),
            preset.map(|p| p.2),
        )?,
        threads: count("scheduler.client.threads", threads, 1, MAX_CLIENT_THREADS)? as usize,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<ClientModel>, Invalid> {
        let raw: RawClient = toml::from_str(text).unwrap();
        client(Some(&raw), Path::new("."))
    }

    #[test]
    fn a_preset_gives_its_figures_and_keys_beside_it_override_them() {
        let m = parse(r#"preset = "openai-python""#).unwrap().unwrap();
        assert_eq!(
            (m.preset, m.send, m.parse, m.threads),
            (
                Some("openai-python"),
                Latency::Exponential(1.0),
                Latency::Exponential(0.75),
                1
            )
        );
        let m = parse(
            r#"preset = "anthropic-python"
            threads = 4
            parse = { dist = "constant", ms = 2 }"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (m.send, m.parse, m.threads),
            (Latency::Exponential(0.7), Latency::Constant(2.0), 4)
        );
    }

    #[test]
    fn without_a_preset_the_work_not_given_is_none() {
        let m = parse(r#"send = { dist = "constant", ms = 3 }"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (m.preset, m.send, m.parse),
            (None, Latency::Constant(3.0), Latency::Constant(0.0))
        );
    }

    #[test]
    fn bad_client_tables_name_their_key() {
        let key = |text: &str| parse(text).unwrap_err().key;
        assert_eq!(key(r#"preset = "go""#), "scheduler.client.preset");
        assert_eq!(key("threads = 2"), "scheduler.client");
        let zero = r#"preset = "openai-python"
            threads = 0"#;
        assert_eq!(key(zero), "scheduler.client.threads");
        assert!(
            key(r#"send = { dist = "constant", ms = -1 }"#).starts_with("scheduler.client.send")
        );
        assert_eq!(client(None, Path::new(".")).unwrap(), None);
    }
}
