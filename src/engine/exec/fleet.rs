//! Agents that scale out: K processes, each running one agent as replica I of K
//! (`capsize exec --replica I/K --target URL`), all sending to one mock. Each hands back its
//! agent's end and its reading of the target's report ([`Member`], in `replica.json`);
//! [`combine`] makes the fleet's outcome: every agent's end, and the latest reading. Each
//! replica reads the target after its own agent ended, so the latest reading is after every
//! agent ended: the whole fleet's traffic, as the mock counted it.

use capsize_mock::server::Report;
use serde::{Deserialize, Serialize};

use super::AgentEnd;
use crate::engine::sim::replica::Piece;

/// One replica's exec, as its `replica.json` holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    /// The agent's command line, as given (before `{address}` was replaced).
    pub command: Vec<String>,
    /// How the agent ended.
    pub agent: AgentEnd,
    /// The target's report, read once this replica's agent had ended.
    pub report: Report,
}

impl Piece for Member {
    const KIND: &'static str = "capsize exec replica";

    /// The target's counts add up (as the mock's always do), in all and in each phase.
    fn holds(&self) -> Result<(), String> {
        let add_up = crate::engine::summary::counters_add_up;
        add_up("report.counters", &self.report.counters)?;
        for (i, c) in self.report.phases.iter().enumerate() {
            add_up(&format!("report.phases[{i}]"), c)?;
        }
        Ok(())
    }
}

/// The fleet's outcome.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// Each replica's command and agent's end, in replica order.
    pub agents: Vec<(Vec<String>, AgentEnd)>,
    /// The latest reading of the target: everything the fleet sent it.
    pub report: Report,
}

/// The fleet's outcome from its members, given in replica order. Every reading must be of one
/// run of the target (the one the first replica reset it to): a target reset again during the
/// run (another run started against it) is an error naming the readings.
pub fn combine(members: Vec<Member>) -> Result<Fleet, String> {
    let first = members.first().ok_or("no replica to combine")?;
    let generation = first.report.generation;
    if let Some((i, m)) = members
        .iter()
        .enumerate()
        .find(|(_, m)| m.report.generation != generation)
    {
        return Err(format!(
            "replicas 1 and {} read different runs of the target (resets {generation} and {}): it was reset during the run, so another run shared it; give each run a target of its own",
            i + 1,
            m.report.generation
        ));
    }
    let report = members
        .iter()
        .map(|m| &m.report)
        .max_by_key(|r| r.elapsed_us)
        .cloned()
        .ok_or("no replica to combine")?;
    let agents = members.into_iter().map(|m| (m.command, m.agent)).collect();
    Ok(Fleet { agents, report })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::exec::Ending;
    use std::time::Duration;

    fn member(generation: u64, elapsed_us: u64, received: u64) -> Member {
        let mut report: Report = serde_json::from_value(serde_json::json!({
            "generation": generation,
            "elapsed_us": elapsed_us,
            "counters": capsize_mock::Counters::default(),
            "traffic": {
                "traffic": capsize_mock::server::Traffic::default(),
                "series": { "bin_s": 1, "bins": [] },
                "peak_requests_per_60s": 0,
                "peak_tokens_per_60s": 0,
                "retry_waits": [[250_000, 2]]
            }
        }))
        .expect("a report");
        report.counters.received = received;
        Member {
            command: vec!["agent".into()],
            agent: AgentEnd {
                ending: Ending::Exited,
                exit_code: Some(0),
                signal: None,
                wall: Duration::from_secs(1),
            },
            report,
        }
    }

    #[test]
    fn the_latest_reading_is_the_fleets() {
        let fleet = combine(vec![
            member(3, 900, 10),
            member(3, 2_000, 30),
            member(3, 1_500, 20),
        ])
        .expect("one run");
        assert_eq!(fleet.report.counters.received, 30);
        assert_eq!(fleet.agents.len(), 3);
        // The retry waits came back as a histogram: two waits of 250 ms.
        assert_eq!(fleet.report.traffic.retry_waits.len(), 2);
        let err = combine(vec![member(3, 900, 10), member(4, 2_000, 30)]).unwrap_err();
        assert!(err.contains("resets 3 and 4"), "{err}");
    }
}
