//! The client's own time, fitted. Where the provider's record of the calls (exec's
//! `calls.jsonl`) is read beside the agent's spans, the model calls' times come from the first
//! (the provider's answer alone) and the agent saw them take longer: building and sending each
//! request, reading and parsing its answer, and waiting for its own event loop to do so while
//! other tasks use it. That difference is fitted as a client model on one thread (an asyncio
//! agent's event loop; `assumed`): the work per request, half before it leaves and half after
//! its answer, each exponential, that makes the calibrated scenario's replay predict the model
//! calls' p50 the agent saw. Found by bisection on the replay, which is monotone in the work
//! (more work, longer calls).

use capsize_mock::Latency;

use crate::engine::scenario::{ClientModel, Scenario};
use crate::engine::sim::SimError;
use crate::engine::summary::Percentiles;

use super::check::pooled;
use super::model::Calibration;

/// How close the replay's p50 must come to the observed one (relative).
const CLOSE: f64 = 0.005;
/// The most replays a fit runs.
const MAX_STEPS: u32 = 16;

/// The client's own time, as fitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientFit {
    /// The model calls' p50 as the agent saw them (ms).
    pub observed_p50: f64,
    /// As the provider timed them: its answer alone (ms).
    pub provider_p50: f64,
    /// The replay's model-call p50 with the client costing nothing (ms).
    pub without_p50: f64,
    /// The work per request fitted (ms): half before it leaves, half after its answer.
    pub work_ms: f64,
    /// The replay's model-call p50 with it (ms).
    pub with_p50: f64,
    /// Whether the replay came within half a percent of the observed p50 (else `work_ms` is
    /// the closest the fit came).
    pub converged: bool,
}

fn model(work_ms: f64) -> ClientModel {
    ClientModel::one_thread(
        Latency::Exponential(work_ms / 2.0),
        Latency::Exponential(work_ms / 2.0),
    )
}

/// Fits the client's own time for `scenario` (the calibrated one) to what `cal` observed, if
/// the agent saw its model calls take longer than the replay predicts without it (`None`: it
/// did not, or `cal` has no model calls seen from both sides).
pub fn fit(scenario: &Scenario, cal: &Calibration) -> Result<Option<ClientFit>, SimError> {
    let (Some(prov), Some(seen)) = (&cal.provider, &cal.model_calls) else {
        return Ok(None);
    };
    let Some(provider_p50) = prov.latency.as_ref().map(|f| f.observed.p50) else {
        return Ok(None);
    };
    let name = Some(prov.name.as_str());
    let p50 = |work_ms: f64| -> Result<f64, SimError> {
        let mut s = scenario.clone();
        s.scheduler.client = (work_ms > 0.0).then(|| model(work_ms));
        let p = pooled(&s, name)?;
        // The model calls are the scenario's model turns, or, where a query is one model call,
        // its calls.
        let calls = match s.workload.model_turn {
            Some(_) => &p.turns,
            None => &p.calls,
        };
        Ok(Percentiles::of(calls).p50)
    };
    let observed = seen.p50;
    let without = p50(0.0)?;
    if without <= 0.0 || observed <= without * (1.0 + CLOSE) {
        return Ok(None);
    }
    // Bracket the answer: from the gap (work that queues adds more than itself; work drawn
    // exponentially, a little less at the median), doubled until the replay reaches it. The
    // closest replay of all is kept.
    let close = |at: f64| (at - observed).abs() <= CLOSE * observed;
    let (mut lo, mut hi) = (0.0, observed - without);
    let mut at_hi = p50(hi)?;
    let mut best = (hi, at_hi);
    let mut steps = 1;
    while at_hi < observed && !close(at_hi) && steps < MAX_STEPS / 2 {
        lo = hi;
        hi *= 2.0;
        at_hi = p50(hi)?;
        if (at_hi - observed).abs() < (best.1 - observed).abs() {
            best = (hi, at_hi);
        }
        steps += 1;
    }
    while !close(best.1) && at_hi >= observed && steps < MAX_STEPS {
        let mid = (lo + hi) / 2.0;
        let at = p50(mid)?;
        if at < observed {
            lo = mid;
        } else {
            hi = mid;
        }
        if (at - observed).abs() < (best.1 - observed).abs() {
            best = (mid, at);
        }
        steps += 1;
    }
    Ok(Some(ClientFit {
        observed_p50: observed,
        provider_p50,
        without_p50: without,
        work_ms: best.0,
        with_p50: best.1,
        converged: close(best.1),
    }))
}
