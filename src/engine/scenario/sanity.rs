//! Settings that are valid but cannot work as meant: warnings a command prints once on stderr
//! before it runs, never an error (a scenario may mean it: a timeout storm on purpose).
//!
//! - A client timeout per attempt below the fastest answers a provider gives (its latency's
//!   5th percentile): nearly every call times out.
//! - A think time longer on average than the whole run: most sessions send one query.
//! - A model turn between rounds with `rounds = 1`: it is never taken (its provider gets no
//!   request from it).
//! - Values that look like the wrong unit: a latency sent to a provider averaging under 1 ms
//!   (`mean_ms = 0.9` meant as seconds; a local tool may be that fast, so tools sent to `none`
//!   are left alone), and a think time averaging under 100 ms (`mean_ms = 60` meant as
//!   seconds).

use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;

use super::{Scenario, Stop};

/// Draws used to estimate a latency's 5th percentile (deterministic: a fixed seed).
const DRAWS: usize = 4_000;

/// The 5th percentile of `latency`, in ms, from [`DRAWS`] draws of a fixed-seed generator.
fn p5(latency: &capsize_mock::Latency) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5A_17);
    let mut draws: Vec<f64> = (0..DRAWS).map(|_| latency.sample(&mut rng)).collect();
    draws.sort_by(f64::total_cmp);
    draws[DRAWS / 20]
}

/// Every warning `s` deserves, one line each, naming the keys involved.
pub fn warnings(s: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let timeout_ms = s.scheduler.timeout.as_secs_f64() * 1000.0;
    for p in &s.providers {
        let fastest = p5(&p.config.latency);
        if timeout_ms < fastest {
            let at = if s.named_providers {
                format!("providers.{}", p.name)
            } else {
                "provider".to_string()
            };
            out.push(format!(
                "scheduler.timeout_ms = {} is below {at}.latency's 5th percentile (~{} ms): nearly every call will time out",
                crate::fmt::fmt_num(timeout_ms),
                crate::fmt::fmt_num(fastest.round())
            ));
        }
    }
    if let (Some(think), Stop::Duration(run)) = (&s.workload.think_time, s.workload.stop) {
        let think_s = think.mean() / 1000.0;
        if think_s > run.as_secs_f64() {
            out.push(format!(
                "workload.think_time's mean ({} s) is longer than the run (duration_s = {}): most sessions will send one query",
                crate::fmt::fmt_num(think_s),
                crate::fmt::fmt_num(run.as_secs_f64())
            ));
        }
    }
    out.extend(wrong_units(s));
    if let Some(turn) = &s.workload.model_turn {
        if turn.turns(s.workload.rounds) == 0 {
            out.push(
                "workload.model_turn is never taken: model turns go between rounds and workload.rounds = 1; set model_turn.at = \"around\" for a turn before the round and one to answer (rounds + 1), or rounds = 2 or more"
                    .to_string(),
            );
        }
    }
    out
}

/// Below this mean (ms), a latency at a provider looks like seconds written as ms.
const FASTEST_PROVIDER_MS: f64 = 1.0;
/// Below this mean (ms), a think time looks like seconds written as ms.
const SHORTEST_THINK_MS: f64 = 100.0;

/// `key`'s mean of `mean_ms` ms, which looks like seconds written as ms.
fn looks_like_seconds(key: &str, mean_ms: f64, what: &str) -> String {
    let f = crate::fmt::fmt_num;
    format!(
        "{key}'s mean is {} ms, {what}: if you meant {} s, write {} ms (every duration in a scenario is in ms)",
        f(mean_ms),
        f(mean_ms),
        f(mean_ms * 1000.0)
    )
}

