//! A mock already running at a URL (`--target`), as a run or an agent's exec meets it: reached
//! (`GET /healthz`), checked to serve the scenario's model (`GET /config`), put back to a clean
//! start (`POST /reset`), and read (`GET /stats`, `GET /report`).

use capsize_mock::server::{differences, Described, Report, ServerConfig};
use capsize_mock::Counters;

use super::SimError;

/// The HTTP client for a target: no proxy (loopback and a cluster's own addresses alike).
pub fn client() -> Result<reqwest::Client, SimError> {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| SimError::Unreachable(format!("cannot build an HTTP client: {e}")))
}

/// Fails in one line, naming why, when nothing answers `GET /healthz` at `base` (`given`: the
/// user gave it as `--target`, rather than capsize starting it in-process).
pub async fn reach(client: &reqwest::Client, base: &str, given: bool) -> Result<(), SimError> {
    client
        .get(format!("{base}/healthz"))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| {
            let why = if e.is_connect() {
                if given {
                    "nothing listens there: start `capsize mock --scenario FILE` at that address, or drop --target to start one in-process".to_string()
                } else {
                    "the in-process mock does not answer".to_string()
                }
            } else if e.is_timeout() {
                "no answer in time".to_string()
            } else {
                e.to_string()
            };
            SimError::Unreachable(format!("{base}/healthz: {why}"))
        })?;
    Ok(())
}

/// What `GET /stats` says of the model (the rest of it is the clients' traffic).
pub struct Stats {
    /// The model's counters (the object's own keys).
    pub counters: Counters,
    /// Each phase's counters (absent: the provider has no phases).
    pub phases: Vec<Counters>,
}

/// `GET /stats`'s `phases`.
#[derive(serde::Deserialize)]
struct Phases {
    #[serde(default)]
    phases: Vec<Counters>,
}

impl Stats {
    /// What was counted since `before`, an earlier reading of the same provider.
    pub fn since(self, before: &Stats) -> Stats {
        let phases = self
            .phases
            .iter()
            .enumerate()
            .map(|(i, c)| c.since(before.phases.get(i).copied().unwrap_or_default()))
            .collect();
        Stats {
            counters: self.counters.since(before.counters),
            phases,
        }
    }
}

/// Puts the provider at `base` back to a clean start (`POST /reset`) before a run: `None`, it
/// counts from 0. A provider that cannot be reset (anything but a 2xx answer) is refused for
/// one of several runs (`single_run` false), which would each inherit the earlier ones'
/// windows and counts; for a single run its counters now are returned, to be taken off the
/// counters after the run (none if it cannot say: then the counters after the run are read as
/// they are, if they can be).
pub async fn start_clean(
    client: &reqwest::Client,
    base: &str,
    single_run: bool,
) -> Result<Option<Stats>, SimError> {
    let url = format!("{base}/reset");
    let answer = client
        .post(&url)
        .send()
        .await
        .map_err(|e| SimError::Unreachable(format!("{url}: {e}")))?;
    let status = answer.status();
    if status.is_success() {
        return Ok(None);
    }
    if !single_run {
        return Err(SimError::Mismatch(format!(
            "--target {base} cannot be reset (POST /reset answered {status}), and each run of this command must start on a clean provider: point --target at a capsize mock (it serves POST /reset), or leave --target out and capsize starts a fresh mock for each run"
        )));
    }
    Ok(stats(client, base).await.ok())
}

/// The bill of `GET /stats`, read alone.
#[derive(serde::Deserialize)]
struct Billed {
    #[serde(default)]
    billed: capsize_mock::Bill,
}

/// The mock's own counters, from `GET /stats`.
pub async fn stats(client: &reqwest::Client, base: &str) -> Result<Stats, SimError> {
    // The same counters the mock serialises: every key present, each a non-negative integer.
    // Read as two documents rather than through `#[serde(flatten)]`, whose buffer cannot hold
    // an integer above u64 (a bill's picodollars may be).
    let body = body(client, base, "/stats").await?;
    let read = |e: serde_json::Error| SimError::BadProvider(format!("{base}/stats: {e}"));
    let mut counters: Counters = serde_json::from_slice(&body).map_err(read)?;
    let Phases { phases } = serde_json::from_slice(&body).map_err(read)?;
    // The bill once more, exactly: Counters reads one as a summary holds it (the nearest f64
    // past u64), a bill read alone keeps every picodollar.
    counters.billed = serde_json::from_slice::<Billed>(&body)
        .map_err(read)?
        .billed;
    Ok(Stats { counters, phases })
}

/// Everything the mock at `base` has seen of its current run, from `GET /report`.
pub async fn report(client: &reqwest::Client, base: &str) -> Result<Report, SimError> {
    get(client, base, "/report").await
}

/// `GET path` at `base`, its JSON body read as `T`: unreachable, or unreadable (named).
async fn get<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    base: &str,
    path: &str,
) -> Result<T, SimError> {
    let body = body(client, base, path).await?;
    serde_json::from_slice(&body).map_err(|e| SimError::BadProvider(format!("{base}{path}: {e}")))
}

/// `GET path` at `base`, its body: unreachable (named).
async fn body(client: &reqwest::Client, base: &str, path: &str) -> Result<Vec<u8>, SimError> {
    let url = format!("{base}{path}");
    client
        .get(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| SimError::Unreachable(format!("{url}: {e}")))?
        .bytes()
        .await
        .map(|b| b.to_vec())
        .map_err(|e| SimError::Unreachable(format!("{url}: {e}")))
}

/// Checks that the mock at `base` serves `config`'s model (its seed aside).
pub async fn same_model(
    client: &reqwest::Client,
    base: &str,
    config: &ServerConfig,
) -> Result<(), SimError> {
    let url = format!("{base}/config");
    let unreadable = |e: String| {
        SimError::Mismatch(format!(
            "{url}: cannot tell what the mock serves ({e}); start it with this version of capsize (capsize mock --scenario ...)"
        ))
    };
    let body = client
        .get(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| unreadable(e.to_string()))?
        .bytes()
        .await
        .map_err(|e| unreadable(e.to_string()))?;
    let served: Described = serde_json::from_slice(&body).map_err(|e| unreadable(e.to_string()))?;
    let diffs = differences(&config.described().model, &served.model);
    if diffs.is_empty() {
        return Ok(());
    }
    Err(SimError::Mismatch(format!(
        "{base} serves another provider than this run expects: {}",
        diffs.join("; ")
    )))
}
