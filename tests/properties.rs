//! Generated inputs: scenarios built from the whole key space, valid and mutated (wrong types,
//! 0, negative, NaN, inf, 1e308, i64 extremes, huge strings, unicode, deep nesting, missing and
//! unknown keys). Every one is answered: refused with one line, or run (kept small: a handful
//! of queries) to the end or to the watchdog, never a panic or a hang; and every run that
//! completes keeps the accounting identities. A sample also goes through the binary, which must
//! exit 0, 2 or 4 with one line on stderr for a refusal or a failure.
//!
//! CI runs `PROPTEST_CASES` cases (default 3,000); run it longer with e.g.
//! `PROPTEST_CASES=100000 cargo test --release --test properties`.

use std::sync::mpsc;
use std::time::Duration;

use capsize::engine::scenario::{self, Arrivals, Count, Scenario, Stop};
use capsize::engine::sim::{self, SimError};
use capsize::output::report::summary::Summary;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use toml::{Table, Value};

mod common;
use common::temp::Temp;
use common::{capsize, stderr};

// --- the key space ----------------------------------------------------------------------

fn num(lo: f64, hi: f64) -> BoxedStrategy<Value> {
    prop_oneof![
        (lo..hi).prop_map(Value::Float),
        ((lo.ceil() as i64)..=(hi.floor() as i64).max(lo.ceil() as i64)).prop_map(Value::Integer),
    ]
    .boxed()
}

fn int(lo: i64, hi: i64) -> BoxedStrategy<Value> {
    (lo..=hi).prop_map(Value::Integer).boxed()
}

fn word(words: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop::sample::select(words)
        .prop_map(|w| Value::String(w.to_string()))
        .boxed()
}

