//! `[fleet]`: replicas of the client on one API key, and how they keep the limit between them.
//!
//! A team that outgrows one process runs K replicas behind a load balancer, all on one key.
//! Each replica has its own scheduler (its own concurrency bound and retries) and its share of
//! the traffic (closed-loop session `j` on replica `j mod K`, open-loop arrival `n` on replica
//! `n mod K`); what differs is the limiter: each replica's own at the full limit (`local`, the
//! common mistake: K replicas send up to K times the quota), each at 1/K of it (`split`), or one
//! limiter for the fleet (`shared`, what a limiter on a shared store gives).

use serde::Deserialize;

use super::bounds::{count, Invalid};

/// The most replicas a fleet may have.
pub const MAX_REPLICAS: u64 = 1024;

/// How a fleet's replicas keep the provider's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FleetLimiter {
    /// Each replica limits itself to headroom × the whole limit.
    #[default]
    Local,
    /// Each replica takes 1/K of it.
    Split,
    /// One limiter for the fleet (buckets, queue and Retry-After pause shared).
    Shared,
}

impl FleetLimiter {
    /// The name a scenario file uses.
    pub fn name(self) -> &'static str {
        match self {
            FleetLimiter::Local => "local",
            FleetLimiter::Split => "split",
            FleetLimiter::Shared => "shared",
        }
    }
}

/// `[fleet]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFleet {
    /// Replicas of the client, from 1 to [`MAX_REPLICAS`].
    pub replicas: u64,
    /// How they keep the limit (default `local`).
    #[serde(default)]
    pub limiter: FleetLimiter,
}

/// A validated fleet: one replica (no `[fleet]`) is today's single client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fleet {
    /// Replicas of the client.
    pub replicas: usize,
    /// How they keep the limit.
    pub limiter: FleetLimiter,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            replicas: 1,
            limiter: FleetLimiter::Local,
        }
    }
}

/// `[fleet]`, checked.
pub(super) fn fleet(raw: Option<&RawFleet>) -> Result<Fleet, Invalid> {
    let Some(raw) = raw else {
        return Ok(Fleet::default());
    };
    let replicas = count("fleet.replicas", raw.replicas, 1, MAX_REPLICAS)?;
    Ok(Fleet {
        replicas: usize::try_from(replicas).unwrap_or(1),
        limiter: raw.limiter,
    })
}
