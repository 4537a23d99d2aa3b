//! A fleet's replicas as separate processes, on separate machines if need be
//! (`capsize run --mode realtime --replica I/K --run-id ID`): each runs one replica of the
//! scenario's fleet and its round-robin share of the workload ([`Slice`]) against one target,
//! keeps the fleet's limiter in the Redis of `--fleet-redis` under keys named by the run id
//! (so every process of the run shares it), and starts when all K have joined, at an instant
//! agreed on Redis's clock ([`start_together`]). Each hands back its whole outcome as data
//! ([`Record`]); [`combine`] adds the K into the fleet's, as one process running every replica
//! would have recorded it.

use std::time::Duration;

use capsize_mock::Counters;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{LimitStats, Mode, SimOutcome};
use crate::engine::recorder::Recording;
use crate::engine::scenario::identity::{FileDigest, Identity};

mod start;
pub use start::start_together;

/// How long a replica waits at the start line for the others, unless told
/// ([`ReplicaOf::join_wait`]).
pub const JOIN_WAIT: Duration = Duration::from_secs(120);

/// The part of a fleet's workload one process drives: replica `index` (from 0) of `count`
/// replicas run as separate processes, each taking the sessions `j` and the arrivals `n` with
/// `j mod count = index` (its round-robin share); [`Slice::WHOLE`] is all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// This process's replica, from 0.
    pub index: u64,
    /// How many replicas share the workload.
    pub count: u64,
}

impl Slice {
    /// The whole workload, in one process.
    pub const WHOLE: Slice = Slice { index: 0, count: 1 };

    pub(super) fn takes(self, n: u64) -> bool {
        n % self.count == self.index
    }

    /// This slice's share of `n` queries.
    pub(super) fn share(self, n: u64) -> u64 {
        n / self.count + u64::from(self.index < n % self.count)
    }
}

/// What every replica of one run must agree on: the capsize, the scenario's [`Identity`] (its
/// bytes, its files', the `--set` arguments with the seed) and the time scale. Agreed at the
/// start line ([`start_together`]) and compared again by the merge ([`Record::differs`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terms {
    /// The capsize that runs it.
    pub capsize: String,
    /// The scenario, its files and its overrides.
    pub identity: Identity,
    /// The run's time scale.
    pub time_scale: f64,
}

impl Terms {
    /// The terms of a run of `identity` at `time_scale` by this capsize.
    pub fn new(identity: Identity, time_scale: f64) -> Terms {
        Terms {
            capsize: crate::engine::VERSION.into(),
            identity,
            time_scale,
        }
    }

    /// What differs between two replicas' terms, in a few words (`None`: the same).
    pub fn differs(&self, o: &Terms) -> Option<String> {
        if self.capsize != o.capsize {
            return Some(format!(
                "capsize versions {:?} and {:?}",
                self.capsize, o.capsize
            ));
        }
        if let Some(what) = self.identity.differs(&o.identity) {
            return Some(what);
        }
        if self.time_scale != o.time_scale {
            return Some(format!(
                "time scales {:?} and {:?}",
                self.time_scale, o.time_scale
            ));
        }
        None
    }
}

/// Which replica of a fleet run as separate processes this process is.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaOf {
    /// From 0.
    pub index: u64,
    /// The replicas of the run (the scenario's `fleet.replicas`).
    pub count: u64,
    /// The run's id, the same in every replica's process: it names the run's keys on Redis.
    pub run_id: String,
    /// How long it waits at the start line for the others.
    pub join_wait: Duration,
    /// What it runs, which every replica of the run must run too.
    pub terms: Terms,
}

impl ReplicaOf {
    /// Reads `--replica I/K` (1 ≤ I ≤ K ≤ 1,000) and `--run-id` (letters, digits, `-`, `_`, `.`;
    /// 1 to 64), of a run on `terms` (computed only once the flags are read).
    pub fn parse(
        replica: &str,
        run_id: &str,
        terms: impl FnOnce() -> Result<Terms, String>,
    ) -> Result<ReplicaOf, String> {
        let bad = || format!("--replica {replica:?}: expected I/K with 1 <= I <= K, e.g. 2/3");
        let (i, k) = replica.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = k.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count || count > 1_000 {
            return Err(format!(
                "--replica {replica:?}: I from 1 to K, K from 1 to 1000"
            ));
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        if run_id.is_empty() || run_id.len() > 64 || !run_id.chars().all(ok) {
            return Err(format!(
                "--run-id {run_id:?}: 1 to 64 letters, digits, '-', '_' or '.'"
            ));
        }
        Ok(ReplicaOf {
            index: index - 1,
            count,
            run_id: run_id.to_string(),
            join_wait: JOIN_WAIT,
            terms: terms()?,
        })
    }

    /// `2/3`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.index + 1, self.count)
    }

