//! `[scheduler.client]`: the client's own time. Each attempt costs the client work before it
//! leaves (building and sending the request) and after its answer arrives (reading and parsing
//! it), spent on `threads` threads that requests queue for: one for an asyncio or Node event
//! loop, N for a thread pool. A Python SDK on one event loop with 50 tasks in flight spends
//! more time waiting for its own loop than a fast provider takes to answer.
//!
//! Two costs come once rather than per attempt: `warmup`, the first attempt's work (a Python
//! SDK imports and builds what its first request needs on first use), and `connect`, the time
//! to open a connection (an attempt that finds none idle in the client's pool opens one, off
//! the thread, and then writes its request in a turn of its own; `keepalive` idle ones are
//! kept for the next attempts). With 50 tasks starting at once the warm-up holds the loop while
//! every task waits, and their requests leave together: the slow first round of a run.
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
    /// Work once, by the first attempt before its send, in ms (a distribution).
    pub warmup: Option<RawLatency>,
    /// The time to open a connection, in ms (a distribution).
    pub connect: Option<RawLatency>,
    /// Idle connections the pool keeps.
    pub keepalive: Option<u64>,
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
    /// Work once, by the client's first attempt before its send (ms).
    pub warmup: Latency,
    /// The time to open a connection, by an attempt that finds none idle (ms), waited off the
    /// thread; the request is then written in a turn of its own.
    pub connect: Latency,
    /// Idle connections the pool keeps (`usize::MAX`: all of them).
    pub keepalive: usize,
}

impl ClientModel {
    /// A client on one thread with `send` and `parse` work and nothing else: no warm-up, no
    /// cost to connect.
    pub fn one_thread(send: Latency, parse: Latency) -> Self {
        ClientModel {
            preset: None,
            send,
            parse,
            threads: 1,
            warmup: Latency::Constant(0.0),
            connect: Latency::Constant(0.0),
            keepalive: usize::MAX,
        }
    }
}

/// A preset: the official SDK's measured figures (ms; each exponential but the warm-up).
struct Preset {
    name: &'static str,
    send: f64,
    parse: f64,
    warmup: f64,
    connect: f64,
    /// The SDK's pool's `max_keepalive_connections`.
    keepalive: u64,
}

/// The presets, on one event loop. Measured with the versions pinned in
/// `scripts/clients/requirements.txt` by `scripts/sdk-client-cost.sh`: with 50 tasks against
/// a 50 ms provider the loop is always busy and the median request waits for the other 49, so
/// the loop's time per request is the median latency over 50; it is split between sending and
/// parsing as the SDK's own time divides it with one task. Exponential: the loop's time per
/// request varies (its garbage collections, the ready events it runs in one batch). The
/// warm-up is a process's first request's time over a new client's first; a connection's, a
/// new client's first request's over a warm one's (medians of 5 processes with one task). Both
/// SDKs' pools keep 100 idle connections (httpx's `max_keepalive_connections`).
const PRESETS: [Preset; 2] = [
    Preset {
        name: "openai-python",
        send: 1.0,
        parse: 0.75,
        warmup: 59.0,
        connect: 1.7,
        keepalive: 100,
    },
    Preset {
        name: "anthropic-python",
        send: 0.7,
        parse: 0.8,
        warmup: 27.0,
        connect: 1.7,
        keepalive: 100,
    },
];

/// The names of the presets, for messages and docs.
pub fn preset_names() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|p| p.name)
}

/// The validated client model, if `[scheduler.client]` is given; `base` is the folder an
/// empirical distribution's file is read from.
pub(super) fn client(raw: Option<&RawClient>, base: &Path) -> Result<Option<ClientModel>, Invalid> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let preset = match raw.preset.as_deref() {
        None => None,
        Some(name) => Some(PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
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
    let works = [&raw.send, &raw.parse, &raw.warmup, &raw.connect];
    if preset.is_none() && works.iter().all(|w| w.is_none()) {
        return Err(bad(
            "scheduler.client",
            "needs a preset, or at least one of send, parse, warmup and connect (each a \
             distribution in ms)",
        ));
    }
    // A key given, else the preset's figure (made a distribution by `dist`), else none.
    let work = |key: &str,
                given: &Option<RawLatency>,
                of: fn(&Preset) -> f64,
                dist: fn(f64) -> Latency| {
        match given {
            Some(l) => l.build(key, base).map_err(Invalid::from),
            None => Ok(preset.map_or(Latency::Constant(0.0), |p| dist(of(p)))),
        }
    };
    let threads = raw.threads.unwrap_or(1);
    // Any count of idle connections is a pool; none given keeps them all.
    let keepalive = raw
        .keepalive
        .or(preset.map(|p| p.keepalive))
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    Ok(Some(ClientModel {
        preset: preset.map(|p| p.name),
        send: work(
            "scheduler.client.send",
            &raw.send,
            |p| p.send,
            Latency::Exponential,
        )?,
        parse: work(
            "scheduler.client.parse",
            &raw.parse,
            |p| p.parse,
            Latency::Exponential,
        )?,
        threads: count("scheduler.client.threads", threads, 1, MAX_CLIENT_THREADS)? as usize,
        warmup: work(
            "scheduler.client.warmup",
            &raw.warmup,
            |p| p.warmup,
            Latency::Constant,
        )?,
        connect: work(
            "scheduler.client.connect",
            &raw.connect,
            |p| p.connect,
            Latency::Exponential,
        )?,
        keepalive,
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
        assert_eq!(
            (m.warmup, m.connect, m.keepalive),
            (Latency::Constant(59.0), Latency::Exponential(1.7), 100)
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
            m,
            ClientModel::one_thread(Latency::Constant(3.0), Latency::Constant(0.0))
        );
        // A connection's cost alone is a client model too.
        let m = parse("keepalive = 4\nconnect = { dist = \"constant\", ms = 2 }")
            .unwrap()
            .unwrap();
        assert_eq!(
            (m.send, m.connect, m.keepalive),
            (Latency::Constant(0.0), Latency::Constant(2.0), 4)
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