fn table(entries: Vec<(&'static str, Value)>) -> Value {
    Value::Table(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// A latency distribution, mixtures nested up to `depth`.
fn latency(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        num(0.0, 500.0).prop_map(|ms| table(vec![("dist", "constant".into()), ("ms", ms)])),
        (num(0.0, 200.0), num(200.0, 900.0)).prop_map(|(a, b)| table(vec![
            ("dist", "uniform".into()),
            ("min_ms", a),
            ("max_ms", b)
        ])),
        (num(1.0, 400.0), num(0.0, 200.0)).prop_map(|(m, sd)| table(vec![
            ("dist", "normal".into()),
            ("mean_ms", m),
            ("sd_ms", sd)
        ])),
        // A log-normal's p95 lies between its mean and 3.87 times it.
        (50.0..400.0f64, 1.05..3.8f64).prop_map(|(m, k)| table(vec![
            ("dist", "lognormal".into()),
            ("mean_ms", Value::Float(m)),
            ("p95_ms", Value::Float(m * k))
        ])),
        (num(-2.0, 6.0), num(0.0, 3.0)).prop_map(|(mu, s)| table(vec![
            ("dist", "lognormal".into()),
            ("mu", mu),
            ("sigma", s)
        ])),
        num(1.0, 500.0).prop_map(|m| table(vec![("dist", "exponential".into()), ("mean_ms", m)])),
        (num(1.0, 100.0), num(1.1, 4.0)).prop_map(|(s, a)| table(vec![
            ("dist", "pareto".into()),
            ("scale_ms", s),
            ("shape", a)
        ])),
        prop::collection::vec(num(0.0, 900.0), 1..6).prop_map(|v| table(vec![
            ("dist", "empirical".into()),
            ("values_ms", Value::Array(v))
        ])),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let component = (num(0.1, 5.0), latency(depth - 1)).prop_map(|(w, d)| {
        let mut t = d.as_table().cloned().unwrap_or_default();
        t.insert("weight".into(), w);
        Value::Table(t)
    });
    prop_oneof![
        4 => leaf,
        1 => prop::collection::vec(component, 1..3).prop_map(|c| table(vec![
            ("dist", "mixture".into()),
            ("components", Value::Array(c))
        ])),
    ]
    .boxed()
}

fn maybe(s: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
    prop::option::of(s).boxed()
}

fn provider() -> impl Strategy<Value = Value> {
    (
        maybe(num(10.0, 5000.0)),
        maybe(num(10_000.0, 10_000_000.0)),
        word(&["sliding", "fixed", "token_bucket"]),
        prop_oneof![word(&["auto", "none"]), num(0.0, 5.0)],
        latency(2),
        maybe(int(1, 50)),
        word(&["queue", "429", "503"]),
        num(0.0, 0.3),
        num(0.0, 0.1),
    )
        .prop_map(|(rpm, tpm, window, ra, lat, mif, over, er, tr)| {
            let mut t = Table::new();
            rpm.map(|v| t.insert("rpm".into(), v));
            tpm.map(|v| t.insert("tpm".into(), v));
            t.insert("window".into(), window);
            t.insert("retry_after".into(), ra);
            t.insert("latency".into(), lat);
            mif.map(|v| t.insert("max_in_flight".into(), v));
            t.insert("overload".into(), over);
            t.insert("error_rate".into(), er);
            t.insert("timeout_rate".into(), tr);
            Value::Table(t)
        })
}

fn count() -> BoxedStrategy<Value> {
    prop_oneof![
        int(0, 6),
        (0i64..3, 3i64..8).prop_map(|(a, b)| table(vec![
            ("dist", "uniform_int".into()),
            ("min", Value::Integer(a)),
            ("max", Value::Integer(b))
        ])),
    ]
    .boxed()
}

fn workload() -> impl Strategy<Value = Value> {
    let shape = (
        any::<bool>(),
        int(1, 5),
        num(0.5, 50.0),
        word(&["poisson", "constant"]),
        prop_oneof![
            int(1, 6).prop_map(|q| ("queries", q)),
            num(0.1, 3.0).prop_map(|d| ("duration_s", d))
        ],
        count(),
        prop_oneof![int(1, 3000), count()],
        int(1, 3),
    );
    let extras = (
        maybe(
            (int(1, 3000), maybe(latency(0)))
                .prop_map(|(t, l)| {
                    let mut m = Table::new();
                    m.insert("tokens".into(), t);
                    l.map(|l| m.insert("latency".into(), l));
                    Value::Table(m)
                })
                .boxed(),
        ),
        maybe(latency(0)),
        num(0.0, 1.0),
        maybe(num(50.0, 5000.0)),
        maybe(num(0.1, 3.0)),
        maybe(
            (
                int(1, 3),
                int(0, 20_000),
                int(0, 60_000),
                maybe(int(1, 4)),
                int(0, 3000),
            )
                .prop_map(|(c, b, o, it, s)| {
                    let mut m = Table::new();
                    m.insert("count".into(), c);
                    m.insert("budget_tokens".into(), b);
                    m.insert("orchestrator_budget".into(), o);
                    it.map(|v| m.insert("max_iterations".into(), v));
                    m.insert("synthesis_tokens".into(), s);
                    Value::Table(m)
                })
                .boxed(),
        ),
    );
    (shape, extras).prop_map(
        |(
            (closed, sessions, rate, arrival, stop, calls, tokens, rounds),
            (turn, think, wf, pt, stop_at, sub),
        )| {
            let mut t = Table::new();
            if closed {
                t.insert("mode".into(), "closed".into());
                t.insert("sessions".into(), sessions);
            } else {
                t.insert("mode".into(), "open".into());
                t.insert("arrival_rate".into(), rate);
                t.insert("arrival".into(), arrival);
            }
            t.insert(stop.0.into(), stop.1);
            t.insert("calls_per_query".into(), calls);
            t.insert("tokens_per_call".into(), tokens);
            t.insert("rounds".into(), rounds);
            turn.map(|v| t.insert("model_turn".into(), v));
            think.map(|v| t.insert("think_time".into(), v));
            t.insert("write_fraction".into(), wf);
            pt.map(|v| t.insert("parent_timeout_ms".into(), v));
            stop_at.map(|v| t.insert("stop_at_s".into(), v));
            sub.map(|v| t.insert("subagents".into(), v));
            Value::Table(t)
        },
    )
}

fn scheduler() -> impl Strategy<Value = Value> {
    (
        int(0, 8),
        num(0.1, 1.0),
        any::<bool>(),
        num(0.1, 3.0),
        (
            int(0, 4),
            num(0.0, 500.0),
            num(500.0, 5000.0),
            word(&["full", "equal", "none"]),
            any::<bool>(),
            any::<bool>(),
        ),
        num(100.0, 60_000.0),
        int(0, 10),
        word(&["truncate", "batch"]),
        any::<bool>(),
    )
        .prop_map(
            |(mc, h, rl, burst, (mr, base, cap, jit, honor, rto), timeout, mpt, over, tc)| {
                let retry = table(vec![
                    ("max_retries", mr),
                    ("base_ms", base),
                    ("cap_ms", cap),
                    ("jitter", jit),
                    ("honor_retry_after", Value::Boolean(honor)),
                    ("retry_timeouts", Value::Boolean(rto)),
                ]);
                table(vec![
                    ("max_concurrency", mc),
                    ("headroom", h),
                    ("rate_limit", Value::Boolean(rl)),
                    ("burst_s", burst),
                    ("retry", retry),
                    ("timeout_ms", timeout),
                    ("max_parallel_tools", mpt),
                    ("over_cap", over),
                    ("transport_cancel", Value::Boolean(tc)),
                ])
            },
        )
}

fn valid() -> impl Strategy<Value = Table> {
    (
        "[a-z][a-z0-9-]{0,12}",
        0i64..1000,
        provider(),
        workload(),
        scheduler(),
    )
        .prop_map(|(name, seed, p, w, s)| {
            let mut t = Table::new();
            t.insert("name".into(), Value::String(name));
            t.insert("seed".into(), Value::Integer(seed));
            t.insert("provider".into(), p);
            t.insert("workload".into(), w);
            t.insert("scheduler".into(), s);
            t
        })
}

/// A value no key expects, or a boundary one that some refuse.
fn hostile() -> BoxedStrategy<Value> {
    let nested = (1usize..40).prop_map(|depth| {
        let mut v = Value::Integer(1);
        for _ in 0..depth {
            v = table(vec![("a", v)]);
        }
        v
    });
    prop_oneof![
        Just(Value::Integer(0)),
        Just(Value::Integer(-1)),
        Just(Value::Float(-0.5)),
        Just(Value::Float(f64::NAN)),
        Just(Value::Float(f64::INFINITY)),
        Just(Value::Float(f64::NEG_INFINITY)),
        Just(Value::Float(1e308)),
        Just(Value::Float(5e-324)),
        Just(Value::Integer(i64::MAX)),
        Just(Value::Integer(i64::MIN)),
        Just(Value::Integer(4_294_967_295)),
        Just(Value::String(String::new())),
        Just(Value::String("x".repeat(100_000))),
        Just(Value::String("ü\u{202e}\u{1b}[31m<b>\n# h".into())),
        Just(Value::Boolean(true)),
        Just(Value::Array(vec![])),
        Just(Value::Array((0..1000).map(Value::Integer).collect())),
        nested,
        latency(3),
    ]
    .boxed()
}

/// Every key path of `t`, tables included.
fn paths(t: &Table, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for (k, v) in t {
        let mut p = prefix.to_vec();
        p.push(k.clone());
        out.push(p.clone());
        if let Value::Table(inner) = v {
            paths(inner, &p, out);
        }
    }
}

fn at<'a>(t: &'a mut Table, path: &[String]) -> Option<&'a mut Table> {
    let mut cur = t;
    for k in path {
        cur = cur.get_mut(k)?.as_table_mut()?;
    }
    Some(cur)
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    Unknown(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<usize>(), hostile()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Unknown),
    ]
}