/// The latencies and think time of `s` that look like the wrong unit.
fn wrong_units(s: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let provider_key = |i: usize| match s.named_providers {
        true => format!("providers.{}", s.providers[i].name),
        false => "provider".to_string(),
    };
    let slow = "an API's answers take hundreds of ms or more";
    let mut latency = |key: String, l: &capsize_mock::Latency| {
        let mean = l.mean();
        if mean > 0.0 && mean < FASTEST_PROVIDER_MS {
            out.push(looks_like_seconds(&key, mean, slow));
        }
    };
    for (i, p) in s.providers.iter().enumerate() {
        latency(format!("{}.latency", provider_key(i)), &p.config.latency);
    }
    let w = &s.workload;
    for (i, t) in w.tools.iter().enumerate() {
        if let (Some(l), super::Target::Provider(_)) = (&t.latency, t.target) {
            latency(format!("workload.tools[{i}].latency"), l);
        }
    }
    if let Some(l) = w.model_turn.as_ref().and_then(|t| t.latency.as_ref()) {
        latency("workload.model_turn.latency".into(), l);
    }
    if let Some(think) = &w.think_time {
        let mean = think.mean();
        if mean > 0.0 && mean < SHORTEST_THINK_MS {
            out.push(looks_like_seconds(
                "workload.think_time",
                mean,
                "a pause between queries of a person or an agent is seconds",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scenario(scheduler: &str, workload: &str) -> Scenario {
        let text = format!(
            "name = \"w\"\n[provider]\nrpm = 600\nlatency = {{ dist = \"uniform\", min_ms = 200, max_ms = 900 }}\n[workload]\nmode = \"closed\"\nsessions = 2\ncalls_per_query = 2\ntokens_per_call = 100\n{workload}\n[scheduler]\nmax_concurrency = 4\n{scheduler}\n"
        );
        super::super::parse(&text, Path::new("w.toml"), &[]).expect("a valid scenario")
    }

    #[test]
    fn a_model_turn_with_one_round_is_named_never_taken() {
        let turn = "queries = 10\nmodel_turn = { tokens = 100 }";
        let w = warnings(&scenario("", turn));
        assert_eq!(
            w,
            ["workload.model_turn is never taken: model turns go between rounds and workload.rounds = 1; set model_turn.at = \"around\" for a turn before the round and one to answer (rounds + 1), or rounds = 2 or more"]
        );
        assert!(warnings(&scenario("", &format!("{turn}\nrounds = 2"))).is_empty());
        let around = "queries = 10\nmodel_turn = { tokens = 100, at = \"around\" }";
        assert!(warnings(&scenario("", around)).is_empty());
    }

    #[test]
    fn a_timeout_below_the_fastest_answers_is_named() {
        // U[200, 900]: the 5th percentile is 235 ms.
        let w = warnings(&scenario("timeout_ms = 100", "queries = 10"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "scheduler.timeout_ms = 100 is below provider.latency's 5th percentile (~23"
            ),
            "{w:?}"
        );
        assert!(warnings(&scenario("timeout_ms = 300", "queries = 10")).is_empty());
    }

    #[test]
    fn values_that_look_like_seconds_written_as_ms_are_named() {
        let think = "queries = 10\nthink_time = { dist = \"exponential\", mean_ms = 60 }";
        assert_eq!(
            warnings(&scenario("", think)),
            ["workload.think_time's mean is 60 ms, a pause between queries of a person or an agent is seconds: if you meant 60 s, write 60,000 ms (every duration in a scenario is in ms)"]
        );
        let text = "name = \"w\"\n[provider]\nrpm = 600\nlatency = { dist = \"constant\", ms = 0.9 }\n[workload]\nqueries = 1\ncalls_per_query = 1\ntokens_per_call = 0\ntools = [{ name = \"calc\", provider = \"none\", latency = { dist = \"constant\", ms = 0.2 } }, { name = \"web\", latency = { dist = \"constant\", ms = 0.5 } }]\n";
        let s = super::super::parse(text, Path::new("w.toml"), &[]).unwrap();
        assert_eq!(
            warnings(&s),
            [
                "provider.latency's mean is 0.9 ms, an API's answers take hundreds of ms or more: if you meant 0.9 s, write 900 ms (every duration in a scenario is in ms)",
                "workload.tools[1].latency's mean is 0.5 ms, an API's answers take hundreds of ms or more: if you meant 0.5 s, write 500 ms (every duration in a scenario is in ms)",
            ]
        );
        // Plausible values: no warning.
        assert!(warnings(&scenario(
            "",
            "queries = 10\nthink_time = { dist = \"exponential\", mean_ms = 2000 }"
        ))
        .is_empty());
    }

    #[test]
    fn a_think_time_longer_than_the_run_is_named() {
        let long = "duration_s = 60\nthink_time = { dist = \"constant\", ms = 120000 }";
        assert_eq!(
            warnings(&scenario("", long)),
            ["workload.think_time's mean (120 s) is longer than the run (duration_s = 60): most sessions will send one query"]
        );
        let short = "duration_s = 600\nthink_time = { dist = \"constant\", ms = 120000 }";
        assert!(warnings(&scenario("", short)).is_empty());
    }
}
