//! The mock provider over HTTP: the same [`ProviderModel`] behind a wiremock server.
//!
//! One catch-all wiremock mock routes every request to a [`Respond`](wiremock::Respond)
//! implementation that feeds the model real time (scaled by `time_scale`) and turns each
//! decision into a response: OpenAI-compatible `POST /v1/chat/completions`, Anthropic-compatible
//! `POST /v1/messages`, a generic `POST /tools/{name}`, plus `GET /stats` (the model's counters)
//! and `GET /healthz`, which do not reach the model. The model sits behind a `std::sync::Mutex`.
//! wiremock's memory is kept flat by [`rotate`].
//!
//! Real time is read through `tokio::time::Instant`: start the server from a runtime whose clock
//! is not paused, or model time will not advance with the wall clock.

mod respond;
pub mod rotate;
pub mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use wiremock::MockServer;

pub use respond::{CHARGED_HEADER, LATENCY_HEADER, NEVER, TIMER_LAG, TOKENS_HEADER};
pub use rotate::{Rotations, ROTATE_EVERY};

use crate::config::ProviderConfig;
use crate::latency::Latency;
use crate::model::{Counters, ProviderModel};
use respond::{catch_all, Shared};

/// What the server serves.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The provider.
    pub provider: ProviderConfig,
    /// Seed of the model's randomness.
    pub seed: u64,
    /// The model runs this many times faster than real time (1 = real time). Model durations
    /// (latency, Retry-After, rate-limit resets) are divided by it on the wire.
    pub time_scale: f64,
    /// Named latencies a request selects with the `x-capsize-latency: NAME` header.
    pub latencies: BTreeMap<String, Latency>,
}

/// Why the server did not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// `time_scale` is not a positive finite number.
    #[error("time_scale must be a positive finite number, got {0}")]
    TimeScale(f64),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running mock provider; it serves until dropped.
pub struct MockProvider {
    /// Owned here (the rotation holds it weakly); dropping it stops the server.
    _server: Arc<MockServer>,
    shared: Arc<Shared>,
    address: SocketAddr,
}

impl std::fmt::Debug for MockProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockProvider")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Wall-clock time since the Unix epoch, read once at start: the base of the `created` field and
/// of Anthropic's RFC 3339 reset instants. The only wall-clock read of the crate.
#[allow(clippy::disallowed_types, clippy::disallowed_methods)]
fn wall_clock() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

impl MockProvider {
    /// Binds `addr` (port 0 = any free port) and serves until dropped. The provider is mounted
    /// before this returns; a request that somehow arrives earlier may get wiremock's bare 404.
    pub async fn start(
        config: ServerConfig,
        addr: SocketAddr,
    ) -> Result<MockProvider, ServerError> {
        let scale = config.time_scale;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(ServerError::TimeScale(scale));
        }
        let bind_err = |source| ServerError::Bind { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind_err)?;
        let address = listener.local_addr().map_err(bind_err)?;
        let model = ProviderModel::new(config.provider, config.seed);
        let server = MockServer::builder()
            .listener(listener)
            .disable_request_recording()
            .start()
            .await;
        let server = Arc::new(server);
        let shared = Arc::new(Shared::new(
            model,
            config.latencies,
            scale,
            tokio::time::Instant::now(),
            wall_clock(),
        ));
        shared.rotation.attach(&server);
        server.register(catch_all(&shared)).await;
        Ok(MockProvider {
            _server: server,
            shared,
            address,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its base URI, e.g. `http://127.0.0.1:41234`.
    pub fn uri(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The model's counters so far.
    pub fn counters(&self) -> Counters {
        self.shared.counters()
    }

    /// What the memory rotations did so far (see [`rotate`]).
    pub fn rotations(&self) -> Rotations {
        self.shared.rotation.stats()
    }
}