fn mutate(t: &mut Table, m: &Mutation) {
    let mut all = Vec::new();
    paths(t, &[], &mut all);
    let pick = |i: usize| all[i % all.len()].clone();
    match m {
        Mutation::Replace(i, v) => {
            let p = pick(*i);
            if let Some(parent) = at(t, &p[..p.len() - 1]) {
                parent.insert(p[p.len() - 1].clone(), v.clone());
            }
        }
        Mutation::Remove(i) => {
            let p = pick(*i);
            if let Some(parent) = at(t, &p[..p.len() - 1]) {
                parent.remove(&p[p.len() - 1]);
            }
        }
        Mutation::Unknown(i) => {
            let p = pick(*i);
            if let Some(parent) = at(t, &p[..p.len() - 1]) {
                parent.insert("no_such_key".into(), Value::Integer(1));
            }
        }
    }
}

fn document() -> impl Strategy<Value = String> {
    (valid(), prop::collection::vec(mutation(), 0..3)).prop_map(|(mut t, ms)| {
        for m in &ms {
            mutate(&mut t, m);
        }
        toml::to_string(&t).unwrap_or_default()
    })
}

// --- the checks ---------------------------------------------------------------------------

/// Keeps a run small whatever the scenario says: a handful of queries, calls and sessions.
fn small(mut s: Scenario) -> Scenario {
    let w = &mut s.workload;
    w.stop = match w.stop {
        Stop::Queries(n) => Stop::Queries(n.min(6)),
        // Open: about six arrivals. Closed: a session starts at most one query a model
        // microsecond, so 5 ms is at most 5,000 queries a session (queries that take no time).
        Stop::Duration(d) => Stop::Duration(d.min(match w.arrivals {
            Arrivals::Open { rate, .. } => Duration::from_secs_f64((6.0 / rate).min(3600.0)),
            Arrivals::Closed { .. } => Duration::from_millis(5),
        })),
    };
    if let Arrivals::Closed { sessions } = &mut w.arrivals {
        *sessions = (*sessions).min(5);
    }
    w.calls_per_query = match w.calls_per_query {
        Count::Fixed(n) => Count::Fixed(n.min(12)),
        Count::Uniform(lo, hi) => Count::Uniform(lo.min(12), hi.min(12)),
    };
    w.rounds = w.rounds.min(4);
    if let Some(sub) = &mut w.subagents {
        sub.count = sub.count.min(4);
    }
    s.scheduler.retry.max_retries = s.scheduler.retry.max_retries.min(4);
    s
}

