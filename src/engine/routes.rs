//! Where each kind of call of a run goes, resolved once from the scenario: the *endpoints*
//! (each provider, and one more for the tools that go to no provider) with the named services
//! each serves, and one *route* per kind of call (plain tool calls, model turns, each tool
//! class of `workload.tools`). Virtual and real time build the same routes: in-process models or
//! mock servers, one per endpoint.

use std::collections::BTreeMap;

use capsize_mock::{Latency, ProviderConfig};

use crate::engine::scenario::providers::NONE;
use crate::engine::scenario::{Scenario, Target};
use crate::engine::workload::{stream_seed, streams};

/// The route of plain tool calls (a workload without `tools`).
pub const TOOL: u16 = 0;
/// The route of model turns and syntheses.
pub const MODEL: u16 = 1;
/// The route of tool class `i` of `workload.tools`.
pub const fn tool_class(i: usize) -> u16 {
    2 + i as u16
}

/// The service name of the workload's model-turn latency (`x-capsize-latency` on the wire).
pub const MODEL_TURN: &str = "model_turn";

/// Something that answers calls: a provider of the scenario, or the unlimited one that serves
/// the tools sent to none.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The provider's name, or `"none"`.
    pub name: String,
    /// The scenario's provider it is, if any (its limits are the client limiter's).
    pub provider: Option<usize>,
    /// What it serves.
    pub config: ProviderConfig,
    /// Named latencies its routes ask for.
    pub latencies: BTreeMap<String, Latency>,
    /// Named error rates its routes ask for.
    pub error_rates: BTreeMap<String, f64>,
    /// The seed of its model's randomness.
    pub seed: u64,
}

/// Where one kind of call goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Index into [`Routes::endpoints`].
    pub endpoint: usize,
    /// The service it asks for there, if not the endpoint's own.
    pub service: Option<String>,
    /// A model turn (`POST /v1/chat/completions`), else a tool call (`POST /tools/{tool}`).
    pub model_turn: bool,
    /// The tool's name on the wire.
    pub tool: String,
    /// A model turn's `max_tokens` (`None`: it asks for no cap).
    pub max_tokens: Option<u64>,
    /// A model turn that asks for its answer streamed.
    pub stream: bool,
}

/// Every endpoint and route of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Routes {
    /// Providers first, in the scenario's order; then the unlimited endpoint, if any call
    /// goes to none.
    pub endpoints: Vec<Endpoint>,
    /// Indexed by route id: [`TOOL`], [`MODEL`], then [`tool_class`]`(i)`.
    pub routes: Vec<Route>,
}

impl Routes {
    /// The routes of `s`.
    pub fn of(s: &Scenario) -> Self {
        let mut endpoints: Vec<Endpoint> = s
            .providers
            .iter()
            .enumerate()
            .map(|(i, p)| Endpoint {
                name: p.name.clone(),
                provider: Some(i),
                config: p.config.clone(),
                latencies: BTreeMap::new(),
                error_rates: BTreeMap::new(),
                seed: seed(s.seed, i),
            })
            .collect();
        let w = &s.workload;
        let mut routes = Vec::with_capacity(2 + w.tools.len());
        let mut endpoint_of = |target: Target, latency: Option<&Latency>| match target {
            Target::Provider(i) => i,
            Target::Unlimited => {
                if endpoints.last().is_none_or(|e| e.provider.is_some()) {
                    let latency = latency.cloned().unwrap_or(Latency::Constant(0.0));
                    endpoints.push(Endpoint {
                        name: NONE.into(),
                        provider: None,
                        config: ProviderConfig::unlimited(latency),
                        latencies: BTreeMap::new(),
                        error_rates: BTreeMap::new(),
                        seed: seed(s.seed, s.providers.len()),
                    });
                }
                endpoints.len() - 1
            }
        };
        // A kind of call that never happens goes to the first endpoint, and opens none.
        let models = w.model_turn.is_some() || w.subagents.is_some_and(|a| a.synthesis_tokens > 0);
        let unused = Target::Provider(0);
        let tool = endpoint_of(
            if w.tools.is_empty() {
                w.tool_target
            } else {
                unused
            },
            None,
        );
        routes.push(Route {
            endpoint: tool,
            service: None,
            model_turn: false,
            tool: "call".into(),
            max_tokens: None,
            stream: false,
        });
        let model_latency = w.model_turn.as_ref().and_then(|t| t.latency.as_ref());
        let model = endpoint_of(if models { w.model_target } else { unused }, model_latency);
        routes.push(Route {
            endpoint: model,
            service: model_latency.map(|_| MODEL_TURN.to_string()),
            model_turn: true,
            tool: String::new(),
            max_tokens: w.model_turn.as_ref().and_then(|t| t.max_tokens),
            stream: w.model_turn.as_ref().is_some_and(|t| t.stream),
        });
        let mut services = Vec::new();
        if let Some(l) = model_latency {
            services.push((model, MODEL_TURN.to_string(), Some(l.clone()), None));
        }
        for t in &w.tools {
            let endpoint = endpoint_of(t.target, t.latency.as_ref());
            let own = t.latency.is_some() || t.error_rate.is_some();
            let service = own.then(|| format!("tool.{}", t.name));
            if let Some(name) = &service {
                services.push((endpoint, name.clone(), t.latency.clone(), t.error_rate));
            }
            routes.push(Route {
                endpoint,
                service,
                model_turn: false,
                tool: t.name.clone(),
                max_tokens: None,
                stream: false,
            });
        }
        for (e, name, latency, error_rate) in services {
            let endpoint = &mut endpoints[e];
            if let Some(l) = latency {
                endpoint.latencies.insert(name.clone(), l);
            }
            if let Some(r) = error_rate {
                endpoint.error_rates.insert(name, r);
            }
        }
        Routes { endpoints, routes }
    }
}

/// The seed of endpoint `i`'s model: the one provider's stream for the first (so a scenario
/// of one provider draws what it always drew), streams of their own for the rest.
fn seed(run: u64, i: usize) -> u64 {
    match i {
        0 => stream_seed(run, streams::PROVIDER),
        i => stream_seed(run, streams::PROVIDERS + i as u64),
    }
}