    /// The folder its outputs go into: `replica-2-of-3`.
    pub fn folder(&self) -> String {
        format!("replica-{}-of-{}", self.index + 1, self.count)
    }

    /// The part of the workload it drives.
    pub fn slice(&self) -> Slice {
        Slice {
            index: self.index,
            count: self.count,
        }
    }

    /// The prefix of the run's limiter keys on Redis: the run id, not the process, so the K
    /// processes keep one limiter.
    pub fn limiter_prefix(&self, scenario: &str) -> String {
        format!("capsize:{scenario}:run:{}", self.run_id)
    }

    fn key(&self, what: &str) -> String {
        format!("capsize:run:{}:{what}", self.run_id)
    }
}

/// An adaptive limit's figures, as data.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Limit {
    current: usize,
    min: usize,
    max: usize,
    decreases: u64,
    mean: f64,
}

/// A replica's outcome as data (`replica.json`): what `capsize merge` adds into the fleet's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    recording: Recording,
    provider: Counters,
    endpoints: Vec<Counters>,
    phases: Vec<Vec<Counters>>,
    elapsed_us: u64,
    span_us: u64,
    queries_started: u64,
    replica_queries: Vec<u64>,
    limits: Vec<Limit>,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl From<&SimOutcome> for Outcome {
    fn from(o: &SimOutcome) -> Outcome {
        Outcome {
            recording: o.recording.clone(),
            provider: o.provider,
            endpoints: o.endpoints.clone(),
            phases: o.phases.clone(),
            elapsed_us: us(o.elapsed),
            span_us: us(o.span),
            queries_started: o.queries_started,
            replica_queries: o.replica_queries.clone(),
            limits: o
                .limits
                .iter()
                .map(|l| Limit {
                    current: l.current,
                    min: l.min,
                    max: l.max,
                    decreases: l.decreases,
                    mean: l.mean,
                })
                .collect(),
        }
    }
}

impl From<Outcome> for SimOutcome {
    fn from(o: Outcome) -> SimOutcome {
        SimOutcome {
            mode: Mode::Realtime,
            recording: o.recording,
            provider: o.provider,
            endpoints: o.endpoints,
            phases: o.phases,
            elapsed: Duration::from_micros(o.elapsed_us),
            span: Duration::from_micros(o.span_us),
            queries_started: o.queries_started,
            replica_queries: o.replica_queries,
            limits: o
                .limits
                .into_iter()
                .map(|l| LimitStats {
                    current: l.current,
                    min: l.min,
                    max: l.max,
                    decreases: l.decreases,
                    mean: l.mean,
                })
                .collect(),
        }
    }
}

/// What one replica of a run hands `capsize merge`, by the kind of run: a fleet's real-time
/// run ([`Outcome`]), an agent's exec (`engine::exec::fleet::Piece`).
pub trait Piece: Serialize + DeserializeOwned + Clone {
    /// The record's `kind`, which a merge reads first.
    const KIND: &'static str;

    /// Whether its counts keep the identities a run's keep; `Err` names the one that fails.
    fn holds(&self) -> Result<(), String>;
}

impl Piece for Outcome {
    const KIND: &'static str = "capsize fleet replica";

    fn holds(&self) -> Result<(), String> {
        let add_up = crate::engine::summary::counters_add_up;
        add_up("provider", &self.provider)?;
        for (i, c) in self.endpoints.iter().enumerate() {
            add_up(&format!("endpoints[{i}]"), c)?;
        }
        for (i, phases) in self.phases.iter().enumerate() {
            for (j, c) in phases.iter().enumerate() {
                add_up(&format!("phases[{i}][{j}]"), c)?;
            }
        }
        self.recording.holds(self.queries_started)
    }
}

