//! The provider model as a [`wiremock`] responder (feature `wiremock`): mount it on a
//! `wiremock::MockServer` in your own tests, and the routes, limits, 429s, headers and latencies
//! are the mock provider's, built by the same responder the standalone server uses.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use capsize_mock::server::{ProviderResponder, ServerConfig};
//! use capsize_mock::RawProvider;
//!
//! let raw: RawProvider = toml::from_str(
//!     r#"rpm = 2
//!        latency = { dist = "constant", ms = 50 }"#,
//! )?;
//! let config = ServerConfig {
//!     provider: raw.build(std::path::Path::new("."))?,
//!     seed: 1,
//!     time_scale: 1.0,
//!     latencies: Default::default(),
//!     error_rates: Default::default(),
//!     max_body_bytes: capsize_mock::limits::MAX_BODY_BYTES,
//!     request_log: None,
//!     trace_sink: None,
//! };
//! let server = wiremock::MockServer::start().await;
//! wiremock::Mock::given(wiremock::matchers::any())
//!     .respond_with(ProviderResponder::new(config)?)
//!     .mount(&server)
//!     .await;
//! // POST {server.uri()}/v1/chat/completions: two are served, the third is a 429.
//! # Ok(()) }
//! ```
//!
//! wiremock reads the whole body before the responder sees it; a body over the config's
//! `max_body_bytes` is then answered 413, as the server does. What the server tracks of the
//! connections (requests in flight, orphans) has no meaning here and is not kept.

use wiremock::{Request, Respond, ResponseTemplate};

use super::respond::{body_too_large, refuse, Route, Shared};
use super::wire::Api;
use super::{wall_clock, ServerConfig, ServerError};

/// The provider model, answering wiremock's requests.
pub struct ProviderResponder {
    shared: Shared,
}

impl ProviderResponder {
    /// A responder serving `config`; its model time starts now.
    pub fn new(config: ServerConfig) -> Result<Self, ServerError> {
        let scale = config.check()?;
        #[allow(clippy::disallowed_methods)] // real time: the model is fed the time since start
        let start = tokio::time::Instant::now();
        Ok(ProviderResponder {
            shared: Shared::new(config, scale, start, wall_clock()),
        })
    }
}

impl Respond for ProviderResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let reply = match self.shared.route(&request.method, request.url.path()) {
            Route::Answer(reply) => reply,
            Route::Model(call) if request.body.len() > self.shared.max_body_bytes => {
                body_too_large(call.api, self.shared.max_body_bytes)
            }
            Route::Model(call) => {
                let run = self.shared.run();
                self.shared
                    .model_call(&run, &call, &request.headers, &request.body)
            }
            // Traces go to the trace sink of a server; this face has none to give them to.
            Route::Traces => refuse(Api::OpenAi, 404, "unknown path /v1/traces"),
        };
        // wiremock cannot pace a body: a streamed answer comes whole, at its last token.
        let (body, delay) = match &reply.stream {
            Some(s) => (s.whole(), reply.delay.saturating_add(s.duration())),
            None => (reply.body, reply.delay),
        };
        let mut template = ResponseTemplate::new(reply.status)
            .set_body_raw(body, reply.content_type)
            .set_delay(delay);
        for (name, value) in reply.headers {
            template = template.append_header(name, value.as_str());
        }
        template
    }
}
