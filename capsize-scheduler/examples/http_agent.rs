//! An agent turn that fans out tool calls over HTTP, through the scheduler.
//!
//! The agent asks for 48 tool calls at once. The scheduler lets 8 be in flight, paces them
//! under the provider's 3,000 requests per minute at 80 % headroom (40 a second), retries the
//! provider's 500s and 503s with jittered backoff, and honours any Retry-After. Every call is a
//! real `POST /tools/search` with reqwest.
//!
//! Run it against a provider of your own (any server with capsize-mock's endpoints):
//!
//! ```text
//! capsize-mock --rpm 3000 --latency-ms 100 &    # prints its address first
//! cargo run -p capsize-scheduler --example http_agent -- http://127.0.0.1:PORT
//! ```
//!
//! or with no argument, against a capsize-mock it starts in-process with those settings and 5 %
//! of calls failing with a 500, 503 or 529.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use capsize_scheduler::retry::retry_after_from_headers;
use capsize_scheduler::{
    CallError, CallSpec, FanOut, Limit, LimiterConfig, ProviderError, RetryPolicy, Scheduler,
    SchedulerConfig, Scope,
};
use tokio::time::Instant;

/// Tool calls the agent's turn asks for.
pub const CALLS: usize = 48;
/// The provider's requests-per-minute limit.
pub const RPM: f64 = 3_000.0;
/// The share of it the agent allows itself.
pub const HEADROOM: f64 = 0.8;
/// Calls in flight at once.
pub const MAX_CONCURRENCY: usize = 8;
/// The local provider's service time per call.
pub const LATENCY_MS: u64 = 100;

/// What one turn did.
#[derive(Debug)]
pub struct Turn {
    /// Calls that returned a result.
    pub ok: usize,
    /// Calls that failed for good (after their retries), with why.
    pub failed: Vec<String>,
    /// Requests sent, retries included.
    pub attempts: u32,
    /// From the first call queued to the last answer.
    pub elapsed: Duration,
}

/// The scheduler the agent embeds: 8 in flight, 3,000 RPM at 80 %, quick retries.
pub fn scheduler() -> Scheduler {
    let config = SchedulerConfig {
        max_concurrency: MAX_CONCURRENCY,
        limits: Some(LimiterConfig {
            requests: Some(Limit::per_minute(RPM)),
            tokens: None,
            headroom: HEADROOM,
        }),
        retry: RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(2),
            ..RetryPolicy::default()
        },
        ..SchedulerConfig::default()
    };
    Scheduler::builder(config)
        .seed(1)
        .build()
        .expect("a valid configuration")
}

/// One tool call: `POST {base}/tools/search`; its status becomes what the scheduler retries on.
async fn search(
    client: &reqwest::Client,
    base: &str,
    query: usize,
) -> Result<String, ProviderError> {
    let response = client
        .post(format!("{base}/tools/search"))
        .header("content-type", "application/json")
        .header("x-capsize-tokens", "500")
        .body(format!(r#"{{"query":"topic {query}"}}"#))
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                ProviderError::timeout()
            } else {
                ProviderError::other(e.to_string())
            }
        })?;
    let status = response.status().as_u16();
    if response.status().is_success() {
        return response
            .text()
            .await
            .map_err(|e| ProviderError::other(e.to_string()));
    }
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let wait =
        retry_after_from_headers(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())), None)
            .map_err(|e| ProviderError::other(format!("unreadable Retry-After: {e}")))?;
    Err(match status {
        429 => ProviderError::rate_limited(wait),
        code => ProviderError::status(code).with_retry_after(wait),
    })
}

/// Runs one turn of [`CALLS`] tool calls against the provider at `base`.
pub async fn turn(base: &str) -> Turn {
    let scheduler = scheduler();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client");
    let attempts = AtomicU32::new(0);
    let started = Instant::now();
    let results = FanOut::new(&Scope::new())
        .gather((0..CALLS).map(|query| {
            let (scheduler, client, attempts) = (&scheduler, &client, &attempts);
            move |scope: Scope| async move {
                let spec = CallSpec::new(500).in_scope(&scope);
                scheduler
                    .call(spec, |_attempt| {
                        attempts.fetch_add(1, Ordering::Relaxed);
                        search(client, base, query)
                    })
                    .await
            }
        }))
        .await;
    let elapsed = started.elapsed();
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(CallError::to_string))
        .collect();
    Turn {
        ok: results.len() - failed.len(),
        failed,
        attempts: attempts.into_inner(),
        elapsed,
    }
}

/// A capsize-mock on loopback: 3,000 RPM, 100 ms per call, 5 % of calls failing with a 5xx.
pub async fn local_provider() -> capsize_mock::MockProvider {
    let table = format!(
        "rpm = {RPM}\nerror_rate = 0.05\nlatency = {{ dist = \"constant\", ms = {LATENCY_MS} }}"
    );
    let raw: capsize_mock::RawProvider = toml::from_str(&table).expect("the table parses");
    let config = capsize_mock::ServerConfig {
        provider: raw.build(Path::new(".")).expect("a valid provider"),
        seed: 7,
        time_scale: 1.0,
        latencies: Default::default(),
        max_body_bytes: capsize_mock::limits::MAX_BODY_BYTES,
        request_log: None,
        trace_sink: None,
        error_rates: Default::default(),
    };
    capsize_mock::MockProvider::start(config, "127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("the mock provider starts")
}

#[tokio::main(flavor = "current_thread")]
#[allow(dead_code)] // also compiled into the example's test, which has a main of its own
async fn main() {
    let (base, _local) = match std::env::args().nth(1) {
        Some(base) => (base, None),
        None => {
            let mock = local_provider().await;
            (mock.uri(), Some(mock))
        }
    };
    println!(
        "{CALLS} tool calls to {base}, {MAX_CONCURRENCY} in flight, {RPM} RPM at {HEADROOM} headroom"
    );
    let turn = turn(&base).await;
    println!(
        "{} ok, {} failed, {} requests sent, in {:.2} s",
        turn.ok,
        turn.failed.len(),
        turn.attempts,
        turn.elapsed.as_secs_f64()
    );
    for why in &turn.failed {
        println!("  failed: {why}");
    }
}