/// What one document came to.
#[derive(Debug)]
enum Answer {
    Refused,
    Ran,
    Watchdog,
}

fn identities(s: &Summary) -> Result<(), String> {
    let p = &s.provider.counters;
    let ok = s.latency_ms.call.count;
    let checks = [
        (p.received == s.attempts, "provider received = attempts"),
        (
            p.received == p.served + p.rate_limited + p.errored + p.timed_out,
            "received = served + rate_limited + errored + timed_out",
        ),
        (
            s.calls == ok + s.errors + s.cancelled,
            "calls = ok + errors + cancelled",
        ),
        (
            s.queries_started == s.queries + s.queries_abandoned,
            "queries started = finished + abandoned",
        ),
    ];
    match checks.iter().find(|(holds, _)| !holds) {
        Some((_, what)) => Err(format!("{what} fails: {}", s.to_json())),
        None => Ok(()),
    }
}

/// Validates and (if valid) runs `text` in-process on a thread of its own, under a wall-clock
/// watchdog: a panic or a hang fails the property.
fn answer(text: &str) -> Result<Answer, String> {
    let path = std::path::Path::new("generated.toml");
    let scenario = match scenario::parse(text, path, &[]) {
        Err(e) => {
            let line = e.to_string();
            return if line.contains('\n') {
                Err(format!("a refusal of more than one line: {line:?}"))
            } else {
                Ok(Answer::Refused)
            };
        }
        Ok(s) => small(s),
    };
    let (tx, rx) = mpsc::channel();
    let s2 = scenario.clone();
    std::thread::spawn(move || {
        let out = std::panic::catch_unwind(|| sim::run(&s2));
        let _ = tx.send(out.map_err(|_| ()));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Err(_) => Err(format!("no answer within 60 s: {text}")),
        Ok(Err(())) => Err(format!("panicked on {text}")),
        Ok(Ok(Err(SimError::Watchdog(_)))) => Ok(Answer::Watchdog),
        Ok(Ok(Err(e))) => Err(format!("{e} on {text}")),
        Ok(Ok(Ok(outcome))) => {
            identities(&Summary::new(&scenario, &outcome))?;
            Ok(Answer::Ran)
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn every_generated_scenario_is_answered_and_every_run_adds_up() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::cell::Cell::new((0u32, 0u32, 0u32));
    let result = runner.run(&document(), |text| {
        let (r, n, w) = tally.get();
        tally.set(match answer(&text) {
            Ok(Answer::Refused) => (r + 1, n, w),
            Ok(Answer::Ran) => (r, n + 1, w),
            Ok(Answer::Watchdog) => (r, n, w + 1),
            Err(e) => return Err(TestCaseError::fail(e)),
        });
        Ok(())
    });
    let (refused, ran, watchdog) = tally.get();
    eprintln!(
        "generated scenarios: {refused} refused, {ran} ran, {watchdog} stopped by the watchdog"
    );
    result.unwrap();
    // The generator must reach both sides, or the property says little.
    assert!(refused > 0 && ran > 0, "{refused} refused, {ran} ran");
    // Memory follows the work: no case may have grown the process past a bound.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(kb) = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    {
        assert!(kb < 2 << 20, "peak RSS {kb} kB");
    }
}

#[test]
fn the_binary_answers_generated_scenarios_with_an_exit_code_and_one_line() {
    let t = Temp::new("properties", "binary");
    let mut runner = TestRunner::new(Config {
        cases: (cases() / 8).max(16),
        failure_persistence: None,
        ..Config::default()
    });
    let file = t.path("s.toml");
    let out = t.path("out");
    runner
        .run(&document(), |text| {
            // Only documents that run small as written: the binary gets no size cap.
            let small_as_written = match scenario::parse(&text, &file, &[]) {
                Err(_) => true,
                Ok(s) => small(s.clone()) == s,
            };
            if !small_as_written {
                return Ok(());
            }
            std::fs::write(&file, &text).unwrap();
            let o = capsize(&[
                "run",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ]);
            let code = o.status.code();
            let err = stderr(&o);
            prop_assert!(
                matches!(code, Some(0 | 2 | 4)),
                "exit {code:?} on {text}: {err}"
            );
            if code != Some(0) {
                prop_assert_eq!(err.lines().count(), 1, "{}", err);
            }
            Ok(())
        })
        .unwrap();
}