/// What a replica hands `capsize merge` (`replica.json`): which replica of which run, of which
/// scenario and overrides, and its whole outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound = "O: Piece")]
pub struct Record<O> {
    /// `O::KIND`.
    pub kind: String,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The capsize that ran it.
    pub capsize: String,
    /// The run's id.
    pub run_id: String,
    /// This replica, from 1.
    pub replica: u64,
    /// The fleet's replicas.
    pub replicas: u64,
    /// The scenario file as given on the command line.
    pub scenario: String,
    /// FNV-1a (64-bit, hex) of its bytes.
    pub scenario_fnv1a: String,
    /// Every file the scenario reads, with its FNV-1a.
    pub files: Vec<FileDigest>,
    /// The `--set` arguments (a `--seed` among them as `seed=N`).
    pub sets: Vec<String>,
    /// The run's time scale.
    pub time_scale: f64,
    /// What it recorded and saw.
    pub outcome: O,
}

/// The file a replica's [`Record`] is written to, in its folder (and read from by a merge).
pub const RECORD_FILE: &str = "replica.json";

/// The replica record's schema: a merge refuses any other (2: the files the scenario reads).
pub const SCHEMA_VERSION: u32 = 2;

/// The `kind` of a `replica.json`'s text, if it has one.
pub fn kind_of(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    serde_json::from_str::<Kind>(text).ok().map(|k| k.kind)
}

impl<O: Piece> Record<O> {
    /// The record of `me`'s run of `scenario` (its path as given) on `me`'s terms.
    pub fn new(me: &ReplicaOf, scenario: &str, outcome: O) -> Record<O> {
        let t = &me.terms;
        Record {
            kind: O::KIND.into(),
            schema_version: SCHEMA_VERSION,
            capsize: t.capsize.clone(),
            run_id: me.run_id.clone(),
            replica: me.index + 1,
            replicas: me.count,
            scenario: scenario.into(),
            scenario_fnv1a: t.identity.scenario_fnv1a.clone(),
            files: t.identity.files.clone(),
            sets: t.identity.sets.clone(),
            time_scale: t.time_scale,
            outcome,
        }
    }

    /// The terms the replica ran on.
    pub fn terms(&self) -> Terms {
        Terms {
            capsize: self.capsize.clone(),
            identity: Identity {
                scenario_fnv1a: self.scenario_fnv1a.clone(),
                files: self.files.clone(),
                sets: self.sets.clone(),
            },
            time_scale: self.time_scale,
        }
    }

    /// Reads a `replica.json`'s text; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<Record<O>, String> {
        if let Some(kind) = kind_of(text).filter(|k| k != O::KIND) {
            return Err(format!("kind {kind:?}: expected {:?}", O::KIND));
        }
        // The schema first: another schema's fields are not this one's.
        #[derive(Deserialize)]
        struct Head {
            schema_version: u32,
        }
        let head: Head = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if head.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "schema_version {}: this capsize reads {SCHEMA_VERSION}",
                head.schema_version
            ));
        }
        let r: Record<O> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        r.outcome.holds()?;
        if r.replica == 0 || r.replica > r.replicas {
            return Err(format!("replica {} of {}", r.replica, r.replicas));
        }
        Ok(r)
    }

    /// What differs between two replicas' runs (`None`: replicas of one run).
    pub fn differs(&self, o: &Record<O>) -> Option<String> {
        let say = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
            Some(format!("{what} {a:?} and {b:?}"))
        };
        if self.run_id != o.run_id {
            return say("run ids", &self.run_id, &o.run_id);
        }
        if self.replicas != o.replicas {
            return say("replica counts", &self.replicas, &o.replicas);
        }
        self.terms().differs(&o.terms())
    }
}

/// Checks `records` (each with where it was read from) are every replica of one run, once,
/// and returns their outcomes in replica order.
pub fn gather<O: Piece>(records: Vec<(String, Record<O>)>) -> Result<Vec<O>, String> {
    let Some((first_from, first)) = records.first().cloned() else {
        return Err("no replica to merge".into());
    };
    let mut slots: Vec<Option<(String, O)>> = vec![None; first.replicas as usize];
    for (from, r) in records {
        if let Some(what) = first.differs(&r) {
            return Err(format!(
                "{first_from} and {from} are replicas of different runs: {what}"
            ));
        }
        let slot = &mut slots[(r.replica - 1) as usize];
        if let Some((earlier, _)) = slot {
            return Err(format!(
                "replica {}/{} is given twice: {earlier} and {from}",
                r.replica, r.replicas
            ));
        }
        *slot = Some((from, r.outcome));
    }
    let missing: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{}/{}", i + 1, first.replicas))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} of {} replicas of run {} missing: {} (merge every replica of the run)",
            missing.len(),
            first.replicas,
            first.run_id,
            missing.join(", ")
        ));
    }
    Ok(slots.into_iter().flatten().map(|(_, o)| o).collect())
}

/// The later of two readings of one target's counters (they only grow): the one that has
/// received more.
fn later(a: Counters, b: Counters) -> Counters {
    if b.received >= a.received {
        b
    } else {
        a
    }
}

/// The fleet's outcome from its replicas', given in replica order: what the clients recorded
/// added up ([`Recording::absorb`]); the provider's counters as the last replica to finish
/// read them (every replica's traffic); the latest end; the replicas' queries side by side.
pub fn combine(outcomes: Vec<SimOutcome>) -> Result<SimOutcome, String> {
    let mut all = outcomes.into_iter();
    let mut fleet = all.next().ok_or("no replica to combine")?;
    for o in all {
        fleet.recording.absorb(&o.recording)?;
        fleet.provider = later(fleet.provider, o.provider);
        if fleet.endpoints.len() != o.endpoints.len() {
            return Err("the replicas sent to different endpoints".into());
        }
        for (a, b) in fleet.endpoints.iter_mut().zip(o.endpoints) {
            *a = later(*a, b);
        }
        for (a, b) in fleet.phases.iter_mut().zip(o.phases) {
            for (x, y) in a.iter_mut().zip(b) {
                *x = later(*x, y);
            }
        }
        fleet.elapsed = fleet.elapsed.max(o.elapsed);
        fleet.span = fleet.span.max(o.span);
        fleet.queries_started = fleet
            .queries_started
            .checked_add(o.queries_started)
            .ok_or("the replicas' queries started add up past 2^64")?;
        fleet.replica_queries.extend(o.replica_queries);
        fleet.limits.extend(o.limits);
    }
    Ok(fleet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_file_is_known_by_its_fnv1a() {
        // The reference values of FNV-1a 64.
        let hash = crate::engine::scenario::identity::fnv1a_hex;
        assert_eq!(hash(b""), "cbf29ce484222325");
        assert_eq!(hash(b"a"), "af63dc4c8601ec8c");
    }

    fn terms(sets: &[&str], time_scale: f64) -> Terms {
        Terms::new(
            Identity {
                scenario_fnv1a: "cbf29ce484222325".into(),
                files: Vec::new(),
                sets: sets.iter().map(|s| s.to_string()).collect(),
            },
            time_scale,
        )
    }

    #[test]
    fn replicas_agree_on_their_terms() {
        let a = terms(&[], 10.0);
        assert_eq!(a.differs(&a.clone()), None);
        assert_eq!(
            a.differs(&terms(&["scheduler.max_concurrency=1"], 10.0)),
            Some(r#"--set arguments [] and ["scheduler.max_concurrency=1"]"#.into())
        );
        assert_eq!(
            a.differs(&terms(&[], 20.0)),
            Some("time scales 10.0 and 20.0".into())
        );
    }

    #[test]
    fn replica_flags_are_checked() {
        let ok = || Ok(terms(&[], 1.0));
        let r = ReplicaOf::parse("2/3", "run-7", ok).expect("valid");
        assert_eq!(
            (r.index, r.count, r.label(), r.folder()),
            (1, 3, "2/3".into(), "replica-2-of-3".into())
        );
        assert_eq!(r.slice(), Slice { index: 1, count: 3 });
        assert_eq!(r.limiter_prefix("agent"), "capsize:agent:run:run-7");
        for (replica, id) in [
            ("0/3", "a"),
            ("4/3", "a"),
            ("x", "a"),
            ("1/3", ""),
            ("1/3", "a b"),
            ("1/1001", "a"),
        ] {
            assert!(ReplicaOf::parse(replica, id, ok).is_err(), "{replica} {id}");
        }
    }
}
